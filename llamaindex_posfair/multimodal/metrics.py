"""Selection metrics: accuracy, per-slot accuracy, RStd, consistency (pure math).

RStd is the standard deviation, over slots, of the per-slot accuracy (in
percentage points when accuracies are given in percent). LAD reports the
**sample** std (``ddof=1``), PriDe the **population** std (``ddof=0``). Both
are offered; this project's default is ``"sample"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

__all__ = ["accuracy", "consistency", "per_slot_accuracy", "rstd"]

StdKind = Literal["sample", "population"]


def accuracy(predicted: Sequence[int] | torch.Tensor, gold: Sequence[int] | torch.Tensor) -> float:
    """Share of passes whose predicted slot is the gold slot, in ``[0, 1]``.

    Example:
        >>> accuracy([0, 1, 1], [0, 1, 0])
        0.6666666666666666
    """
    p = torch.as_tensor(predicted, dtype=torch.long)
    g = torch.as_tensor(gold, dtype=torch.long)
    if p.shape != g.shape or p.numel() == 0:
        raise ValueError(
            f"predicted and gold must be non-empty and the same shape, got {tuple(p.shape)} / {tuple(g.shape)}"
        )
    return float((p == g).double().mean())


def per_slot_accuracy(
    predicted: Sequence[int] | torch.Tensor, gold: Sequence[int] | torch.Tensor, n: int
) -> torch.Tensor:
    """Accuracy grouped by the gold slot: ``[n]`` float64 (NaN for a slot never gold).

    Example:
        >>> per_slot_accuracy([0, 0, 1, 0], [0, 0, 1, 1], 2).tolist()
        [1.0, 0.5]
    """
    p = torch.as_tensor(predicted, dtype=torch.long)
    g = torch.as_tensor(gold, dtype=torch.long)
    if p.shape != g.shape:
        raise ValueError(f"predicted and gold must have the same shape, got {tuple(p.shape)} / {tuple(g.shape)}")
    hits = torch.zeros(n, dtype=torch.float64).index_add_(0, g, (p == g).double())
    counts = torch.bincount(g, minlength=n).double()
    return torch.where(counts > 0, hits / counts.clamp_min(1), torch.full_like(hits, float("nan")))


def rstd(slot_accuracy: Sequence[float] | torch.Tensor, kind: StdKind = "sample") -> float:
    """Standard deviation of per-slot accuracies (lower is fairer).

    Args:
        slot_accuracy: ``[N]`` per-slot accuracies (NaN slots are ignored).
        kind: ``"sample"`` (``ddof=1``, LAD; default) or ``"population"``
            (``ddof=0``, PriDe).

    Returns:
        The std in the unit of ``slot_accuracy``.

    Raises:
        ValueError: for an unknown ``kind`` or fewer than 2 valid slots with ``"sample"``.

    Example:
        >>> rstd([100.0, 0.0], "population"), round(rstd([100.0, 0.0], "sample"), 4)
        (50.0, 70.7107)
    """
    a = torch.as_tensor(slot_accuracy, dtype=torch.float64)
    a = a[~torch.isnan(a)]
    if kind == "sample":
        if a.numel() < 2:
            raise ValueError(f"sample RStd needs at least 2 slots with data, got {a.numel()}")
        return float(a.std(correction=1))
    if kind == "population":
        if a.numel() < 1:
            raise ValueError("population RStd needs at least 1 slot with data")
        return float(a.std(correction=0))
    raise ValueError(f"kind must be 'sample' or 'population', got {kind!r}")


def consistency(chosen: Sequence[Sequence[int]] | torch.Tensor) -> float:
    """Share of samples that choose the same *image* under every permutation.

    Args:
        chosen: ``[S, R]`` identifier of the image chosen by sample ``s`` under
            permutation ``r`` (an image id, not a slot).

    Returns:
        A share in ``[0, 1]``.

    Example:
        >>> consistency([[3, 3, 3], [1, 2, 1]])
        0.5
    """
    c = torch.as_tensor(chosen, dtype=torch.long)
    if c.ndim != 2 or c.numel() == 0:
        raise ValueError(f"chosen must be a non-empty [S, R] array, got shape {tuple(c.shape)}")
    return float((c == c[:, :1]).all(dim=1).double().mean())
