"""The fast backend against an explicit post-softmax computation of the same math.

The explicit path below forms every attention row, edits the assigned rows with
:func:`calibrate_weights` and multiplies by V: the method exactly as specified,
with no basket-state merge. (The nnsight reference backend is compared in
``test_reference_backend.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from llamaindex_posfair import CalibrationConfig, PosFairEncoder
from llamaindex_posfair.backends import fast
from llamaindex_posfair.calibration.baskets import assign_baskets
from llamaindex_posfair.calibration.math import calibrate_weights


def _explicit_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    active = fast._ACTIVE.get()
    n_rep = query.shape[1] // key.shape[1]
    k, v = repeat_kv(key, n_rep).float(), repeat_kv(value, n_rep).float()
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query.float(), k.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask.float()
    weights = torch.softmax(scores, -1)
    if active is not None:
        layer = module.layer_idx
        if layer in active.strengths:
            assignment = active.assignment
            edited = calibrate_weights(
                weights, assignment, assignment.strength(active.strengths[layer]), basket_weighting=assignment.weighting
            )
            weights = torch.where(assignment.row_mask.view(assignment.row_mask.shape[0], 1, -1, 1), edited, weights)
    out = torch.matmul(weights, v).to(query.dtype)
    return out.transpose(1, 2).contiguous(), None


class _ExplicitBackend:
    name = "explicit"

    def install(self, model):
        AttentionInterface.register("posfair_test_explicit", _explicit_attention)
        AttentionMaskInterface.register("posfair_test_explicit", eager_mask)
        model.set_attn_implementation("posfair_test_explicit")

    def forward(self, st_model, features, assignment, layers, strength):
        if assignment is None:
            return st_model(features)
        with fast.calibration_context(assignment, layers, strength):
            return st_model(features)


def _explicit_twin(path: str, config: CalibrationConfig, max_length: int | None = None) -> PosFairEncoder:
    enc = PosFairEncoder(path, calibration=config, max_length=max_length, device="cpu")
    enc._backend = _ExplicitBackend()
    enc._backend.install(enc._hf_model)
    return enc


CASES = [(strength, layers) for strength in (0.3, 0.5, 1.0) for layers in ("last", "last_half")]


@pytest.mark.parametrize("strength,layers", CASES)
def test_fast_matches_explicit_on_tiny_bert(tiny_bert_path, mixed_texts, strength, layers):
    config = CalibrationConfig(basket_size=16, strength=strength, layers=layers)
    fast_enc = PosFairEncoder(tiny_bert_path, calibration=config, device="cpu")
    explicit = _explicit_twin(tiny_bert_path, config)
    a = fast_enc.encode_documents(mixed_texts, batch_size=3)
    b = explicit.encode_documents(mixed_texts, batch_size=3)
    assert np.abs(a - b).max() <= 1e-5


@pytest.mark.parametrize("strength,layers", CASES)
def test_fast_matches_explicit_on_tiny_qwen3(tiny_qwen3_path, mixed_texts, strength, layers):
    config = CalibrationConfig(basket_size=16, strength=strength, layers=layers)
    fast_enc = PosFairEncoder(tiny_qwen3_path, calibration=config, device="cpu")
    explicit = _explicit_twin(tiny_qwen3_path, config)
    a = fast_enc.encode_documents(mixed_texts, batch_size=3)
    b = explicit.encode_documents(mixed_texts, batch_size=3)
    assert np.abs(a - b).max() <= 1e-5


@pytest.mark.parametrize("strength,layers", [(0.5, "last_half"), (1.0, "last")])
def test_fast_matches_explicit_on_minilm_mean_pooling(minilm_path, mixed_texts, strength, layers):
    config = CalibrationConfig(basket_size=32, strength=strength, layers=layers)
    fast_enc = PosFairEncoder(minilm_path, calibration=config, device="cpu", max_length=512)
    explicit = _explicit_twin(minilm_path, config, max_length=512)
    a = fast_enc.encode_documents(mixed_texts, batch_size=5)
    b = explicit.encode_documents(mixed_texts, batch_size=5)
    assert np.abs(a - b).max() <= 1e-5


@pytest.mark.parametrize("model", ["minilm_path", "tiny_bert_path"])
def test_fast_matches_explicit_without_padding(request, model, mixed_texts):
    """Equal-length texts: no key is masked (every row: kernel calls without a bias; one row: no mask)."""
    path = request.getfixturevalue(model)
    config = CalibrationConfig(basket_size=32, strength=0.7, layers="last_half")
    texts = [mixed_texts[2], mixed_texts[4], " ".join(reversed(mixed_texts[2].split()))]
    a = PosFairEncoder(path, calibration=config, device="cpu", max_length=100).encode_documents(texts)
    b = _explicit_twin(path, config, max_length=100).encode_documents(texts)
    assert np.abs(a - b).max() <= 1e-5


VARIANTS = [
    {"basket_weighting": "length"},
    {"strength_schedule": "increasing"},
    {"length_reference": 200},
    {"basket_layout": "equal", "layers": (0, 1), "strength_schedule": (0.5, 1.0)},
    {"isolate": ("cls", "sep"), "isolated_policy": {"sep": 0.05}},
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_fast_matches_explicit_for_variants(tiny_bert_path, mixed_texts, variant):
    config = CalibrationConfig(**{"basket_size": 16, "strength": 0.8, "layers": "last_half", **variant})
    a = PosFairEncoder(tiny_bert_path, calibration=config, device="cpu").encode_documents(mixed_texts, batch_size=3)
    b = _explicit_twin(tiny_bert_path, config).encode_documents(mixed_texts, batch_size=3)
    assert np.abs(a - b).max() <= 1e-5


@pytest.mark.parametrize("variant", VARIANTS[:3])
def test_fast_matches_explicit_for_variants_with_mean_pooling(minilm_path, mixed_texts, variant):
    config = CalibrationConfig(basket_size=32, strength=0.8, layers="last_half", **variant)
    a = PosFairEncoder(minilm_path, calibration=config, device="cpu", max_length=512).encode_documents(mixed_texts)
    b = _explicit_twin(minilm_path, config, max_length=512).encode_documents(mixed_texts)
    assert np.abs(a - b).max() <= 1e-5


def test_calibration_changes_long_documents_only(minilm_path, mixed_texts):
    enc = PosFairEncoder(minilm_path, calibration=CalibrationConfig(basket_size=32, strength=1.0), device="cpu")
    plain = enc.encode_documents(mixed_texts, calibration=None)
    calibrated = enc.encode_documents(mixed_texts)
    diff = np.abs(plain - calibrated).max(axis=1)
    assert diff[0] <= 1e-6  # "short query": one basket, left unchanged (up to float rounding)
    assert diff[2] > 1e-3  # a long text moves


def test_left_and_right_padding_give_the_same_embeddings(tiny_qwen3_path, mixed_texts):
    config = CalibrationConfig(basket_size=16, strength=0.7, layers="last_half")
    enc = PosFairEncoder(tiny_qwen3_path, calibration=config, device="cpu")
    left = enc.encode_documents(mixed_texts, batch_size=5)
    enc.tokenizer.padding_side = "right"
    right = enc.encode_documents(mixed_texts, batch_size=5)
    single = np.stack([enc.encode_documents([t])[0] for t in mixed_texts])
    assert np.abs(left - single).max() <= 1e-5
    assert np.abs(right - single).max() <= 1e-5


class _Layer(torch.nn.Module):
    layer_idx = 0
    is_causal = False


def _calibrated_float64(q, k, v, mask, assignment, strength):
    """Oracle in float64 (a float32 softmax would round the small baskets' mass to 0)."""
    p = torch.softmax((q.double() @ k.double().transpose(-1, -2) * 8**-0.5).masked_fill(~mask, float("-inf")), -1)
    cal = torch.zeros_like(p)
    for b in range(p.shape[0]):
        n = int(assignment.num_baskets[b])
        for basket in range(n):
            sel = assignment.basket_ids[b] == basket
            cal[b][..., sel] = p[b][..., sel] / p[b][..., sel].sum(-1, keepdim=True) / n
    return (strength * cal + (1 - strength) * p) @ v.double()


def test_a_basket_that_dwarfs_the_others_is_merged_exactly():
    """Scores hundreds apart between baskets overflow the unguarded merge; the guarded rerun is exact."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 12, 8, generator=g) for _ in range(3))
    q = q * 3
    k[:, :, 8:] = q[:, :, :1] * 10  # the last basket aligns with row 0: its log-sum-exp is ~250 above the first
    valid = torch.ones(2, 12, dtype=torch.bool)
    valid[1, 10:] = False
    zeros = torch.zeros(2, 12, dtype=torch.long)
    assignment = assign_baskets(
        valid, zeros, zeros.float(), valid, basket_size=4, skip_single_basket=False, all_rows=True
    )
    mask = valid.view(2, 1, 1, 12).expand(2, 1, 12, 12)
    with fast.calibration_context(assignment, (0,), 0.7):
        out, _ = fast.posfair_attention_forward(_Layer(), q, k, v, mask, scaling=8**-0.5)
    rows = valid.view(2, 12, 1).expand(2, 12, 2)
    expected = _calibrated_float64(q, k, v, mask, assignment, 0.7).transpose(1, 2)
    assert torch.allclose(out[rows].double(), expected[rows], atol=1e-5)
