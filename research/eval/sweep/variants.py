"""Named calibration variants swept on the selection split (beyond the published method).

Each variant is a set of ``CalibrationConfig`` fields applied on top of the
paper default (``B=128, λ=0.5, last_half``). ``python -m research.eval`` scores them all on
``dev``, picks the best harmonic mean there and reports it on ``test``. A
variant may name ``ALL_LAYERS``: it is resolved to every layer of the encoder
(``range(num_layers)``), so the sweep fits models of any depth.

Example:
    >>> from research.eval.sweep.variants import variant_configs
    >>> cfgs = variant_configs(num_layers=6)
    >>> cfgs["equal baskets"].basket_layout
    'equal'
    >>> cfgs["all layers λ=0.3"].layers
    (0, 1, 2, 3, 4, 5)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ALL_LAYERS", "VARIANTS", "resolve_variant", "variant_configs"]

#: Placeholder for "every layer of the encoder" in a variant's ``layers``.
ALL_LAYERS = "all"

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
    "all layers λ=0.3": {"layers": ALL_LAYERS, "strength": 0.3},
    "[CLS]/[SEP] isolated": {"isolate": ("cls", "sep")},
    "[CLS]/[SEP] isolated, kept at original weight": {
        "isolate": ("cls", "sep"),
        "isolated_policy": (("cls", "original"), ("sep", "original")),
    },
}


def resolve_variant(options: Mapping[str, Any], num_layers: int) -> dict[str, Any]:
    """``options`` with ``layers=ALL_LAYERS`` replaced by ``(0, ..., num_layers - 1)``.

    Args:
        options: CalibrationConfig fields of one variant.
        num_layers: Transformer layers of the encoder (``PosFairEncoder.num_layers``).

    Raises:
        ValueError: ``num_layers`` is not a positive integer.

    Example:
        >>> resolve_variant({"layers": ALL_LAYERS, "strength": 0.3}, 3)
        {'layers': (0, 1, 2), 'strength': 0.3}
    """
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
        raise ValueError(f"num_layers must be a positive integer (the encoder's num_layers), got {num_layers!r}")
    out = dict(options)
    if out.get("layers") == ALL_LAYERS:
        out["layers"] = tuple(range(num_layers))
    return out


def variant_configs(
    num_layers: int,
    base: Mapping[str, Any] | None = None,
    variants: Mapping[str, Mapping[str, Any]] = VARIANTS,
):
    """``{label: CalibrationConfig}``: every variant over ``base`` (default: the paper default).

    Args:
        num_layers: Transformer layers of the encoder the variants are for
            (``ALL_LAYERS`` resolves to all of them).
        base: CalibrationConfig fields every variant starts from.
        variants: ``{label: fields}``; default ``VARIANTS``.

    Raises:
        ValueError: ``num_layers`` is not a positive integer.
        pydantic.ValidationError: a variant sets an invalid field (the message names it).
    """
    from llamaindex_posfair.calibration.config import CalibrationConfig

    base = dict(base or {})
    return {
        label: CalibrationConfig(**{**base, **resolve_variant(opts, num_layers)}) for label, opts in variants.items()
    }
