"""Named calibration variants swept on the selection split (beyond the published method).

Each variant is a set of ``CalibrationConfig`` fields applied on top of the
paper default (``B=128, λ=0.5, last_half``). ``posfair eval`` scores them all on
``dev``, picks the best harmonic mean there and reports it on ``test``.

Example:
    >>> from llamaindex_posfair.eval.variants import variant_configs
    >>> cfgs = variant_configs()
    >>> cfgs["equal baskets"].basket_layout
    'equal'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["VARIANTS", "variant_configs"]

#: label -> CalibrationConfig fields over the paper default.
VARIANTS: dict[str, dict[str, Any]] = {
    "equal baskets": {"basket_layout": "equal"},
    "equal baskets B=64": {"basket_layout": "equal", "basket_size": 64},
    "length-weighted baskets": {"basket_weighting": "length"},
    "increasing per-layer λ": {"strength_schedule": "increasing"},
    "decreasing per-layer λ": {"strength_schedule": "decreasing"},
    "documents only": {"calibrate_queries": False},
    "queries only": {"calibrate_documents": False},
    "length-aware λ (ref 1024)": {"length_reference": 1024},
    "all layers λ=0.3": {"layers": (0, 1, 2, 3, 4, 5), "strength": 0.3},
    "[CLS]/[SEP] isolated": {"isolate": ("cls", "sep")},
    "[CLS]/[SEP] isolated, kept at original weight": {
        "isolate": ("cls", "sep"),
        "isolated_policy": (("cls", "original"), ("sep", "original")),
    },
}


def variant_configs(base: Mapping[str, Any] | None = None, variants: Mapping[str, Mapping[str, Any]] = VARIANTS):
    """``{label: CalibrationConfig}``: every variant over ``base`` (default: the paper default).

    Raises:
        pydantic.ValidationError: a variant sets an invalid field (the message names it).
    """
    from llamaindex_posfair.calibration.config import CalibrationConfig

    base = dict(base or {})
    return {label: CalibrationConfig(**{**base, **dict(opts)}) for label, opts in variants.items()}
