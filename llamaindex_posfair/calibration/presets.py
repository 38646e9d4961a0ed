"""Named calibration settings: the published default and settings chosen from evidence.

``"paper"`` is the published model-agnostic default (``CalibrationConfig()``:
``B=128, λ=0.5, last_half``). ``"posfair-minilm"`` is the setting chosen for
all-MiniLM-L6-v2 on the ``dev`` split of the shipped ``needle-prose`` benchmark
(best harmonic-mean nDCG@10 over the calibration grid and the named variants of
``research.eval.sweep.variants``) and checked on its held-apart ``test``
split; ``docs/evaluation.md`` gives the numbers and the command.

Example:
    >>> from llamaindex_posfair.calibration import preset
    >>> preset("paper").basket_size
    128
"""

from __future__ import annotations

from llamaindex_posfair.calibration.config import CalibrationConfig

__all__ = ["PRESETS", "preset"]

#: name -> CalibrationConfig.
PRESETS: dict[str, CalibrationConfig] = {
    "paper": CalibrationConfig(),
    "posfair-minilm": CalibrationConfig(basket_size=256, strength=0.7, layers="last_half"),
}


def preset(name: str) -> CalibrationConfig:
    """The ``CalibrationConfig`` registered under ``name``.

    Raises:
        KeyError: unknown name; the message lists the known ones.

    Example:
        >>> preset("posfair-minilm").layers
        'last_half'
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(
            f"unknown calibration preset {name!r}; known presets: {', '.join(sorted(PRESETS))}. "
            "Build your own with CalibrationConfig(...)"
        ) from None
