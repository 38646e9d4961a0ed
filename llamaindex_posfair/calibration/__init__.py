"""Position-fair attention calibration: configuration and pure math."""

from llamaindex_posfair.calibration.baskets import BasketPlan, basket_lengths, build_plan
from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.calibration.math import calibrate_weights, merge_basket_states
from llamaindex_posfair.calibration.presets import PRESETS, preset

__all__ = [
    "PRESETS",
    "BasketPlan",
    "CalibrationConfig",
    "basket_lengths",
    "build_plan",
    "calibrate_weights",
    "merge_basket_states",
    "preset",
]
