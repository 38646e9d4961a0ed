"""The explicit one-row form of the fast backend: q·Kᵀ and ·V over token-major keys, grouped heads."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.integrations.sdpa_attention import repeat_kv

from llamaindex_posfair.backends.fast import _row_times_keys, _weights_times_values


def _projected(batch: int, length: int, heads: int, dim: int, gen: torch.Generator) -> torch.Tensor:
    """``[B, H, L, d]`` laid out as a projection leaves it: token-major ``[B, L, H, d]`` memory."""
    return torch.randn(batch, length, heads, dim, generator=gen).transpose(1, 2)


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(1, 3),
    length=st.integers(1, 20),
    kv_heads=st.integers(1, 3),
    group=st.integers(1, 3),
    dim=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_row_products_equal_matmul_with_repeated_heads(batch, length, kv_heads, group, dim, seed):
    gen = torch.Generator().manual_seed(seed)
    heads = kv_heads * group
    key, value = _projected(batch, length, kv_heads, dim, gen), _projected(batch, length, kv_heads, dim, gen)
    q = torch.randn(batch, heads, dim, generator=gen)
    weights = torch.softmax(torch.randn(batch, heads, length, generator=gen), -1)
    k, v = repeat_kv(key, group), repeat_kv(value, group)
    expected_scores = torch.matmul(q.unsqueeze(2), k.transpose(-1, -2))[:, :, 0]
    expected_out = torch.matmul(weights.unsqueeze(2), v)[:, :, 0]
    assert torch.allclose(_row_times_keys(q, key), expected_scores, atol=1e-5)
    assert torch.allclose(_weights_times_values(weights, value), expected_out, atol=1e-5)


def test_row_products_accept_head_major_keys():
    """Keys that are not token-major (a contiguous ``[B, H, L, d]``) give the same products."""
    gen = torch.Generator().manual_seed(0)
    key = torch.randn(2, 4, 9, 5, generator=gen)
    q = torch.randn(2, 4, 5, generator=gen)
    expected = torch.matmul(q.unsqueeze(2), key.transpose(-1, -2))[:, :, 0]
    assert torch.allclose(_row_times_keys(q, key), expected, atol=1e-5)


def test_row_products_backpropagate_after_an_inference_pass():
    """The cached head-group indices, first built under inference mode, still serve a pass that records autograd."""
    gen = torch.Generator().manual_seed(1)
    key, value = _projected(2, 6, 2, 4, gen), _projected(2, 6, 2, 4, gen)
    with torch.inference_mode():
        _row_times_keys(torch.randn(2, 4, 4), torch.randn(2, 2, 6, 4))  # the same heads, first without autograd
    q = torch.randn(2, 4, 4, generator=gen, requires_grad=True)
    weights = torch.softmax(_row_times_keys(q, key), -1)
    _weights_times_values(weights, value).sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
