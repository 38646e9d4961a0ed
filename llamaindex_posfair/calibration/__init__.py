"""Position-fair attention calibration: configuration and pure math."""

from llamaindex_posfair.calibration.baskets import BasketAssignment, assign_baskets, basket_lengths
from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.calibration.math import calibrate_weights, merge_basket_states
from llamaindex_posfair.calibration.presets import PRESETS, preset

__all__ = [
    "PRESETS",
    "BasketAssignment",
    "CalibrationConfig",
    "assign_baskets",
    "basket_lengths",
    "calibrate_weights",
    "merge_basket_states",
    "preset",
]
