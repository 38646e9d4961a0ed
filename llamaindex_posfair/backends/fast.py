"""Fast calibration backend: a custom attention function for transformers.

Every row of a calibrated layer is computed by the stock SDPA kernel; only the
rows to edit (the pooling row, or every row for mean pooling) are recomputed
from per-basket attention states ``(lse_b, o_b)`` and merged by
:func:`~llamaindex_posfair.calibration.math.merge_basket_states`. No ``L x L``
score tensor is formed for unedited rows; for mean pooling, scores exist one
basket (``L x B``) at a time, and the SDPA pass is skipped entirely.

The function is registered under :data:`ATTENTION_NAME` through the shared
:class:`~llamaindex_posfair.backends.hooks.AttentionHook` (transformers'
``AttentionInterface`` and ``AttentionMaskInterface``; plain SDPA outside
:func:`calibration_context`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from transformers.integrations.sdpa_attention import repeat_kv

from llamaindex_posfair.backends.hooks import AttentionHook, sdpa_attention
from llamaindex_posfair.calibration.baskets import BasketPlan, basket_gather_index, isolated_gather_index
from llamaindex_posfair.calibration.config import layer_strength_map
from llamaindex_posfair.calibration.math import merge_basket_states

ATTENTION_NAME = "posfair_sdpa"


@dataclass
class _ActiveCalibration:
    plan: BasketPlan
    strengths: dict[int, float]
    calls: int = 0
    cache: dict = field(default_factory=dict)

    def indices(self, device: torch.device):
        key = str(device)
        if key not in self.cache:
            content_idx, content_ok = basket_gather_index(self.plan)
            iso_idx, iso_ok = isolated_gather_index(self.plan)
            plan = self.plan.to(device)
            iso_mode = plan.iso_mode.gather(1, iso_idx.to(device))
            iso_value = plan.iso_value.gather(1, iso_idx.to(device))
            self.cache[key] = (
                plan,
                content_idx.to(device),
                content_ok.to(device),
                iso_idx.to(device),
                iso_ok.to(device),
                iso_mode,
                iso_value,
            )
        return self.cache[key]


@contextlib.contextmanager
def calibration_context(
    plan: BasketPlan, layers: tuple[int, ...], strength: float | dict[int, float]
) -> Iterator[None]:
    """Calibrate every forward pass run inside this block (in this thread/task).

    ``strength`` is one ``lambda`` for all ``layers`` or a ``{layer: lambda}`` map.
    """
    with _HOOK.activate(_ActiveCalibration(plan=plan, strengths=layer_strength_map(layers, strength))):
        yield


def _allowed_keys(
    attention_mask: torch.Tensor | None,
    plan: BasketPlan,
    rows: torch.Tensor | None,
    q_len: int,
    is_causal: bool,
) -> torch.Tensor:
    """``[B, 1, R, L]`` bool: which keys each edited row may attend to.

    Returns ``[B, 1, 1, L]`` when the mask does not depend on the row.
    """
    batch, length = plan.basket_ids.shape
    device = plan.basket_ids.device
    if attention_mask is not None:
        mask = attention_mask
        if mask.dtype != torch.bool:
            mask = mask > torch.finfo(mask.dtype).min / 2
        mask = mask[..., -length:].expand(batch, 1, mask.shape[2], length)
        if not is_causal and mask.shape[2] > 1 and bool((mask == mask[:, :, :1, :]).all()):
            return mask[:, :, :1, :]  # every row sees the same keys (padding-only mask)
        mask = mask.expand(batch, 1, q_len, length)
        if rows is None:
            return mask
        return mask.gather(2, rows.view(batch, 1, -1, 1).expand(batch, 1, rows.shape[-1], length))
    valid = (plan.basket_ids != -1).view(batch, 1, 1, length)
    positions = torch.arange(length, device=device)
    row_pos = positions.view(1, 1, -1, 1) if rows is None else rows.view(batch, 1, -1, 1)
    if is_causal:
        return valid & (positions.view(1, 1, 1, -1) <= row_pos)
    return valid


def _explicit_attention_with_lse(q, k, v, ok, scaling):
    scores = torch.matmul(q, k.transpose(-1, -2)) * scaling
    scores = scores.masked_fill(~ok, float("-inf"))
    lse = torch.logsumexp(scores, -1)
    probs = torch.exp(scores - torch.where(torch.isfinite(lse), lse, 0.0).unsqueeze(-1))
    return torch.matmul(probs, v), lse


def _kernel_attention_with_lse(q, k, v, ok, scaling):
    bias = torch.zeros(ok.shape, dtype=q.dtype, device=q.device).masked_fill(~ok, float("-inf"))
    if q.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, False, attn_mask=bias, scale=scaling
        )[:2]
    else:
        bias = bias.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(
            q, k, v, bias, True, 0.0, False, scale=scaling
        )[:2]
        lse = lse[..., : q.shape[2]]
    return out, lse


_KERNEL_OK: dict[str, bool] = {}


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ok: torch.Tensor, scaling: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output and log-sum-exp of scores over the keys ``ok`` allows.

    ``q``: ``[B, H, R, d]``; ``k``/``v``: ``[B, H, M, d]``; ``ok``: ``[B, 1, R, M]`` bool.
    Rows with no allowed key get output 0 and lse ``-inf``. Uses PyTorch's fused
    attention kernel that also returns the log-sum-exp (checked once per device
    against the explicit computation, with the explicit path as fallback).
    """
    device = q.device.type
    if device not in _KERNEL_OK:
        try:
            g = torch.Generator(device="cpu").manual_seed(0)
            tq, tk, tv = (torch.randn(2, 2, 5, 8, generator=g).to(q.device) for _ in range(3))
            tok = (torch.rand(2, 1, 5, 5, generator=g) > 0.3).to(q.device)
            tok[..., 0] = True
            a = _kernel_attention_with_lse(tq, tk, tv, tok, 0.3)
            b = _explicit_attention_with_lse(tq, tk, tv, tok, 0.3)
            _KERNEL_OK[device] = bool(torch.allclose(a[0], b[0], atol=1e-5) and torch.allclose(a[1], b[1], atol=1e-5))
        except Exception:
            _KERNEL_OK[device] = False
    if not _KERNEL_OK[device]:
        return _explicit_attention_with_lse(q, k, v, ok, scaling)
    out, lse = _kernel_attention_with_lse(q, k, v, ok, scaling)
    empty = ~ok.any(-1).expand_as(lse)
    lse = lse.masked_fill(empty, float("-inf"))
    out = out.masked_fill(empty.unsqueeze(-1), 0.0)
    return out, lse


