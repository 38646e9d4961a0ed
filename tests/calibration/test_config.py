"""CalibrationConfig validation and helpers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from llamaindex_posfair import CalibrationConfig


def test_defaults_are_the_model_agnostic_ones():
    cfg = CalibrationConfig()
    assert (cfg.basket_size, cfg.strength, cfg.layers) == (128, 0.5, "last_half")


@pytest.mark.parametrize(
    "layers,num,expected",
    [
        ("last", 6, (5,)),
        ("last_half", 6, (3, 4, 5)),
        ("last_half", 5, (2, 3, 4)),
        ((0, -1), 4, (0, 3)),
    ],
)
def test_resolve_layers(layers, num, expected):
    assert CalibrationConfig(layers=layers).resolve_layers(num) == expected


def test_out_of_range_layer_names_the_valid_range():
    with pytest.raises(ValueError, match=r"use indices in \[-4, 3\]"):
        CalibrationConfig(layers=(7,)).resolve_layers(4)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"basket_size": 0}, "basket_size must be a positive integer, got 0"),
        ({"strength": 1.5}, "strength must lie in"),
        ({"layers": "first"}, 'layers must be "last", "last_half"'),
        ({"layers": ()}, "at least one layer"),
        ({"isolated_policy": {"bos": "half"}}, "isolated_policy"),
        ({"isolated_policy": {"eos": 1.5}}, "float in"),
        ({"pooling": "max"}, "pooling"),
    ],
)
def test_invalid_settings_are_named(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        CalibrationConfig(**kwargs)


def test_config_is_frozen():
    cfg = CalibrationConfig()
    with pytest.raises(ValidationError):
        cfg.strength = 0.9


def test_default_isolation_depends_on_pooling():
    cfg = CalibrationConfig()
    assert "cls" in cfg.isolated_kinds("cls")
    assert "eos" in cfg.isolated_kinds("last")
    assert cfg.isolated_kinds("mean") == ("dump",)
    assert cfg.policy_for("bos") == "original" and cfg.policy_for("eos") == "equal"


def test_policy_override_and_fingerprint_change():
    a = CalibrationConfig()
    b = CalibrationConfig(isolated_policy={"eos": 0.2})
    assert b.policy_for("eos") == 0.2
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint() == CalibrationConfig().fingerprint()


@pytest.mark.parametrize(
    "schedule,expected",
    [
        ("constant", {3: 0.6, 4: 0.6, 5: 0.6}),
        ("increasing", {3: 0.2, 4: 0.4, 5: 0.6}),
        ("decreasing", {3: 0.6, 4: 0.4, 5: 0.2}),
        ((0.0, 0.5, 1.0), {3: 0.0, 4: 0.3, 5: 0.6}),
    ],
)
def test_layer_strengths_follow_the_schedule(schedule, expected):
    got = CalibrationConfig(strength=0.6, strength_schedule=schedule).layer_strengths(6)
    assert got.keys() == expected.keys()
    assert all(abs(got[k] - expected[k]) < 1e-9 for k in got)


def test_explicit_schedule_must_match_the_layer_count():
    with pytest.raises(ValueError, match="one factor per calibrated layer"):
        CalibrationConfig(strength_schedule=(1.0, 0.5)).layer_strengths(6)
