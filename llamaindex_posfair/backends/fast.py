"""Fast calibration backend: a custom attention function for transformers.

Rows a calibrated layer does not edit come from the stock SDPA kernel; the edited rows are computed
explicitly for one pooling row per sequence (:func:`calibrated_pooling_row`), or from per-basket attention
states merged by :class:`~llamaindex_posfair.calibration.math.BasketMerge` when every row is edited. No
``L x L`` score tensor is formed; what depends on the batch only is built once per forward pass on the
:class:`_ActiveCalibration`. The two forms and their costs: docs/backends.md, "fast".

The function is registered under :data:`ATTENTION_NAME` through the shared
:class:`~llamaindex_posfair.backends.hooks.AttentionHook` (transformers'
``AttentionInterface`` and ``AttentionMaskInterface``; plain SDPA outside
:func:`calibration_context`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from transformers.integrations.sdpa_attention import repeat_kv

from llamaindex_posfair.backends.hooks import AttentionHook, sdpa_attention
from llamaindex_posfair.calibration.baskets import BasketAssignment, basket_gather_index, isolated_gather_index
from llamaindex_posfair.calibration.config import layer_strength_map
from llamaindex_posfair.calibration.math import BasketMerge, WeightCalibration, basket_shares, row_strength

ATTENTION_NAME = "posfair_sdpa"


@dataclass(frozen=True)
class _KeySet:
    """Some key positions of every sequence: ``index [B, M]`` (or the slice ``start:start+M``) and ``ok [B, M]``."""

    index: torch.Tensor
    ok: torch.Tensor
    start: int | None = None  # every sequence's keys lie in ``start : start + M`` (a view, no gather)

    @staticmethod
    def build(index: torch.Tensor, ok: torch.Tensor, length: int, align: int = 1) -> _KeySet:
        """Trim ``index``/``ok`` to the widest sequence (rounded up to ``align``) and detect a common slice."""
        width = max(int(ok.sum(-1).max().item()) if ok.numel() else 0, 1)
        width = -(-width // align) * align
        index, ok = _pad_to(index, width), _pad_to(ok, width)
        first = int(torch.where(ok, index, torch.full_like(index, length)).amin().item()) if ok.numel() else length
        start = first if first < length else 0
        slots = start + torch.arange(width, device=index.device).view(1, -1)
        contiguous = start + width <= length and bool(((index == slots) | ~ok).all().item())
        return _KeySet(index=index, ok=ok, start=start if contiguous else None)

    @property
    def width(self) -> int:
        return self.index.shape[1]

    def take(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, H, L, *]`` restricted to these keys: ``[B, H, M, *]``."""
        if self.start is not None:
            return x[:, :, self.start : self.start + self.width]
        batch, heads = x.shape[:2]
        index = self.index.view(batch, 1, self.width, 1).expand(batch, heads, self.width, x.shape[-1])
        return x.gather(2, index)

    def allowed(self, allowed: torch.Tensor) -> torch.Tensor:
        """``[B, 1, Ra, M]``: the keys of ``allowed [B, 1, Ra, L]`` that are in this set."""
        if self.start is not None:
            picked = allowed[..., self.start : self.start + self.width]
        else:
            batch, _, rows, _ = allowed.shape
            picked = allowed.gather(-1, self.index.view(batch, 1, 1, -1).expand(batch, 1, rows, self.width))
        return picked & self.ok.view(self.ok.shape[0], 1, 1, -1)


def _pad_to(x: torch.Tensor, width: int) -> torch.Tensor:
    if x.shape[1] >= width:
        return x[:, :width]
    return torch.cat([x, x.new_zeros(x.shape[0], width - x.shape[1])], 1)


