"""Retrieval systems compared by the harness: small pluggable objects, one interface.

A system turns a benchmark's passages and queries into a ``[n_queries, n_docs]``
score matrix (higher is better; ranking is exact, by numpy) and says how many
vectors it stores per passage. Encoding goes through an ``EncodeCache`` so
systems that share an embedding (the rerank stage and the calibrated system,
every system's vanilla queries) compute it once.

The encoder is anything with the ``PosFairEncoder`` methods used here:
``encode_queries(texts, calibration=..., batch_size=...)``,
``encode_documents(...)``, ``tokenizer`` and ``fingerprint(calibration)``.

Example:
    >>> from research.eval.harness.systems import DenseSystem, EncodeCache
    >>> # enc = PosFairEncoder(bundled_model_path(), calibration=None, max_length=512)
    >>> # scores = DenseSystem("vanilla", enc).score(EncodeCache(docs, queries))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from tqdm.auto import tqdm

from ..memo import MemoEncoder, VectorMemo

__all__ = [
    "DenseSystem",
    "EncodeCache",
    "RerankSystem",
    "RetrievalSystem",
    "SegmentAverageSystem",
    "segment_text",
]


class EncoderLike(Protocol):
    tokenizer: Any

    def encode_queries(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray: ...

    def encode_documents(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray: ...

    def fingerprint(self, calibration: Any = ...) -> str: ...


@runtime_checkable
class RetrievalSystem(Protocol):
    """What the runner needs from a system.

    Attributes:
        name: Row label in tables and plots.
        kind: ``"dense"``, ``"segment-average"``, ``"rerank"`` ... (for grouping).
        params: Settings shown in the table (e.g. ``{"B": 128, "lambda": 0.5}``).
        vectors_per_passage: Vectors stored in the index per passage.
    """

    name: str
    kind: str
    params: dict[str, Any]
    vectors_per_passage: float

    def score(self, cache: EncodeCache) -> np.ndarray:
        """``[n_queries, n_docs]`` scores for ``cache.queries`` x ``cache.docs``."""
        ...


class EncodeCache:
    """Embeddings of one benchmark's texts, memoised per (encoder, calibration, role).

    Args:
        docs: Passage texts (score-matrix columns).
        queries: Query texts (rows).
        batch_size: Texts per forward pass.
        show_progress_bar: One tqdm bar per (uncached) document encoding.
        cache_dir: If set, the memo keeps every vector there too (:class:`~.memo.VectorMemo`: keyed by
            encoder fingerprint, role and text), so an interrupted run resumes without re-encoding.
        doc_ids: The passages' ids (systems that store documents by id, like the
            default pipeline, use them); default ``"0"``, ``"1"``, ...
        memo: The vector memo to read and fill (shared with the sweep's :class:`~.memo.MemoEncoder`
            and across benchmarks); default: a new one on ``cache_dir``. Every text is embedded once per
            (encoder fingerprint, role), whichever benchmark or system asks for it.

    Example:
        >>> cache = EncodeCache(["a passage"], ["a query"])
        >>> cache.n_docs, cache.n_queries
        (1, 1)
    """

    def __init__(
        self,
        docs: Sequence[str],
        queries: Sequence[str],
        batch_size: int = 16,
        show_progress_bar: bool = False,
        cache_dir: str | None = None,
        doc_ids: Sequence[str] | None = None,
        memo: VectorMemo | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if doc_ids is not None and (len(doc_ids) != len(docs) or len(set(doc_ids)) != len(doc_ids)):
            raise ValueError(f"doc_ids must name each of the {len(docs)} passages once, got {len(doc_ids)} ids")
        self.docs = list(docs)
        self.doc_ids = [str(i) for i in range(len(self.docs))] if doc_ids is None else [str(d) for d in doc_ids]
        self.queries = list(queries)
        self.batch_size = batch_size
        self.show_progress_bar = show_progress_bar
        self._store: dict[tuple[str, str], np.ndarray] = {}
        self.encoded_texts = 0  # passages + queries actually run through a model
        self.memo = memo if memo is not None else VectorMemo(cache_dir)

    @property
    def n_docs(self) -> int:
        return len(self.docs)

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    def _key(self, encoder: EncoderLike, calibration: Any, role: str) -> tuple[str, str]:
        return (encoder.fingerprint(calibration=canonical_calibration(calibration, role)), role)

    def has(self, encoder: EncoderLike, calibration: Any, role: str = "docs") -> bool:
        return self._key(encoder, calibration, role) in self._store

    def _encode(self, encoder: EncoderLike, texts: list[str], calibration: Any, role: str, desc: str) -> np.ndarray:
        """``texts`` embedded through the memo: only texts it lacks run through ``encoder``."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        calibration = canonical_calibration(calibration, role)
        memo = MemoEncoder(encoder, self.memo)
        fn = memo.encode_documents if role.startswith("doc") else memo.encode_queries
        chunks = []
        bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not self.show_progress_bar, leave=False)
        step = self.batch_size * 4
        for i in range(0, len(texts), step):
            chunks.append(fn(texts[i : i + step], calibration=calibration, batch_size=self.batch_size))
            bar.update(len(texts[i : i + step]))
        bar.close()
        self.encoded_texts += memo.computed
        return np.concatenate(chunks, axis=0)

    def docs_matrix(self, encoder: EncoderLike, calibration: Any, desc: str = "passages") -> np.ndarray:
        """All passages embedded with ``calibration`` (``None`` = plain)."""
        key = self._key(encoder, calibration, "docs")
        if key not in self._store:
            self._store[key] = self._encode(encoder, self.docs, calibration, "docs", desc)
        return self._store[key]

    def queries_matrix(self, encoder: EncoderLike, calibration: Any) -> np.ndarray:
        """All queries embedded with ``calibration`` (``None`` = plain)."""
        key = self._key(encoder, calibration, "queries")
        if key not in self._store:
            self._store[key] = self._encode(encoder, self.queries, calibration, "queries", "queries")
        return self._store[key]

    def texts_matrix(self, encoder: EncoderLike, texts: list[str], calibration: Any, tag: str) -> np.ndarray:
        """Arbitrary passage-side texts (e.g. segments), memoised under ``tag``."""
        key = (encoder.fingerprint(calibration=canonical_calibration(calibration, "docs")), f"texts:{tag}")
        if key not in self._store:
            self._store[key] = self._encode(encoder, texts, calibration, "docs", tag)
        return self._store[key]


def canonical_calibration(calibration: Any, role: str) -> Any:
    """The calibration that actually applies to ``role`` (``"docs..."``/``"texts..."`` or ``"queries"``).

    ``calibrate_documents=False`` makes document embeddings vanilla (``None``); the
    flag of the other role does not change them. Normalising both lets the
    "documents only" / "queries only" variants reuse the embeddings already made.
    """
    if calibration is None or not hasattr(calibration, "calibrate_documents"):
        return calibration
    if role.startswith("quer"):
        return calibration.model_copy(update={"calibrate_documents": True}) if calibration.calibrate_queries else None
    return calibration.model_copy(update={"calibrate_queries": True}) if calibration.calibrate_documents else None


def _label(calibration: Any) -> dict[str, Any]:
    if calibration is None:
        return {}
    layers = calibration.layers if isinstance(calibration.layers, str) else ",".join(map(str, calibration.layers))
    return {"B": calibration.basket_size, "lambda": calibration.strength, "layers": layers}


@dataclass
class DenseSystem:
    """One vector per passage from ``encoder``, plain or calibrated; exact dot-product search.

    Args:
        name: Row label.
        encoder: A ``PosFairEncoder`` (or look-alike).
        calibration: ``None`` for the vanilla encoder, or a ``CalibrationConfig``.
        kind: Table grouping (``"dense"``; ``"dump"`` for a DUMP-prefixed model).
    """

    name: str
    encoder: Any
    calibration: Any = None
    kind: str = "dense"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = 1.0

    def __post_init__(self) -> None:
        self.params = {**_label(self.calibration), **self.params}

    def score(self, cache: EncodeCache) -> np.ndarray:
        d = cache.docs_matrix(self.encoder, self.calibration, desc=self.name)
        q = cache.queries_matrix(self.encoder, self.calibration)
        return q @ d.T


def segment_text(text: str, tokenizer: Any, segment_tokens: int) -> list[str]:
    """Cut ``text`` into consecutive pieces of ``segment_tokens`` tokens (exact substrings).

    Uses the fast tokenizer's character offsets, so no text is lost or re-spelt.

    Example:
        >>> # segment_text("one two three", tok, 2) -> ["one two", "three"]
    """
    if segment_tokens < 1:
        raise ValueError(
            f"segment_tokens must be a positive integer, got {segment_tokens}; the paper's baseline uses ~128"
        )
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
    offsets = enc["offset_mapping"]
    if not offsets:
        return [text]
    pieces = []
    for i in range(0, len(offsets), segment_tokens):
        chunk = offsets[i : i + segment_tokens]
        pieces.append(text[chunk[0][0] : chunk[-1][1]])
    return pieces


@dataclass
class SegmentAverageSystem:
    """The "Segment Embed Average" baseline: embed fixed-size segments, average them.

    The mean of the (normalised) segment embeddings is re-normalised, so scores
    are cosines like the other systems' (ours). One vector per passage is stored.

    Args:
        name: Row label.
        encoder: Encoder for segments and queries (plain).
        segment_tokens: Tokens per segment.
    """

    name: str
    encoder: Any
    segment_tokens: int = 128
    kind: str = "segment-average"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = 1.0

    def __post_init__(self) -> None:
        if self.segment_tokens < 1:
            raise ValueError(f"segment_tokens must be a positive integer, got {self.segment_tokens}")
        self.params = {"segment_tokens": self.segment_tokens, **self.params}

    def score(self, cache: EncodeCache) -> np.ndarray:
        owners: list[int] = []
        segments: list[str] = []
        for i, text in enumerate(cache.docs):
            pieces = segment_text(text, self.encoder.tokenizer, self.segment_tokens)
            segments.extend(pieces)
            owners.extend([i] * len(pieces))
        seg = cache.texts_matrix(self.encoder, segments, None, f"segments{self.segment_tokens}")
        owner = np.asarray(owners)
        d = np.zeros((cache.n_docs, seg.shape[1]), dtype=np.float64)
        np.add.at(d, owner, seg)
        d /= np.bincount(owner, minlength=cache.n_docs)[:, None]
        d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
        q = cache.queries_matrix(self.encoder, None)
        return (q @ d.T.astype(np.float32)).astype(np.float32)


@dataclass
class RerankSystem:
    """Vanilla first stage, top-``k`` candidates re-scored with a calibrated encoder.

    The same thing ``PosFairRerank`` does inside LlamaIndex, implemented here
    directly on the encoder. Candidates keep the calibrated cosine; everything
    outside the top ``k`` keeps the first stage's order below the lowest candidate
    (so recall beyond ``k`` is the first stage's, not an artefact of ties).

    Args:
        name: Row label.
        first_stage: Any system (usually the vanilla ``DenseSystem``).
        encoder: Encoder used to re-embed candidates.
        calibration: The reranker's ``CalibrationConfig``.
        k: Candidates per query.
    """

    name: str
    first_stage: Any
    encoder: Any
    calibration: Any
    k: int = 100
    kind: str = "rerank"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = 1.0

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be a positive integer, got {self.k}; 100 candidates is typical")
        self.params = {**_label(self.calibration), "k": self.k, **self.params}

    def score(self, cache: EncodeCache) -> np.ndarray:
        first = self.first_stage.score(cache)
        k = min(self.k, cache.n_docs)
        cand = np.argsort(-first, axis=1, kind="stable")[:, :k]
        needed = np.unique(cand)
        if cache.has(self.encoder, self.calibration, "docs") or len(needed) == cache.n_docs:
            d = cache.docs_matrix(self.encoder, self.calibration, desc=self.name)
        else:  # re-embed only the candidates
            sub = cache.texts_matrix(
                self.encoder, [cache.docs[i] for i in needed], self.calibration, f"candidates:{self.name}"
            )
            d = np.zeros((cache.n_docs, sub.shape[1]), dtype=np.float32)
            d[needed] = sub
        q = cache.queries_matrix(self.encoder, self.calibration)
        rows = np.arange(first.shape[0])[:, None]
        reranked = np.einsum("qd,qkd->qk", q, d[cand]).astype(np.float64)
        first = np.asarray(first, dtype=np.float64)
        # non-candidates: the first stage's scores shifted below the lowest candidate of their row
        shift = first.max(axis=1, keepdims=True) - reranked.min(axis=1, keepdims=True) + 1.0
        out = first - shift
        out[rows, cand] = reranked
        return out.astype(np.float32)
