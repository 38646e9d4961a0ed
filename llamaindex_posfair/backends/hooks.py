"""One home for attention hooks: a function in transformers' attention dispatch, active only in a scope.

The fast calibration backend (:mod:`.fast`) and the multimodal row capture
(:mod:`llamaindex_posfair.multimodal.attention_capture`) both replace a
model's attention with a function of their own. Both need the same plumbing,
kept here once:

* registration under a name with transformers' ``AttentionInterface`` **and**
  ``AttentionMaskInterface`` (with SDPA's mask function; without it
  transformers builds no mask for an unknown implementation name and the
  function receives ``None``);
* a ``ContextVar`` holding the active state, set for the duration of a
  ``with`` block (per thread / asyncio task, so concurrent callers never see
  each other's state);
* the stock SDPA call, run whenever no state is active, so a model switched to
  the hook behaves exactly like a stock SDPA model outside the block.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import torch

__all__ = ["AttentionHook", "sdpa_attention"]

StateT = TypeVar("StateT")

#: ``handler(state, module, query, key, value, attention_mask, dropout=..., scaling=..., **kwargs)``.
Handler = Callable[..., tuple[torch.Tensor, None]]


def sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' stock SDPA attention function (output ``[B, L, H, d]``, ``None``).

    The one fallback every hook uses; imported lazily so modules that only
    define hooks do not import transformers.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


class AttentionHook(Generic[StateT]):
    """An attention implementation that runs ``handler`` while a state is active, SDPA otherwise.

    Args:
        name: the implementation name models are switched to
            (``model.set_attn_implementation(name)``); must be unique per hook.
        handler: called as ``handler(state, module, query, key, value,
            attention_mask, dropout=..., scaling=..., **kwargs)`` in place of
            SDPA while :meth:`activate` holds ``state``; returns
            ``(output [B, L, H, d], None)`` like transformers' attention
            functions (it may call :func:`sdpa_attention` itself).

    Example:
        >>> def doubled(state, module, query, key, value, attention_mask, **kwargs):
        ...     out, _ = sdpa_attention(module, query, key, value, attention_mask, **kwargs)
        ...     return out * state, None
        >>> hook = AttentionHook("doubled_sdpa", doubled)
        >>> hook.register()
        'doubled_sdpa'
        >>> with hook.activate(2.0) as factor:
        ...     hook.current()  # model(**inputs) here would run ``doubled``
        2.0
        >>> hook.current() is None
        True
    """

    def __init__(self, name: str, handler: Handler) -> None:
        self.name = name
        self._handler = handler
        #: The active state; ``None`` outside :meth:`activate`.
        self.state: contextvars.ContextVar[StateT | None] = contextvars.ContextVar(name, default=None)

    def current(self) -> StateT | None:
        """The state of the innermost active :meth:`activate` block in this context, or ``None``."""
        return self.state.get()

    @contextlib.contextmanager
    def activate(self, state: StateT) -> Iterator[StateT]:
        """Run ``handler`` with ``state`` for every forward pass inside the block (this thread/task)."""
        token = self.state.set(state)
        try:
            yield state
        finally:
            self.state.reset(token)

    def forward(
        self,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        dropout: float = 0.0,
        scaling: float | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        """The function registered with transformers: ``handler`` when a state is active, SDPA otherwise."""
        state = self.state.get()
        if state is None:
            return sdpa_attention(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
        return self._handler(
            state, module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )

    def register(self) -> str:
        """Register :meth:`forward` and SDPA's mask function under :attr:`name` (idempotent); returns the name."""
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(self.name, self.forward)
        AttentionMaskInterface.register(self.name, sdpa_mask)
        return self.name
