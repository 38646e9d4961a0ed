"""Score mix: ``α·(vanilla cosine) + (1−α)·(calibrated cosine)``, one vector each.

Stores two vectors per passage (the vanilla and the calibrated embedding; one
when ``α`` is 0 or 1).

Example:
    >>> from research.eval.harness.mix import ScoreMixSystem
    >>> # ScoreMixSystem("mix α=0.3", vanilla_system, calibrated_system, alpha=0.3).score(cache)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .systems import EncodeCache

__all__ = ["ScoreMixSystem", "mix_scores"]


def mix_scores(first: np.ndarray, second: np.ndarray, alpha: float) -> np.ndarray:
    """``alpha·first + (1−alpha)·second`` (same shapes), ``alpha`` in ``[0, 1]``.

    Example:
        >>> import numpy as np
        >>> mix_scores(np.array([1.0]), np.array([0.0]), 0.25).tolist()
        [0.25]
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}; 1 = first system only, 0 = second only")
    if first.shape != second.shape:
        raise ValueError(f"score matrices differ in shape: {first.shape} vs {second.shape}")
    return alpha * first + (1.0 - alpha) * second


@dataclass
class ScoreMixSystem:
    """Weighted sum of two systems' scores (usually vanilla and calibrated dense).

    Args:
        name: Row label.
        first: System weighted by ``alpha`` (vanilla).
        second: System weighted by ``1 − alpha`` (calibrated).
        alpha: Weight in ``[0, 1]``.
    """

    name: str
    first: Any
    second: Any
    alpha: float = 0.5
    kind: str = "mix"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = float("nan")

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must lie in [0, 1], got {self.alpha!r}")
        self.params = {**dict(self.second.params), "alpha": self.alpha, **self.params}
        # α = 0 or 1 needs only one of the two indexes
        used = ([self.first] if self.alpha > 0 else []) + ([self.second] if self.alpha < 1 else [])
        self.vectors_per_passage = sum(float(s.vectors_per_passage) for s in used)

    def score(self, cache: EncodeCache) -> np.ndarray:
        return mix_scores(self.first.score(cache), self.second.score(cache), self.alpha).astype(np.float32)