@dataclass
class _BatchLayout:
    """What the calibrated layers share for one batch on one device (built once per forward pass)."""

    assignment: BasketAssignment
    rows: torch.Tensor  # [B] the pooling row of each sequence (one-row assignments)
    all_active: bool = True  # every sequence of the batch is calibrated
    baskets: list[_KeySet] = field(default_factory=list)  # all-rows assignments only (the merge's baskets)
    sizes: list[torch.Tensor] = field(default_factory=list)  # [B] content tokens per basket
    isolated: _KeySet | None = None  # None: no isolated key in the batch
    iso_mode: torch.Tensor | None = None  # [B, J]
    iso_value: torch.Tensor | None = None  # [B, J]
    masks: list = field(default_factory=list)  # [(attention_mask, key, masks)]

    @staticmethod
    def build(assignment: BasketAssignment, device: torch.device) -> _BatchLayout:
        """The layout of ``assignment`` on ``device``; basket key sets only where the merge needs them (all rows)."""
        assignment = assignment.to(device)
        rows = assignment.row_mask.float().argmax(-1)
        all_active = bool(assignment.active.all())
        if not assignment.all_rows:  # one row: computed explicitly, no basket key sets
            return _BatchLayout(assignment=assignment, rows=rows, all_active=all_active)
        length = assignment.basket_ids.shape[1]
        align = 1 if device.type == "cpu" else 16  # the CUDA kernel wants aligned bias rows
        index, ok = basket_gather_index(assignment)
        baskets = [_KeySet.build(index[:, k], ok[:, k], length, align) for k in range(index.shape[1])]
        iso_index, iso_ok = isolated_gather_index(assignment)
        isolated = _KeySet.build(iso_index, iso_ok, length) if bool(iso_ok.any()) else None
        return _BatchLayout(
            assignment=assignment,
            rows=rows,
            all_active=all_active,
            baskets=baskets,
            sizes=[ok[:, k].sum(-1) for k in range(index.shape[1])],
            isolated=isolated,
            iso_mode=assignment.iso_mode.gather(1, iso_index),
            iso_value=assignment.iso_value.gather(1, iso_index),
        )


@dataclass(frozen=True)
class _BasketMasks:
    """What one attention mask implies per basket (built once per mask tensor and batch)."""

    biases: list[torch.Tensor | None]  # [B, 1, Ra, M_k] float32, -inf outside (None: every key allowed)
    present: list[torch.Tensor | None]  # [B, 1, Ra] bool: the row has a key in the basket (None: every row has)
    shares: list[torch.Tensor]  # [B, 1, Ra] the basket's calibrated share (equal shares: the same tensor)
    n_content: torch.Tensor  # [B, 1, Ra] content baskets each row sees
    iso_ok: torch.Tensor | None  # [B, 1, Ra, J]
    strengths: dict = field(default_factory=dict)  # {lambda: [B, 1, Ra, 1] per-row strength}, filled by layers

    def row_strength(self, layout: _BatchLayout, strength: float, rows: torch.Tensor | None) -> torch.Tensor:
        """Per-row ``lambda`` (:func:`row_strength`), computed once per strength and batch."""
        if strength not in self.strengths:
            assignment = layout.assignment
            self.strengths[strength] = row_strength(
                assignment.active, assignment.strength(strength), self.n_content, rows
            )
        return self.strengths[strength]

    @staticmethod
    def build(allowed: torch.Tensor, layout: _BatchLayout) -> _BasketMasks:
        biases, present = [], []
        for basket in layout.baskets:
            ok = basket.allowed(allowed)
            has_key = ok.any(-1)
            present.append(has_key)
            if bool(ok.all()):
                biases.append(None)  # no padding, no causal cut: the kernel runs unmasked (its fastest path)
                continue
            dummy = torch.zeros_like(ok)
            dummy[..., 0] = ~has_key  # a row with no key gets one finite dummy key; BasketMerge gives it no weight
            bias = torch.zeros(ok.shape, dtype=torch.float32, device=ok.device)
            biases.append(bias.masked_fill_(~(ok | dummy), float("-inf")))
        stacked = torch.stack(present, -1)  # [B, 1, Ra, K]
        sizes = torch.stack(layout.sizes, -1).view(stacked.shape[0], 1, 1, -1).float()
        shares = list(basket_shares(stacked, sizes, layout.assignment.weighting).unbind(-1))
        for k in range(1, len(shares)):
            if torch.equal(shares[k], shares[k - 1]):
                shares[k] = shares[k - 1]  # BasketMerge skips the copy of an unchanged share
        present = [None if bool(p.all()) else p for p in present]
        iso_ok = None if layout.isolated is None else layout.isolated.allowed(allowed)
        return _BasketMasks(biases, present, shares, stacked.sum(-1).float(), iso_ok)


