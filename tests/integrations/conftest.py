"""Fixtures for the LlamaIndex/Qdrant integration tests.

``fake_encoder`` / ``make_fake`` are the shared deterministic stand-in for
``PosFairEncoder`` (``tests/fakes.py``: same attributes and call signatures,
hashing bag-of-words vectors, calls recorded) for logic tests;
``minilm`` is the real bundled all-MiniLM-L6-v2 for behaviour that needs real
weights (loaded once per session; tests using it are marked slow).
"""

from __future__ import annotations

import functools
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def make_fake(fake_encoder_factory):
    """Build a fake encoder (a 32-token window by default); each calibration hashes into its own space."""
    return functools.partial(fake_encoder_factory, max_length=32)


@pytest.fixture
def fake_encoder(make_fake):
    return make_fake()


@pytest.fixture(params=["edge", "local"])
def client(request):
    """An empty temporary store of each embedded engine: Qdrant Edge and qdrant-client's local mode."""
    from qdrant_tools.store import open_store

    c = open_store(":memory:", engine=request.param)
    yield c
    c.close()


@pytest.fixture(scope="session")
def minilm():
    """Real all-MiniLM-L6-v2, calibrated with ``CalibrationConfig()`` (B=128, lambda=0.5, last half)."""
    from llamaindex_posfair import BUNDLED_MINILM, CalibrationConfig, PosFairEncoder

    return PosFairEncoder(BUNDLED_MINILM, calibration=CalibrationConfig())


@pytest.fixture(scope="session")
def example_data():
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "examples" / "data"


class _Loaded:
    """Every fake encoder the CLI loaded (one per command), with their calls in order."""

    def __init__(self):
        self.encoders = []

    @property
    def calls(self):
        return [c for enc in self.encoders for c in enc.calls]


@pytest.fixture
def fake_cli(monkeypatch, make_fake):
    loaded = _Loaded()

    def load_spec(spec, args):
        loaded.encoders.append(make_fake(dimension=256, max_length=128, spec=spec))
        return loaded.encoders[-1]

    monkeypatch.setattr("llamaindex_posfair.cli.options.load_spec", load_spec)
    return loaded
