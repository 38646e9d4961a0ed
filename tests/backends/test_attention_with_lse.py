"""The fused attention-with-log-sum-exp helper of the fast backend."""

from __future__ import annotations

import torch

from llamaindex_posfair.backends.fast import _attention_with_bias, _explicit_attention_with_lse


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ok: torch.Tensor, scaling: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output and log-sum-exp of scores over the keys ``ok`` allows.

    ``q``: ``[B, H, R, d]``; ``k``/``v``: ``[B, H, M, d]``; ``ok``: ``[B, 1, R, M]`` bool.
    Rows with no allowed key get output 0 and lse ``-inf``. Uses PyTorch's fused
    attention kernel that also returns the log-sum-exp (checked once per device
    against the explicit computation, with the explicit path as fallback).
    """
    empty = ~ok.any(-1, keepdim=True)
    bias = torch.zeros(ok.shape, dtype=q.dtype, device=q.device).masked_fill(~ok, float("-inf"))
    bias[..., :1] = bias[..., :1].masked_fill(empty, 0.0)  # a finite dummy key, zeroed below
    out, lse = _attention_with_bias(q, k, v, bias, scaling)
    empty = empty.squeeze(-1).expand_as(lse)
    return out.masked_fill(empty.unsqueeze(-1), 0.0), lse.masked_fill(empty, float("-inf"))


def test_matches_explicit_including_rows_without_keys():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, 7, 8, generator=g) for _ in range(3))
    ok = torch.rand(2, 1, 7, 7, generator=g) > 0.4
    ok[0, 0, 2] = False  # a row that may attend to nothing in this basket
    out, lse = attention_with_lse(q, k, v, ok, 0.35)
    ref_out, ref_lse = _explicit_attention_with_lse(q, k, v, ok, 0.35)
    assert torch.allclose(out, ref_out, atol=1e-5)
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
    finite = torch.isfinite(ref_lse)
    assert torch.allclose(lse[finite], ref_lse[finite], atol=1e-5)
    assert torch.all(out[0, :, 2] == 0)


def test_kernel_without_bias_matches_explicit():
    """A basket with no masked key is called without a bias (the kernel's fastest path)."""
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=g) for _ in range(3))
    out, lse = _attention_with_bias(q, k, v, None, 0.35)
    ref_out, ref_lse = _explicit_attention_with_lse(q, k, v, None, 0.35)
    assert torch.allclose(out, ref_out, atol=1e-5) and torch.allclose(lse, ref_lse, atol=1e-5)
