"""The calibration grid of the sweep: every (basket size, strength, layer set) combination.

Example:
    >>> from research.eval.sweep.grid import SweepGrid
    >>> grid = SweepGrid(basket_sizes=(128,), strengths=(0.0, 0.5), layers=("last",))
    >>> [label for label, _ in grid.points()]
    ['B=128 λ=0.5 last']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SweepGrid", "layers_label"]


@dataclass(frozen=True)
class SweepGrid:
    """The calibration grid: every (B, λ, layers) combination.

    ``λ = 0`` is the unmodified model for every B and layer set, so it is not
    repeated: the vanilla system stands for it.

    Args:
        basket_sizes: ``B`` values.
        strengths: ``λ`` values in ``[0, 1]``.
        layers: Layer sets (``"last"``, ``"last_half"`` or index tuples).
        options: Further ``CalibrationConfig`` fields applied to every point
            (e.g. ``{"basket_layout": "equal"}``).
    """

    basket_sizes: tuple[int, ...] = (64, 128, 256)
    strengths: tuple[float, ...] = (0.0, 0.3, 0.5, 0.7, 1.0)
    layers: tuple[Any, ...] = ("last", "last_half")
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for b in self.basket_sizes:
            if isinstance(b, bool) or int(b) != b or b < 1:
                raise ValueError(f"basket_sizes must be positive integers, got {b!r}; e.g. 64,128,256")
        for s in self.strengths:
            if not 0.0 <= float(s) <= 1.0:
                raise ValueError(f"strengths must lie in [0, 1], got {s!r}; e.g. 0,0.3,0.5,0.7,1")
        if not self.basket_sizes or not self.strengths or not self.layers:
            raise ValueError("basket_sizes, strengths and layers must each name at least one value")

    def points(self) -> list[tuple[str, Any]]:
        """``(label, CalibrationConfig)`` for every grid point with ``λ > 0``."""
        from llamaindex_posfair.calibration.config import CalibrationConfig

        out = []
        for layers in self.layers:
            for b in self.basket_sizes:
                for s in self.strengths:
                    if float(s) == 0.0:
                        continue
                    cfg = CalibrationConfig(basket_size=int(b), strength=float(s), layers=layers, **dict(self.options))
                    out.append((f"B={b} λ={s:g} {layers_label(layers)}", cfg))
        return out

    def size(self) -> int:
        return len(self.points())


def layers_label(layers: Any) -> str:
    """Short label of a layer set: ``"last_half"`` or ``"L3,4,5"``."""
    return layers if isinstance(layers, str) else "L" + ",".join(map(str, layers))
