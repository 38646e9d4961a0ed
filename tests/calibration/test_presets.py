"""Named calibration presets."""

from __future__ import annotations

import pytest

from llamaindex_posfair.calibration import PRESETS, CalibrationConfig, preset


def test_paper_preset_is_the_published_default():
    assert preset("paper") == CalibrationConfig()
    assert (preset("paper").basket_size, preset("paper").strength, preset("paper").layers) == (128, 0.5, "last_half")


def test_every_preset_is_a_config_with_a_distinct_setting():
    assert set(PRESETS) >= {"paper", "posfair-minilm"}
    assert all(isinstance(c, CalibrationConfig) for c in PRESETS.values())
    assert preset("posfair-minilm") != preset("paper")


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown calibration preset 'minilm'; known presets: paper, posfair-minilm"):
        preset("minilm")
