"""The fused attention-with-log-sum-exp helper of the fast backend."""

from __future__ import annotations

import torch

from llamaindex_posfair.backends.fast import _explicit_attention_with_lse, attention_with_lse


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
    from llamaindex_posfair.backends.fast import _attention_with_bias

    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=g) for _ in range(3))
    out, lse = _attention_with_bias(q, k, v, None, 0.35)
    ref_out, ref_lse = _explicit_attention_with_lse(q, k, v, None, 0.35)
    assert torch.allclose(out, ref_out, atol=1e-5) and torch.allclose(lse, ref_lse, atol=1e-5)