def calibrated_rows(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    allowed: torch.Tensor,
    scaling: float,
    active: _ActiveCalibration,
    strength: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Calibrated and original outputs ``[B, H, R, d]`` of the rows in ``query``.

    ``allowed`` is ``[B, 1, R, L]``, or ``[B, 1, 1, L]`` when every row may see the
    same keys. All content baskets go through one fused-kernel call: keys and
    values are gathered into ``[B*K, H, M, d]`` and the rows repeated per basket.
    """
    plan, content_idx, content_ok, iso_idx, iso_ok, iso_mode, iso_value = active.indices(query.device)
    batch, heads, rows, dim = query.shape
    q, k, v = query.float(), key.float(), value.float()
    dim_v = v.shape[-1]
    num_baskets, width = content_idx.shape[1], content_idx.shape[2]
    allowed_rows = allowed.shape[2]

    flat = content_idx.view(batch, 1, num_baskets * width, 1)
    kb = k.gather(2, flat.expand(batch, heads, num_baskets * width, dim))
    vb = v.gather(2, flat.expand(batch, heads, num_baskets * width, dim_v))
    kb = kb.view(batch, heads, num_baskets, width, dim).transpose(1, 2).reshape(batch * num_baskets, heads, width, dim)
    vb = (
        vb.view(batch, heads, num_baskets, width, dim_v)
        .transpose(1, 2)
        .reshape(batch * num_baskets, heads, width, dim_v)
    )
    qb = q.unsqueeze(1).expand(batch, num_baskets, heads, rows, dim).reshape(batch * num_baskets, heads, rows, dim)
    ok = allowed.gather(-1, content_idx.view(batch, 1, 1, -1).expand(batch, 1, allowed_rows, num_baskets * width))
    ok = ok.view(batch, allowed_rows, num_baskets, width).transpose(1, 2)  # [B, K, Ra, M]
    ok = (ok & content_ok.view(batch, num_baskets, 1, width)).reshape(batch * num_baskets, 1, allowed_rows, width)
    out_b, lse_b = attention_with_lse(qb, kb, vb, ok, scaling)
    content_out = out_b.view(batch, num_baskets, heads, rows, dim_v).permute(0, 2, 3, 1, 4)  # [B,H,R,K,d]
    content_lse = lse_b.view(batch, num_baskets, heads, rows).permute(0, 2, 3, 1)  # [B,H,R,K]

    width_iso = iso_idx.shape[1]
    gather = iso_idx.view(batch, 1, width_iso, 1)
    k_iso = k.gather(2, gather.expand(batch, heads, width_iso, dim))
    v_iso = v.gather(2, gather.expand(batch, heads, width_iso, dim_v))
    ok_iso = iso_ok.view(batch, 1, 1, width_iso) & allowed.gather(
        -1, iso_idx.view(batch, 1, 1, width_iso).expand(batch, 1, allowed_rows, width_iso)
    )
    s_iso = torch.matmul(q, k_iso.transpose(-1, -2)) * scaling
    s_iso = s_iso.masked_fill(~ok_iso, float("-inf"))
    return merge_basket_states(
        content_lse,
        content_out,
        s_iso,
        v_iso,
        iso_mode,
        iso_value,
        plan.active,
        plan.strength(strength),
        basket_lengths=content_ok.sum(-1),
        basket_weighting=plan.weighting,
    )


def _calibrated_attention(
    active: _ActiveCalibration,
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """SDPA attention with the pooling rows calibrated under ``active`` (the hook's handler)."""
    layer = getattr(module, "layer_idx", None)
    if layer is None:
        layer = active.calls
    active.calls += 1
    if layer not in active.strengths:
        return sdpa_attention(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    plan = active.indices(query.device)[0]
    batch, heads, q_len, dim = query.shape
    if plan.basket_ids.shape != (batch, key.shape[2]) or q_len != key.shape[2]:
        raise RuntimeError(
            "posfair calibration expects one full forward pass over the planned batch "
            f"(plan {tuple(plan.basket_ids.shape)}, query length {q_len}, key length {key.shape[2]}); "
            "it does not support KV caches or generation"
        )
    scaling = dim**-0.5 if scaling is None else scaling
    is_causal = bool(kwargs.get("is_causal", getattr(module, "is_causal", False)))
    n_rep = heads // key.shape[1]
    k, v = repeat_kv(key, n_rep), repeat_kv(value, n_rep)

    if plan.all_rows:
        allowed = _allowed_keys(attention_mask, plan, None, q_len, is_causal)
        calibrated, original = calibrated_rows(query, k, v, allowed, scaling, active, active.strengths[layer])
        edit = plan.row_mask.view(batch, 1, q_len, 1)
        out = torch.where(edit, calibrated, original).to(query.dtype)
        return out.transpose(1, 2).contiguous(), None

    out, _ = sdpa_attention(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    rows = plan.row_mask.float().argmax(-1).view(batch, 1)  # one pooling row per sequence
    q_rows = query.gather(2, rows.view(batch, 1, 1, 1).expand(batch, heads, 1, dim))
    allowed = _allowed_keys(attention_mask, plan, rows, q_len, is_causal)
    calibrated, _ = calibrated_rows(q_rows, k, v, allowed, scaling, active, active.strengths[layer])
    out = out.clone()  # SDPA's output may be saved for its backward
    out[torch.arange(batch, device=out.device), rows.view(-1)] = calibrated[:, :, 0, :].to(out.dtype)
    return out, None


_HOOK: AttentionHook[_ActiveCalibration] = AttentionHook(ATTENTION_NAME, _calibrated_attention)
#: The active calibration of this thread/task (``None`` outside :func:`calibration_context`).
_ACTIVE = _HOOK.state
#: Drop-in replacement for transformers' SDPA attention that calibrates pooling rows.
posfair_attention_forward = _HOOK.forward


def register() -> str:
    """Register the attention and mask functions (idempotent); returns the name."""
    return _HOOK.register()


class FastBackend:
    """Calibrates through :func:`posfair_attention_forward` (the default backend)."""

    name = "fast"

    def install(self, model: torch.nn.Module) -> None:
        """Switch ``model`` (a transformers ``PreTrainedModel``) to the calibrated attention."""
        register()
        model.set_attn_implementation(ATTENTION_NAME)

    def forward(
        self,
        st_model,
        features: dict,
        plan: BasketPlan | None,
        layers: tuple[int, ...],
        strength: float | dict[int, float],
    ):
        """Run the sentence-transformers forward, calibrated when ``plan`` is given.

        ``strength`` is one ``lambda`` or a ``{layer: lambda}`` map (strength schedules).
        """
        if plan is None:
            return st_model(features)
        with calibration_context(plan, layers, strength):
            return st_model(features)
