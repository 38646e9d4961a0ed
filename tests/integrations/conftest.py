"""Fixtures for the LlamaIndex/Qdrant integration tests.

``FakeEncoder`` is a tiny deterministic stand-in for ``PosFairEncoder`` (same
attributes and call signatures, hashing bag-of-words vectors) for logic tests;
``minilm`` is the real bundled all-MiniLM-L6-v2 for behaviour that needs real
weights (loaded once per session; tests using it are marked slow).
"""

from __future__ import annotations

import hashlib
import os
import re
import time

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_UNSET = object()


def _salt(cal) -> str:
    return "plain" if cal is None else cal.fingerprint()


class FakeEncoder:
    """Deterministic PosFairEncoder stand-in recording its calls."""

    def __init__(self, dimension=16, max_length=32, calibration=_UNSET, delay=0.0, model_id="fake-model", spec=None):
        from llamaindex_posfair import CalibrationConfig, EncoderSpec

        if calibration is _UNSET:
            calibration = CalibrationConfig() if spec is None else spec.calibration
        base = spec if spec is not None else EncoderSpec(model=model_id)
        self.spec = base.model_copy(update={"calibration": calibration, "weights": f"fake-{dimension}"})
        self.dump_tokens = 0
        self._dimension = dimension
        self._max_length = max_length
        self.delay = delay
        self.calls: list[tuple[str, int, object]] = []

    model_id = property(lambda self: self.spec.model)
    calibration = property(lambda self: self.spec.calibration)
    query_prompt = property(lambda self: self.spec.query_prompt)
    document_prompt = property(lambda self: self.spec.document_prompt)
    normalize = property(lambda self: self.spec.normalize)
    backend_name = property(lambda self: self.spec.backend)

    @property
    def dimension(self):
        return self._dimension

    @property
    def max_length(self):
        return self._max_length

    def fingerprint(self, calibration=_UNSET):
        spec = self.spec if calibration is _UNSET else self.spec.with_calibration(calibration)
        return spec.fingerprint()

    def count_tokens(self, texts):
        return [len(t.split()) + 2 for t in texts]

    def _vec(self, texts, cal):
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(f"{_salt(cal)}{w}".encode()).hexdigest(), 16) % self._dimension] += 1.0
            out[i, 0] += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def _encode(self, role, texts, calibration, kwargs):
        if self.delay:
            time.sleep(self.delay)
        cal = self.calibration if calibration is _UNSET else calibration
        self.calls.append((role, len(texts), cal))
        return self._vec(list(texts), cal)

    def encode_queries(self, texts, calibration=_UNSET, **kwargs):
        return self._encode("query", texts, calibration, kwargs)

    def encode_documents(self, texts, calibration=_UNSET, **kwargs):
        return self._encode("document", texts, calibration, kwargs)


@pytest.fixture
def fake_encoder():
    return FakeEncoder()


@pytest.fixture
def make_fake():
    return FakeEncoder


@pytest.fixture(scope="session")
def minilm():
    """Real all-MiniLM-L6-v2 with the default calibration (B=128, lambda=0.5, last half)."""
    from llamaindex_posfair import BUNDLED_MINILM, CalibrationConfig, PosFairEncoder

    return PosFairEncoder(BUNDLED_MINILM, calibration=CalibrationConfig())


@pytest.fixture(scope="session")
def example_data():
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "examples" / "data"