@dataclass
class _ActiveCalibration:
    assignment: BasketAssignment
    strengths: dict[int, float]
    calls: int = 0
    cache: dict = field(default_factory=dict)

    def layout(self, device: torch.device) -> _BatchLayout:
        """The batch layout on ``device`` (built at the first calibrated layer, then reused)."""
        key = str(device)
        if key not in self.cache:
            self.cache[key] = _BatchLayout.build(self.assignment, device)
        return self.cache[key]

    def masks(
        self, layout: _BatchLayout, attention_mask: torch.Tensor | None, q_len: int, is_causal: bool
    ) -> _BasketMasks:
        """The per-basket biases of every row for ``attention_mask`` (built once per mask tensor, then reused)."""
        return _cached(
            layout,
            attention_mask,
            ("baskets", q_len, is_causal),
            lambda: _BasketMasks.build(
                _allowed_keys(attention_mask, layout.assignment, None, q_len, is_causal), layout
            ),
        )

    def row_calibration(
        self, layout: _BatchLayout, attention_mask: torch.Tensor | None, q_len: int, is_causal: bool
    ) -> WeightCalibration:
        """The pooling rows' keys and baskets (``[B, 1, 1, L]`` rows), built once per mask tensor and batch."""
        rows = layout.rows.view(-1, 1)

        def build() -> WeightCalibration:
            allowed = _allowed_keys(attention_mask, layout.assignment, rows, q_len, is_causal)
            return WeightCalibration(layout.assignment, allowed, layout.assignment.weighting)

        return _cached(layout, attention_mask, ("row", q_len, is_causal), build)


def _cached(layout: _BatchLayout, attention_mask: torch.Tensor | None, key: tuple, build):
    """``build()`` once per (mask tensor, key) and batch: every calibrated layer gets the same mask object."""
    for mask, mask_key, value in layout.masks:
        if mask is attention_mask and mask_key == key:
            return value
    value = build()
    layout.masks.append((attention_mask, key, value))  # holds the mask, so its identity stays unique
    return value


@contextlib.contextmanager
def calibration_context(
    assignment: BasketAssignment, layers: tuple[int, ...], strength: float | dict[int, float]
) -> Iterator[None]:
    """Calibrate every forward pass run inside this block (in this thread/task).

    ``strength`` is one ``lambda`` for all ``layers`` or a ``{layer: lambda}`` map.
    """
    with _HOOK.activate(_ActiveCalibration(assignment=assignment, strengths=layer_strength_map(layers, strength))):
        yield


def _allowed_keys(
    attention_mask: torch.Tensor | None,
    assignment: BasketAssignment,
    rows: torch.Tensor | None,
    q_len: int,
    is_causal: bool,
) -> torch.Tensor:
    """``[B, 1, R, L]`` bool: which keys each edited row may attend to.

    Returns ``[B, 1, 1, L]`` when the mask does not depend on the row.
    """
    batch, length = assignment.basket_ids.shape
    device = assignment.basket_ids.device
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
    valid = (assignment.basket_ids != -1).view(batch, 1, 1, length)
    positions = torch.arange(length, device=device)
    row_pos = positions.view(1, 1, -1, 1) if rows is None else rows.view(batch, 1, -1, 1)
    if is_causal:
        return valid & (positions.view(1, 1, 1, -1) <= row_pos)
    return valid


