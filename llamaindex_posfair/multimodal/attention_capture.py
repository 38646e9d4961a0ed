"""Read only the attention rows we need, inside transformers' attention dispatch.

``output_attentions=True`` materialises every layer's ``L×L`` map per head (and returns nothing under SDPA);
instead the stock SDPA kernel runs for the layer output and only the answer row is recomputed, averaged over
heads (docs/multimodal.md). Registration, the active-capture scope and the SDPA call are the shared
:class:`~llamaindex_posfair.backends.hooks.AttentionHook`.

Usage::

    name = register_capture_attention()
    model.config.text_config._attn_implementation = name
    with AttentionRowCapture(query_positions=[answer_pos]) as cap:
        model(**inputs)
    rows = cap.rows()  # [num_layers, P, K]: head-mean attention of each captured row
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch

from llamaindex_posfair.backends.hooks import AttentionHook, sdpa_attention

__all__ = ["CAPTURE_ATTENTION_NAME", "AttentionRowCapture", "register_capture_attention"]

CAPTURE_ATTENTION_NAME = "posfair_row_capture"


class AttentionRowCapture:
    """Context manager collecting head-mean attention rows of chosen query positions.

    Args:
        query_positions: absolute positions (in the current forward's keys) of
            the rows to keep; batch size 1 is assumed by the adapter, but any
            batch is stored as ``[B, P, K]`` per layer.

    Example:
        >>> cap = AttentionRowCapture([5])
        >>> with cap:
        ...     pass  # run the model here
        >>> cap.layers()
        []
    """

    def __init__(self, query_positions: Iterable[int]) -> None:
        self.query_positions = [int(p) for p in query_positions]
        self._rows: dict[int, torch.Tensor] = {}
        self._scope: contextlib.AbstractContextManager | None = None

    def __enter__(self) -> AttentionRowCapture:
        self._scope = _HOOK.activate(self)
        self._scope.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._scope is not None:
            self._scope.__exit__(*exc)
            self._scope = None

    def record(self, layer_idx: int, rows: torch.Tensor) -> None:
        self._rows[int(layer_idx)] = rows

    def layers(self) -> list[int]:
        return sorted(self._rows)

    def rows(self) -> torch.Tensor:
        """``[num_layers, B, P, K]`` float32 rows, layers in ascending order.

        Raises:
            RuntimeError: if nothing was captured (the model does not use the
                registered attention implementation).
        """
        if not self._rows:
            raise RuntimeError(
                "no attention rows were captured; set the text model's config._attn_implementation to "
                f"{CAPTURE_ATTENTION_NAME!r} after register_capture_attention()"
            )
        return torch.stack([self._rows[i] for i in self.layers()])


def _row_probs(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None,
    positions: list[int],
) -> torch.Tensor:
    """Head-mean post-softmax attention rows ``[B, P, K]`` for ``positions``."""
    _b, h, q_len, d = query.shape
    k_len = key.shape[2]
    offset = k_len - q_len  # > 0 only with a cache
    local = [p - offset for p in positions]
    if any(not 0 <= p < q_len for p in local):
        raise ValueError(f"query positions {positions} are outside this forward's queries (length {q_len})")
    q = query[:, :, local, :].float()
    groups = h // key.shape[1]
    k = key.float().repeat_interleave(groups, dim=1) if groups > 1 else key.float()
    scale = scaling if scaling is not None else d**-0.5
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # [B, H, P, K]
    if attention_mask is None:
        # causal mask was skipped by transformers (no padding): keys j <= absolute position
        allowed = torch.arange(k_len, device=q.device).unsqueeze(0) <= torch.tensor(
            positions, device=q.device
        ).unsqueeze(1)
        scores = scores.masked_fill(~allowed.view(1, 1, len(positions), k_len), float("-inf"))
    else:
        m = attention_mask[:, :, local, :k_len] if attention_mask.shape[2] == q_len else attention_mask[..., :k_len]
        if m.dtype == torch.bool:
            scores = scores.masked_fill(~m, float("-inf"))
        else:
            scores = scores + m.float()
    return torch.softmax(scores, dim=-1).mean(dim=1)


def _capture_rows(
    cap: AttentionRowCapture,
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """SDPA output, plus the captured rows recorded into ``cap`` (the hook's handler)."""
    out, _ = sdpa_attention(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    layer_idx = getattr(module, "layer_idx", None)
    if layer_idx is not None:
        with torch.no_grad():
            cap.record(layer_idx, _row_probs(module, query, key, attention_mask, scaling, cap.query_positions))
    return out, None


_HOOK: AttentionHook[AttentionRowCapture] = AttentionHook(CAPTURE_ATTENTION_NAME, _capture_rows)


def register_capture_attention() -> str:
    """Register the capture function (idempotent) and return its implementation name."""
    return _HOOK.register()
