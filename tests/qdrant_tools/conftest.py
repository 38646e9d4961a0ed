"""Fixtures for qdrant_tools tests: a tiny deterministic encoder and a temporary store of each embedded backend."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from qdrant_tools.store import open_store


class HashEncoder:
    """Deterministic bag-of-words hashing encoder (no model) implementing the ingestion Encoder protocol."""

    def __init__(self, dimension: int = 16, max_length: int = 64, salt: str = "a", fail_on_call: int | None = None):
        self._dimension = dimension
        self._max_length = max_length
        self.salt = salt
        self.calls = 0
        self.fail_on_call = fail_on_call

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_length(self) -> int:
        return self._max_length

    def fingerprint(self) -> str:
        return f"hash-{self._dimension}-{self.salt}"

    def count_tokens(self, texts):
        return [len(t.split()) + 2 for t in texts]

    def _encode(self, texts):
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                h = int(hashlib.md5((self.salt + w).encode()).hexdigest(), 16)
                out[i, h % self._dimension] += 1.0
            out[i, 0] += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def encode_documents(self, texts):
        self.calls += 1
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise RuntimeError("injected failure")
        return self._encode(texts)

    def encode_queries(self, texts):
        return self._encode(texts)


@pytest.fixture
def encoder() -> HashEncoder:
    return HashEncoder()


@pytest.fixture(params=["edge", "local"])
def client(request):
    """A temporary store: the embedded Qdrant Edge store (the default) and qdrant-client's local mode."""
    c = open_store(":memory:", backend=request.param)
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
def make_encoder():
    """The HashEncoder class, to build encoders with other settings."""
    return HashEncoder
