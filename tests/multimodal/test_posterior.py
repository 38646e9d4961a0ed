import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from llamaindex_posfair.multimodal.posterior import corrected_scores, select_layers, visual_posterior

pos = st.floats(1e-4, 10.0, allow_nan=False)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(2, 10), layers=st.integers(1, 6), s=st.floats(0, 20))
def test_posterior_is_a_distribution(data, n, layers, s):
    e = torch.tensor(data.draw(arrays(np.float64, (layers, n), elements=pos)))
    a = torch.tensor(data.draw(arrays(np.float64, (layers, n), elements=pos)))
    pi = visual_posterior(e, a, torch.arange(layers), sharpen=s)
    assert float(pi.sum()) == pytest.approx(1.0, abs=1e-9)
    assert bool((pi >= 0).all())


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(2, 10), scale=st.floats(0.01, 100))
def test_posterior_uniform_when_evidence_is_proportional_to_prior(data, n, scale):
    a = torch.tensor(data.draw(arrays(np.float64, (2, n), elements=pos)))
    pi = visual_posterior(a * scale, a, torch.arange(2), sharpen=5.0)
    assert torch.allclose(pi, torch.full((n,), 1.0 / n, dtype=torch.float64), atol=1e-9)


def test_sharpening_concentrates_on_the_attended_slot():
    e = torch.tensor([[0.1, 0.3, 0.2]])
    a = torch.full((1, 3), 0.2)
    soft = visual_posterior(e, a, torch.tensor([0]), sharpen=1.0)
    sharp = visual_posterior(e, a, torch.tensor([0]), sharpen=10.0)
    assert int(soft.argmax()) == int(sharp.argmax()) == 1
    assert float(sharp[1]) > float(soft[1])


def test_select_layers_ranks_by_visual_strength_inside_range():
    e = torch.tensor([[9.0, 9.0], [0.1, 0.1], [0.5, 0.2], [0.3, 0.3]])
    # layer 0 is strongest but outside the range
    assert select_layers(e, (1, 4), 2).tolist() == [2, 3]


def test_select_layers_rejects_bad_range():
    with pytest.raises(ValueError, match="layer_range"):
        select_layers(torch.ones(4, 2), (3, 9), 2)


def test_linear_correction_removes_bias_of_the_posterior_row():
    bm = torch.tensor([[3.0, -1.0, -2.0], [3.0, -1.0, -2.0], [3.0, -1.0, -2.0]], dtype=torch.float64)
    z = torch.tensor([3.0, -0.5, -2.0])  # slot 1 is better than its bias predicts
    out = corrected_scores(z, torch.tensor([0.0, 1.0, 0.0]), bm, "linear")
    assert int(torch.log_softmax(z, 0).argmax()) == 0
    assert int(out.argmax()) == 1


@settings(max_examples=50, deadline=None)
@given(data=st.data(), n=st.integers(2, 8), c=st.floats(-5, 5))
def test_corrections_invariant_to_bias_row_constants(data, n, c):
    bm = torch.tensor(data.draw(arrays(np.float64, (n, n), elements=st.floats(-3, 3))))
    z = torch.tensor(data.draw(arrays(np.float64, (n,), elements=st.floats(-3, 3))))
    pi = torch.softmax(torch.tensor(data.draw(arrays(np.float64, (n,), elements=st.floats(-3, 3)))), 0)
    for variant in ("linear", "log_mixture"):
        a = torch.log_softmax(corrected_scores(z, pi, bm, variant), 0)
        b = torch.log_softmax(corrected_scores(z, pi, bm + c, variant), 0)
        assert torch.allclose(a, b, atol=1e-8)


def test_corrected_scores_rejects_unknown_variant():
    with pytest.raises(ValueError, match="variant"):
        corrected_scores(torch.zeros(2), torch.full((2,), 0.5), torch.zeros(2, 2), "cubic")
