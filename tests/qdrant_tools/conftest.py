"""Fixtures for qdrant_tools tests: the shared fake encoder (``tests/fakes.py``) and a temporary store of each
embedded engine."""

from __future__ import annotations

import numpy as np
import pytest

from qdrant_tools.store import open_store


@pytest.fixture
def make_encoder(fake_encoder_factory):
    """Build a fake encoder with other settings (``salt=``, ``max_length=``, ``fail_on_call=``, ...)."""
    return fake_encoder_factory


@pytest.fixture
def encoder(make_encoder):
    """The shared fake encoder (16 dimensions, 64-token window): the ingestion ``Encoder`` protocol, no model."""
    return make_encoder()


@pytest.fixture(params=["edge", "local"])
def client(request):
    """A temporary store: the embedded Qdrant Edge store (the default) and qdrant-client's local mode."""
    c = open_store(":memory:", engine=request.param)
    yield c
    c.close()


WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
]


def make_text(seed: int, n_words: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, size=n_words)) + "."


@pytest.fixture
def corpus(tmp_path):
    """A folder with three documents of different lengths and one in a sub-folder."""
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text(make_text(1, 150))
    (root / "b.md").write_text(make_text(2, 40))
    (root / "sub" / "c.txt").write_text(make_text(3, 90))
    return root


@pytest.fixture
def fresh_advice(monkeypatch):
    """The search's once-per-collection advice forgotten, so a test sees it given (``qdrant_tools.search``)."""
    import qdrant_tools.search as S

    monkeypatch.setattr(S, "_ADVISED", set())
