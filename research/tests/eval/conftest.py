"""Fixtures of the evaluation-harness tests: the shared fake encoder with a planted primacy bias, format fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def fake_encoder(fake_encoder_factory):
    """Token weights decay with position; calibration strength 1 removes the decay (plain queries stay comparable)."""
    return fake_encoder_factory(dimension=8192, calibration=None, position_decay=0.03, calibration_salt=False)


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES
