"""Fixtures of the evaluation-harness tests: a tiny deterministic fake encoder and format fixtures."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures"


class WhitespaceTokenizer:
    """Whitespace 'tokens' with character offsets, like a fast HF tokenizer's output."""

    def __call__(self, text, add_special_tokens=True, return_offsets_mapping=False, truncation=False):
        if isinstance(text, list):
            return {"input_ids": [self(t, add_special_tokens)["input_ids"] for t in text]}
        spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
        ids = list(range(len(spans)))
        if add_special_tokens:
            ids = [-1] + ids + [-2]
        out = {"input_ids": ids}
        if return_offsets_mapping:
            out["offset_mapping"] = spans
        return out


class FakeEncoder:
    """Hashed bag of words whose token weights decay with position (a planted primacy bias).

    A ``calibration`` object with a ``strength`` attribute flattens the decay:
    weight = (1 - s) * decay + s, so strength 1 removes the position bias.
    """

    dim = 8192

    def __init__(self, decay: float = 0.03):
        self.decay = decay
        self.tokenizer = WhitespaceTokenizer()
        self.calls = 0

    def fingerprint(self, calibration=None) -> str:
        return "fake" if calibration is None else f"fake-{calibration.strength}-{calibration.basket_size}"

    def _vec(self, text: str, strength: float) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for i, w in enumerate(re.findall(r"[a-z0-9]+", text.lower())):
            h = int(hashlib.md5(w.encode()).hexdigest()[:8], 16) % self.dim
            decay = 1.0 / (1.0 + self.decay * i)
            v[h] += (1 - strength) * decay + strength
        n = np.linalg.norm(v)
        return v / n if n else v

    def encode_documents(self, texts, calibration=None, batch_size=None, **kw):
        self.calls += 1
        s = 0.0 if calibration is None else calibration.strength
        return np.stack([self._vec(t, s) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def encode_queries(self, texts, calibration=None, batch_size=None, **kw):
        return self.encode_documents(texts, calibration=None)

    def count_tokens(self, texts):
        return [len(t.split()) + 2 for t in texts]


@pytest.fixture(scope="session")
def fake_encoder() -> FakeEncoder:
    return FakeEncoder()


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES
