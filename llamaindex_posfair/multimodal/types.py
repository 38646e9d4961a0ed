"""Shared data types of the multimodal reranking stage (no model imports).

A *scorer* is anything that, for one text query and ``N`` candidate images
in a fixed order, runs **one** forward pass and returns a
:class:`ForwardResult`: the answer scores over the ``N`` index choices and,
per layer, the attention mass from the answer position to each image. The
Qwen2-VL adapter (:mod:`.qwen_adapter`) is the production scorer; the
simulated MLLM of ``research/multimodal/simulator.py`` is an evaluation tool
with the same interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class ForwardResult:
    """What one forward pass over ``N`` ordered candidates yields.

    Args:
        logits: ``[N]`` answer scores ``z`` over the index choices (any
            per-pass constant offset is irrelevant: every method works on the
            softmax restricted to the ``N`` choices). The Qwen adapter returns
            full-vocabulary log-probabilities, scored jointly for two-token
            indices.
        evidence: ``[L, N]`` attention mass ``e_l(k)`` from the answer position
            to the tokens of image ``k`` in layer ``l`` (mean over heads, sum
            over the image's tokens).

    Raises:
        ValueError: if the shapes disagree or a tensor is not finite.

    Example:
        >>> r = ForwardResult(torch.zeros(3), torch.full((2, 3), 0.1))
        >>> r.n_images, r.num_layers
        (3, 2)
    """

    logits: torch.Tensor
    evidence: torch.Tensor

    def __post_init__(self) -> None:
        if self.logits.ndim != 1:
            raise ValueError(f"logits must be 1-D [N], got shape {tuple(self.logits.shape)}")
        if self.evidence.ndim != 2 or self.evidence.shape[1] != self.logits.shape[0]:
            raise ValueError(
                f"evidence must be [L, N] with N={self.logits.shape[0]}, got shape {tuple(self.evidence.shape)}"
            )
        if not torch.isfinite(self.logits).all():
            raise ValueError("logits contain non-finite values; check the model's dtype (use float32 on CPU)")

    @property
    def n_images(self) -> int:
        return int(self.logits.shape[0])

    @property
    def num_layers(self) -> int:
        return int(self.evidence.shape[0])


@dataclass(frozen=True)
class Candidates:
    """One labelled selection problem: a query and its ordered candidates.

    Args:
        query: the text query (the simulator accepts any hashable id).
        images: the candidate images in order (PIL images for real models,
            :class:`~.simulator.SimImage` for the simulator).
        answer: index of the right image in ``images`` (``None`` when
            unlabelled).
    """

    query: Any
    images: tuple
    answer: int | None = None

    def __post_init__(self) -> None:
        if len(self.images) < 2:
            raise ValueError(f"images must hold at least 2 candidates, got {len(self.images)}")
        if self.answer is not None and not 0 <= self.answer < len(self.images):
            raise ValueError(f"answer must be in [0, {len(self.images)}), got {self.answer}")

    @property
    def n(self) -> int:
        return len(self.images)

    def shifted(self, shift: int) -> Candidates:
        """Cyclic shift: the candidate at slot ``k`` moves to ``(k + shift) % N``.

        Example:
            >>> Candidates("q", ("a", "b", "c"), 0).shifted(1).images
            ('c', 'a', 'b')
        """
        n = self.n
        s = shift % n
        images = tuple(self.images[(k - s) % n] for k in range(n))
        answer = None if self.answer is None else (self.answer + s) % n
        return Candidates(self.query, images, answer)


@runtime_checkable
class MultiImageScorer(Protocol):
    """The interface every MLLM adapter (and the simulator) implements."""

    @property
    def model_id(self) -> str:
        """Stable identity of the model + prompt (recorded in calibration states)."""
        ...

    @property
    def num_layers(self) -> int: ...

    def score(self, query: Any, images: Sequence[Any]) -> ForwardResult:
        """One forward pass over ``images`` in the given order."""
        ...