def _explicit_attention_with_lse(q, k, v, bias, scaling):
    """Reference form of the fused call: ``(softmax(q kᵀ·scaling + bias) v, logsumexp)``; empty rows give 0, -inf."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * scaling
    if bias is not None and bias.dtype == torch.bool:
        scores = scores.masked_fill(~bias, float("-inf"))
    elif bias is not None:
        scores = scores + bias
    lse = torch.logsumexp(scores, -1)
    probs = torch.exp(scores - torch.where(torch.isfinite(lse), lse, 0.0).unsqueeze(-1))
    return torch.matmul(probs, v), lse


def _kernel_attention_with_lse(q, k, v, bias, scaling):
    if q.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, False, attn_mask=bias, scale=scaling
        )[:2]
    else:
        if bias is not None:
            bias = bias.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(
            q, k, v, bias, True, 0.0, False, scale=scaling
        )[:2]
        lse = lse[..., : q.shape[2]]
    return out, lse


_KERNEL_OK: dict[str, bool] = {}


def _attention_with_bias(q, k, v, bias, scaling):
    """Fused kernel (checked once per device against the explicit form, which is the fallback)."""
    device = q.device.type
    if device not in _KERNEL_OK:
        try:
            g = torch.Generator(device="cpu").manual_seed(0)  # 16 keys: the width baskets are padded to on GPUs
            tq = torch.randn(2, 2, 5, 8, generator=g).to(q.device)
            tk, tv = (torch.randn(2, 2, 16, 8, generator=g).to(q.device) for _ in range(2))
            tbias = torch.zeros(2, 1, 5, 16).masked_fill(torch.rand(2, 1, 5, 16, generator=g) > 0.7, float("-inf"))
            tbias[..., 0] = 0.0
            ok = True
            for test_bias in (tbias.to(q.device), None):  # masked and unmasked calls
                a = _kernel_attention_with_lse(tq, tk, tv, test_bias, 0.3)
                b = _explicit_attention_with_lse(tq, tk, tv, test_bias, 0.3)
                ok = ok and torch.allclose(a[0], b[0], atol=1e-5) and torch.allclose(a[1], b[1], atol=1e-5)
            _KERNEL_OK[device] = bool(ok)
        except Exception:
            _KERNEL_OK[device] = False
    if not _KERNEL_OK[device]:
        return _explicit_attention_with_lse(q, k, v, bias, scaling)
    return _kernel_attention_with_lse(q, k, v, bias, scaling)


def calibrated_pooling_row(
    q_row: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    calibration: WeightCalibration,
    strength: torch.Tensor,
    scaling: float,
) -> torch.Tensor:
    """Calibrated output ``[B, H, 1, d]`` (float32) of one row per sequence, computed explicitly.

    ``q_row·Kᵀ·scaling`` over the allowed keys, softmax, calibration, ``·V``: ``O(L·d)``
    per head (docs/methods.md, part A), cheaper than one fused-kernel call per basket for a
    single row. ``key``/``value`` are ``[B, Hkv, L, d]`` (grouped-query heads are not
    repeated); ``strength`` is the per-sequence ``lambda`` (``[B]``). Sequences the assignment
    leaves inactive get their original weights back.
    """
    scores = _row_times_keys(q_row[:, :, 0].float(), key.float()).mul_(scaling).unsqueeze(2)
    masked = not calibration.every_key_allowed  # padding or a causal cut
    if masked:
        scores = scores.masked_fill_(~calibration.allowed_keys, float("-inf"))
    weights = torch.softmax(scores, -1)
    if masked:
        weights = weights.nan_to_num_(0.0)  # a row with no allowed key: all zero
    return _weights_times_values(calibration(weights, strength)[:, :, 0], value.float()).unsqueeze(2)


def _token_major(x: torch.Tensor) -> torch.Tensor:
    """``[B, Hkv, L, d]`` as ``[B, L, Hkv·d]`` (a view for the usual projection layout, a copy otherwise)."""
    batch, kv_heads, length, dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, kv_heads * dim)


def _row_times_keys(q: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """``[B, H, L]`` scores of one query row per head (``q [B, H, d]``) against ``key [B, Hkv, L, d]``.

    One GEMM over the keys as stored (token-major), with the queries spread on a block
    diagonal (head ``h`` reads kv head ``h // (H / Hkv)``): it reads K once and copies
    nothing, where ``q @ k.transpose`` would first copy K into head-major order.
    """
    batch, heads, dim = q.shape
    kv_heads = key.shape[1]
    spread = q.new_zeros(batch, heads, kv_heads, dim)
    query_heads, kv_of = _head_groups(heads, kv_heads, q.device)
    spread[:, query_heads, kv_of] = q
    return torch.bmm(spread.view(batch, heads, kv_heads * dim), _token_major(key).transpose(1, 2))


def _weights_times_values(weights: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``[B, H, d]``: ``weights [B, H, L]`` times ``value [B, Hkv, L, d]``, head ``h`` reading kv head ``h // (H / Hkv)``."""
    batch, heads, _ = weights.shape
    kv_heads, dim = value.shape[1], value.shape[3]
    every = torch.bmm(weights, _token_major(value)).view(batch, heads, kv_heads, dim)
    query_heads, kv_of = _head_groups(heads, kv_heads, weights.device)
    return every[:, query_heads, kv_of]


@functools.lru_cache(maxsize=64)
def _head_groups(heads: int, kv_heads: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(h, h // (H / Hkv))`` for every query head ``h``: the (query head, kv head) pairs to read.

    Built outside inference mode, so the cached tensors also serve passes that record autograd.
    """
    with torch.inference_mode(False):
        query_heads = torch.arange(heads, device=device)
        return query_heads, query_heads // (heads // kv_heads)


def calibrated_rows(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    masks: _BasketMasks,
    layout: _BatchLayout,
    scaling: float,
    strength: float,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """Calibrated outputs ``[B, H, R, d]`` (float32) of the rows in ``query``.

    One fused-kernel call per content basket (keys and values restricted to the
    basket: a view when the basket is the same slice in every sequence, a gather
    otherwise), each folded into a :class:`BasketMerge` as it comes; in the rare
    case the unguarded merge overflows, the baskets are merged again guarded.
    ``rows`` (``[B, R]`` bool) limits the edit; other rows, inactive sequences
    and rows without content get their original output.
    """
    q, k, v = query.float(), key.float(), value.float()
    iso_scores = iso_values = None
    if layout.isolated is not None:
        iso_values = layout.isolated.take(v)
        iso_scores = torch.matmul(q, layout.isolated.take(k).transpose(-1, -2)) * scaling
        iso_scores = iso_scores.masked_fill(~masks.iso_ok, float("-inf"))
    for guard in (False, True):
        merge = BasketMerge(iso_scores, iso_values, guard=guard, owns_outputs=True)
        for basket, bias, present, share in zip(layout.baskets, masks.biases, masks.present, masks.shares):
            out, lse = _attention_with_bias(q, basket.take(k), basket.take(v), bias, scaling)
            merge.add(lse, out, present, share)
        if guard or not merge.overflowed():
            break
    lam = masks.row_strength(layout, strength, rows)
    mixed, _ = merge.result(lam, masks.n_content, layout.iso_mode, layout.iso_value)
    return mixed


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
    layout = active.layout(query.device)
    batch, heads, q_len, dim = query.shape
    if layout.assignment.basket_ids.shape != (batch, key.shape[2]) or q_len != key.shape[2]:
        raise RuntimeError(
            "posfair calibration expects one full forward pass over the assigned batch "
            f"(assignment {tuple(layout.assignment.basket_ids.shape)}, query length {q_len}, key length {key.shape[2]}); "
            "it does not support KV caches or generation"
        )
    scaling = dim**-0.5 if scaling is None else scaling
    is_causal = bool(kwargs.get("is_causal", getattr(module, "is_causal", False)))
    strength = active.strengths[layer]

    if layout.assignment.all_rows:
        n_rep = heads // key.shape[1]
        k, v = repeat_kv(key, n_rep), repeat_kv(value, n_rep)
        masks = active.masks(layout, attention_mask, q_len, is_causal)
        out = calibrated_rows(query, k, v, masks, layout, scaling, strength, rows=layout.assignment.row_mask)
        return out.to(query.dtype).transpose(1, 2).contiguous(), None

    out, _ = sdpa_attention(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    rows = layout.rows  # one pooling row per sequence
    q_rows = query.gather(2, rows.view(batch, 1, 1, 1).expand(batch, heads, 1, dim))
    calibration = active.row_calibration(layout, attention_mask, q_len, is_causal)
    assignment = layout.assignment
    lam = assignment.strength(strength)
    new_rows = calibrated_pooling_row(q_rows, key, value, calibration, lam, scaling)[:, :, 0, :].to(out.dtype)
    batch_index = torch.arange(batch, device=out.device)
    if not layout.all_active:  # inactive sequences keep SDPA's row exactly
        new_rows = torch.where(assignment.active.view(batch, 1, 1), new_rows, out[batch_index, rows])
    if out.requires_grad:  # SDPA's output may be saved for backward: write a copy
        return out.index_put((batch_index, rows), new_rows), None
    return out.index_put_((batch_index, rows), new_rows), None


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
        assignment: BasketAssignment | None,
        layers: tuple[int, ...],
        strength: float | dict[int, float],
    ):
        """Run the sentence-transformers forward, calibrated when ``assignment`` is given.

        ``strength`` is one ``lambda`` or a ``{layer: lambda}`` map (strength schedules).
        """
        if assignment is None:
            return st_model(features)
        with calibration_context(assignment, layers, strength):
            return st_model(features)
