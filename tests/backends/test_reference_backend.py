"""Congruence of the two calibration backends, and the reference backend's own contract.

The fast backend (SDPA + per-basket attention-state merge) and the reference
backend (eager attention, post-softmax rows rewritten through nnsight) share only
the basket assignment. They must give the same final embeddings within 1e-5 (float32),
and their difference must be tiny next to what calibration changes, so that
agreement is not the trivial agreement of two uncalibrated models.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llamaindex_posfair import CalibrationConfig, PosFairEncoder
from llamaindex_posfair.backends.reference import (
    ReferenceBackend,
    SoftmaxSiteNotFound,
    _edit_weights,
    find_softmax_sites,
)
from llamaindex_posfair.calibration.baskets import assign_baskets
from llamaindex_posfair.calibration.math import calibrate_weights

CASES = [(strength, layers) for strength in (0.3, 0.5, 1.0) for layers in ("last", "last_half")]
TOLERANCE = 1e-5


def _pair(path: str, max_length: int | None = None) -> tuple[PosFairEncoder, PosFairEncoder]:
    kwargs = dict(calibration=CalibrationConfig(), device="cpu", max_length=max_length)
    return PosFairEncoder(path, backend="fast", **kwargs), PosFairEncoder(path, backend="reference", **kwargs)


@pytest.fixture(scope="module")
def bert_pair(tiny_bert_path):
    return _pair(tiny_bert_path)


@pytest.fixture(scope="module")
def qwen3_pair(tiny_qwen3_path):
    return _pair(tiny_qwen3_path)


@pytest.fixture(scope="module")
def minilm_pair(minilm_path):
    return _pair(minilm_path, max_length=128)


_PLAIN: dict = {}


def _plain(encoder: PosFairEncoder, texts: list[str], batch_size: int) -> np.ndarray:
    key = (id(encoder), tuple(texts), batch_size)
    if key not in _PLAIN:
        _PLAIN[key] = encoder.encode_documents(texts, calibration=None, batch_size=batch_size)
    return _PLAIN[key]


def _assert_congruent(pair, texts, config, batch_size):
    fast_enc, ref_enc = pair
    fast = fast_enc.encode_documents(texts, calibration=config, batch_size=batch_size)
    ref = ref_enc.encode_documents(texts, calibration=config, batch_size=batch_size)
    plain = _plain(ref_enc, texts, batch_size)
    gap = float(np.abs(fast - ref).max())
    effect = float(np.abs(ref - plain).max())
    assert gap <= TOLERANCE, f"fast vs reference differ by {gap:.3g}"
    assert effect > 0.0, "calibration changed nothing: the comparison would be vacuous"
    assert gap <= 0.05 * effect, f"backend gap {gap:.3g} is not small next to the calibration effect {effect:.3g}"


@pytest.mark.parametrize("strength,layers", CASES)
def test_reference_matches_fast_on_tiny_bert(bert_pair, mixed_texts, strength, layers):
    config = CalibrationConfig(basket_size=16, strength=strength, layers=layers)
    _assert_congruent(bert_pair, mixed_texts, config, batch_size=3)


@pytest.mark.parametrize("strength,layers", CASES)
def test_reference_matches_fast_on_tiny_qwen3(qwen3_pair, mixed_texts, strength, layers):
    config = CalibrationConfig(basket_size=16, strength=strength, layers=layers)
    _assert_congruent(qwen3_pair, mixed_texts, config, batch_size=3)


def test_reference_matches_fast_on_causal_mean_pooling(qwen3_pair, mixed_texts):
    # Every row edited on a causal model: rows cannot see later baskets (key_allowed).
    config = CalibrationConfig(basket_size=16, strength=0.5, layers="last_half", pooling="mean")
    _assert_congruent(qwen3_pair, mixed_texts, config, batch_size=3)


def test_reference_matches_fast_with_equal_baskets_and_isolated_tokens(bert_pair, mixed_texts):
    config = CalibrationConfig(
        basket_size=16,
        strength=0.7,
        layers="last_half",
        basket_layout="equal",
        isolate=("cls", "sep"),
        isolated_policy={"cls": 0.2},
    )
    _assert_congruent(bert_pair, mixed_texts, config, batch_size=5)


@pytest.mark.parametrize(
    "variant",
    [
        dict(basket_weighting="length"),
        dict(strength_schedule="increasing", layers="last_half"),
        dict(length_reference=64),
    ],
    ids=["length-weighting", "increasing-schedule", "length-aware-strength"],
)
@pytest.mark.parametrize("model", ["bert", "qwen3"])
def test_reference_matches_fast_on_calibration_variants(bert_pair, qwen3_pair, mixed_texts, variant, model):
    settings = dict(basket_size=16, strength=0.8, layers="last_half") | variant
    pair = bert_pair if model == "bert" else qwen3_pair
    _assert_congruent(pair, mixed_texts, CalibrationConfig(**settings), batch_size=3)


@pytest.mark.slow
@pytest.mark.parametrize("strength,layers", CASES)
def test_reference_matches_fast_on_minilm(minilm_pair, mixed_texts, strength, layers):
    # Real weights, mean pooling (every row edited); 128 tokens in baskets of 16.
    config = CalibrationConfig(basket_size=16, strength=strength, layers=layers)
    _assert_congruent(minilm_pair, mixed_texts, config, batch_size=5)


def test_reference_without_assignment_is_the_plain_model(bert_pair, mixed_texts):
    fast_enc, ref_enc = bert_pair
    plain_fast = fast_enc.encode_documents(mixed_texts, calibration=None)
    plain_ref = ref_enc.encode_documents(mixed_texts, calibration=None)
    zero = ref_enc.encode_documents(mixed_texts, calibration=CalibrationConfig(basket_size=16, strength=0.0))
    assert np.abs(plain_fast - plain_ref).max() <= TOLERANCE  # eager vs SDPA, same model
    assert np.array_equal(zero, plain_ref)  # strength 0 builds no assignment


def test_softmax_sites_are_found_generically(bert_pair, qwen3_pair):
    bert_sites = find_softmax_sites(bert_pair[1]._hf_model)
    qwen_sites = find_softmax_sites(qwen3_pair[1]._hf_model)
    assert [s.layer for s in bert_sites] == [0, 1]
    assert [s.layer for s in qwen_sites] == [0, 1, 2]
    assert {(s.op, s.drill) for s in bert_sites + qwen_sites} == {("attention_interface_1", True)}
    assert bert_sites[1].module_name == "encoder.layer.1.attention.self"
    assert qwen_sites[2].module_name == "layers.2.self_attn"


def test_model_without_attention_softmax_is_refused():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    model.set_attn_implementation = lambda name: None
    with pytest.raises(SoftmaxSiteNotFound, match='backend="fast"'):
        ReferenceBackend().install(model)


def test_unknown_layer_is_refused(bert_pair, mixed_texts):
    _, ref_enc = bert_pair
    config = CalibrationConfig(basket_size=16, strength=0.5, layers="last")
    features = ref_enc.sentence_transformer.preprocess(mixed_texts[2:3])
    valid = features["attention_mask"].bool()
    zeros = torch.zeros_like(valid, dtype=torch.long)
    assignment = assign_baskets(valid, zeros, zeros.float(), valid, basket_size=config.basket_size, all_rows=True)
    with pytest.raises(ValueError, match=r"layers \[7\] have no attention module"):
        ref_enc._backend.forward(ref_enc.sentence_transformer, features, assignment, (1, 7), 0.5)


def test_single_row_edit_equals_full_where():
    # The one-row shortcut must equal where(row_mask, calibrate_weights(a), a).
    torch.manual_seed(0)
    batch, heads, length = 3, 2, 40
    valid = torch.ones(batch, length, dtype=torch.bool)
    valid[1, :7] = False  # left padding
    valid[2, 30:] = False  # right padding
    scores = torch.randn(batch, heads, length, length) * 3
    scores = scores.masked_fill(~valid.view(batch, 1, 1, length), torch.finfo(torch.float32).min)
    weights = torch.softmax(scores, -1)
    rows = torch.zeros(batch, length, dtype=torch.bool)
    rows[torch.arange(batch), torch.tensor([0, 7, 29])] = True
    zeros = torch.zeros(batch, length, dtype=torch.long)
    assignment = assign_baskets(valid, zeros, zeros.float(), rows, basket_size=8)
    expected = torch.where(rows.view(batch, 1, length, 1), calibrate_weights(weights, assignment, 0.6), weights)
    got = _edit_weights(scores, weights, assignment, 0.6)
    assert torch.allclose(got, expected, atol=1e-7)
    assert not torch.allclose(got, weights, atol=1e-3)  # the rows really changed
    assert torch.allclose(got.sum(-1), torch.ones(batch, heads, length), atol=1e-5)
