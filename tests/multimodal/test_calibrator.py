import pytest
import torch

from llamaindex_posfair.multimodal.calibrator import (
    AttentionGuidedCalibrator,
    CalibrationMismatchError,
    CalibrationState,
    CalibratorConfig,
    self_consistency_scores,
)
from llamaindex_posfair.multimodal.evaluate import evaluate_methods
from research.multimodal.simulator import SimulatedMLLM, SimulatorConfig, make_samples


@pytest.fixture(scope="module")
def reports4(sim_fit4):
    sim, cal, test = sim_fit4
    rep = evaluate_methods(sim, cal, test)
    unbiased = evaluate_methods(sim.unbiased(), None, test, methods=("vanilla",))["vanilla"]
    return rep, unbiased


def test_planted_bias_makes_vanilla_pick_the_favoured_slot(reports4):
    rep, _ = reports4
    assert rep["vanilla"].per_slot[0] > 95.0
    assert rep["vanilla"].per_slot[-1] < 10.0


def test_ours_recovers_accuracy_close_to_unbiased(reports4):
    rep, unbiased = reports4
    assert rep["ours"].accuracy >= unbiased.accuracy - 8.0


def test_ours_recovers_rstd_close_to_unbiased(reports4):
    rep, unbiased = reports4
    assert rep["ours"].rstd_sample <= unbiased.rstd_sample + 6.0


def test_ours_beats_vanilla_and_pride(reports4):
    rep, _ = reports4
    assert rep["ours"].accuracy > rep["pride"].accuracy + 10.0 > rep["vanilla"].accuracy + 10.0
    assert rep["ours"].rstd_sample < rep["pride"].rstd_sample < rep["vanilla"].rstd_sample


def test_self_consistency_is_fully_consistent(reports4):
    rep, _ = reports4
    assert rep["self_consistency"].consistency == 100.0
    assert rep["self_consistency"].passes_per_query == 4


def test_fitted_bias_tracks_the_planted_static_bias(sim_fit4):
    _sim, cal, _ = sim_fit4
    bm = cal.state.table(4).bias
    # planted static bias favours slot 0 most, then decays: column means keep that order
    col = bm.mean(dim=0)
    assert col.argsort(descending=True).tolist()[:2] == [0, 1]


def test_self_consistency_scores_follow_the_image_order(sim_fit4):
    sim, _, test = sim_fit4
    s = test[0]
    a = self_consistency_scores(sim, s.query, s.images)
    shifted = s.shifted(1)
    b = self_consistency_scores(sim, shifted.query, shifted.images)
    # the same multiset of passes, reordered with the images
    assert torch.allclose(a, b[(torch.arange(4) + 1) % 4], atol=1e-6)


def test_config_validation_names_the_parameter():
    with pytest.raises(ValueError, match=r"top_k must be a positive integer, got 0"):
        CalibratorConfig(top_k=0)
    with pytest.raises(ValueError, match=r"sharpen"):
        CalibratorConfig(sharpen=-1.0)
    with pytest.raises(ValueError, match=r"layer_range"):
        CalibratorConfig(layer_range=(5, 2))


def test_config_is_frozen():
    cfg = CalibratorConfig()
    with pytest.raises(Exception):
        cfg.top_k = 3  # type: ignore[misc]


def test_state_round_trips(tmp_path, sim_fit4):
    sim, cal, test = sim_fit4
    path = cal.state.save(tmp_path / "cal.safetensors")
    loaded = CalibrationState.load(path, model_id=sim.model_id, n=4)
    r = sim.score(test[0].query, test[0].images)
    again = AttentionGuidedCalibrator(state=loaded)
    assert torch.allclose(cal.scores(r), again.scores(r))
    assert loaded.layer_range == cal.state.layer_range and loaded.config == cal.config


def test_state_from_another_model_is_rejected(tmp_path, sim_fit4):
    _, cal, _ = sim_fit4
    path = cal.state.save(tmp_path / "cal.safetensors")
    with pytest.raises(CalibrationMismatchError, match="fitted for model .* refit"):
        CalibrationState.load(path, model_id="some-other-model")


def test_state_for_smaller_n_is_rejected(tmp_path, sim_fit4):
    _, cal, _ = sim_fit4
    path = cal.state.save(tmp_path / "cal.safetensors")
    with pytest.raises(CalibrationMismatchError, match=r"at most N=4"):
        CalibrationState.load(path, n=8)


def test_n_above_fitted_is_rejected_at_inference(sim_fit4):
    sim, cal, _ = sim_fit4
    s = make_samples(1, 6, seed=9)[0]
    with pytest.raises(CalibrationMismatchError, match=r"got 6 candidate images .* at most N=4"):
        cal.scores(sim.score(s.query, s.images))


def test_not_a_state_file_is_rejected(tmp_path):
    bad = tmp_path / "x.safetensors"
    bad.write_bytes(b"not safetensors")
    with pytest.raises(CalibrationMismatchError, match="not a readable"):
        CalibrationState.load(bad)


def test_fit_handles_several_sizes():
    sim = SimulatedMLLM(SimulatorConfig(seed=3))
    cal = AttentionGuidedCalibrator()
    state = cal.fit(sim, make_samples(2, 3, seed=1) + make_samples(2, 5, seed=2))
    assert state.sizes == [3, 5]
    assert state.table(5).bias.shape == (5, 5) and state.table(5).num_samples == 2


def test_unfitted_calibrator_says_how_to_fit(sim_fit4):
    sim, _, test = sim_fit4
    with pytest.raises(RuntimeError, match="call fit"):
        AttentionGuidedCalibrator().scores(sim.score(test[0].query, test[0].images), "ours")
