"""The one fake encoder of the test suite: a hashed bag of words standing in for ``PosFairEncoder``.

The eval, integrations and qdrant_tools tests build it through the
``fake_encoder_factory`` fixture of ``tests/conftest.py`` (their conftests set
their own defaults); nothing here loads a model.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any, NamedTuple

import numpy as np

_UNSET: Any = object()


class WhitespaceTokenizer:
    """Whitespace 'tokens' with character offsets, like a fast HF tokenizer's output."""

    def __call__(self, text, add_special_tokens=True, return_offsets_mapping=False, truncation=False):
        if isinstance(text, list):
            return {"input_ids": [self(t, add_special_tokens)["input_ids"] for t in text]}
        spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
        ids = list(range(len(spans)))
        if add_special_tokens:
            ids = [-1, *ids, -2]
        out: dict[str, Any] = {"input_ids": ids}
        if return_offsets_mapping:
            out["offset_mapping"] = spans
        return out


class Call(NamedTuple):
    """One encode call: ``("query" | "document", number of texts, calibration used)``."""

    role: str
    count: int
    calibration: Any


class FakeEncoder:
    """Deterministic ``PosFairEncoder`` stand-in: a hashed, L2-normalised bag of words.

    It has what the code under test reads from an encoder: the ingestion
    ``Encoder`` protocol (``dimension``, ``max_length``, ``fingerprint()``,
    ``count_tokens``, ``encode_documents`` / ``encode_queries``), the attributes
    the LlamaIndex classes copy (``model_id``, ``calibration``, prompts,
    ``normalize``, ``backend_name``, ``dump_tokens``) and what the evaluation
    harness uses (``tokenizer``, ``fingerprint(calibration=...)``,
    ``encode_*(texts, calibration=..., batch_size=...)``).

    Args:
        dimension: vector size.
        max_length: token window; ``count_tokens`` is words + 2 special tokens.
        calibration: the encoder's own calibration, used when a call passes
            none (``CalibrationConfig()`` by default; ``None`` = plain).
        model_id: the model name (part of the fingerprint).
        salt: hash salt; two salts behave like two different models.
        position_decay: ``0`` = plain bag of words. ``> 0`` plants a primacy
            bias: word ``i`` weighs ``w = 1 / (1 + position_decay * i)``, and a
            calibration of strength ``s`` flattens it to ``(1 - s) * w + s``
            (strength 1 removes the bias).
        calibration_salt: the calibration's fingerprint also salts the hash, so
            each calibration has its own unrelated vector space (tests can tell
            which one encoded a text). ``False`` keeps calibrated documents
            comparable with plain queries (the evaluation harness).
        delay: seconds slept per encode call (for async tests).
        fail_on_call: raise ``RuntimeError`` on this encode call (1-based).
        spec: an ``EncoderSpec`` to stand in for (model id, calibration, prompts); the fake's
            ``spec`` is it with a fake weights identity, and ``fingerprint()`` is that spec's.

    Attributes:
        calls: one :class:`Call` per encode call, in order.

    Example:
        >>> enc = FakeEncoder(calibration=None)
        >>> enc.encode_documents(["red apples", "green pears"]).shape
        (2, 16)
        >>> enc.calls
        [Call(role='document', count=2, calibration=None)]
    """

    def __init__(
        self,
        dimension: int = 16,
        max_length: int = 64,
        calibration: Any = _UNSET,
        model_id: str = "fake-model",
        salt: str = "a",
        position_decay: float = 0.0,
        calibration_salt: bool = True,
        delay: float = 0.0,
        fail_on_call: int | None = None,
        spec: Any = None,
    ) -> None:
        from llamaindex_posfair import CalibrationConfig, EncoderSpec

        if calibration is _UNSET:
            calibration = CalibrationConfig() if spec is None else spec.calibration
        base = spec if spec is not None else EncoderSpec(model=model_id, calibration=None)
        weights = f"fake-{salt}-{dimension}-{position_decay}-{calibration_salt}"
        # a loaded encoder's spec records the precision it runs in, never "auto" (as PosFairEncoder's)
        self.spec = base.resolved().model_copy(update={"calibration": _real(calibration), "weights": weights})
        self.calibration = calibration
        self.dump_tokens = 0
        self.tokenizer = WhitespaceTokenizer()
        self.salt = salt
        self.position_decay = position_decay
        self.calibration_salt = calibration_salt
        self.delay = delay
        self.fail_on_call = fail_on_call
        self.calls: list[Call] = []
        self._dimension = dimension
        self._max_length = max_length

    model_id = property(lambda self: self.spec.model)
    query_prompt = property(lambda self: self.spec.query_prompt)
    document_prompt = property(lambda self: self.spec.document_prompt)
    normalize = property(lambda self: self.spec.normalize)
    backend_name = property(lambda self: self.spec.backend)

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_length(self) -> int:
        return self._max_length

    def fingerprint(self, calibration: Any = _UNSET) -> str:
        """Hash of every setting that shapes the vectors (``calibration`` defaults to the encoder's)."""
        cal = self.calibration if calibration is _UNSET else calibration
        if _real(cal) is cal:  # a CalibrationConfig or None: the spec's fingerprint, as PosFairEncoder does
            return self.spec.with_calibration(cal).fingerprint()
        parts = (self.spec.weights, _tag(cal))
        return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]

    def count_tokens(self, texts) -> list[int]:
        return [len(t.split()) + 2 for t in texts]

    def _vec(self, texts, calibration) -> np.ndarray:
        """The vectors of ``texts`` under ``calibration`` (``None`` = plain); what ``encode_*`` return."""
        strength = 0.0 if calibration is None else float(calibration.strength)
        salt = f"{self.salt}|{_tag(calibration) if self.calibration_salt else ''}|"
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for i, word in enumerate(re.findall(r"\w+", text.lower())):
                weight = 1.0 / (1.0 + self.position_decay * i)
                bucket = int(hashlib.md5((salt + word).encode()).hexdigest(), 16) % self._dimension
                out[row, bucket] += (1.0 - strength) * weight + strength
            out[row, 0] += 1e-3  # an empty text still has a direction
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def _encode(self, role: str, texts, calibration) -> np.ndarray:
        if self.delay:
            time.sleep(self.delay)
        cal = self.calibration if calibration is _UNSET else calibration
        self.calls.append(Call(role, len(texts), cal))
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise RuntimeError("injected failure")
        return self._vec(list(texts), cal)

    def encode_queries(self, texts, calibration: Any = _UNSET, **kwargs: Any) -> np.ndarray:
        return self._encode("query", texts, calibration)

    def encode_documents(self, texts, calibration: Any = _UNSET, **kwargs: Any) -> np.ndarray:
        return self._encode("document", texts, calibration)


def _real(calibration: Any) -> Any:
    """``calibration`` if it is a ``CalibrationConfig`` or ``None``, else ``None`` (a test stand-in)."""
    from llamaindex_posfair import CalibrationConfig

    return calibration if calibration is None or isinstance(calibration, CalibrationConfig) else None


def _tag(calibration: Any) -> str:
    """``"plain"``, a ``CalibrationConfig``'s fingerprint, or the repr of a stand-in (e.g. a ``SimpleNamespace``)."""
    if calibration is None:
        return "plain"
    fingerprint = getattr(calibration, "fingerprint", None)
    return fingerprint() if callable(fingerprint) else repr(calibration)
