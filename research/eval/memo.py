"""An encoder that remembers every vector it made, per (fingerprint, role, text), in memory and on disk.

The sweep that chose the default pipeline (:mod:`research.default_pipeline`) ingests the same
benchmark many times: node texts repeat across sub-chunk settings, sub-chunk
texts repeat across overlaps and node sizes. :class:`MemoEncoder` wraps any
encoder with the ingestion ``Encoder`` methods, so ``qdrant_tools.ingest`` runs
unchanged while each distinct text is embedded once. The key is the wrapped
encoder's ``fingerprint`` (every setting that shapes the vectors, calibration
included), the role (query or document) and the text itself.

Short texts may be shared between encoders that provably give them the same
vectors: a calibration with ``skip_single_basket`` leaves a text that fits in
one basket unchanged, and a window longer than the text does not change it.
:meth:`MemoEncoder.share_short_texts` states such a bound and *checks* it on
probe texts before any vector is shared, so a wrong claim raises instead of
serving another encoder's vectors.

Because a memoised run does not pay for embedding, the memo also *charges*
each text what it cost when it was computed (its share of the batch's wall
time, by length): ``wall - spent_seconds + charged_seconds`` is the time a
cold run would have taken (ingest chunks/s).

Example:
    >>> from research.eval.memo import MemoEncoder, VectorMemo
    >>> memo = VectorMemo()                                   # or VectorMemo("~/.cache/posfair/memo")
    >>> # enc = MemoEncoder(EncoderSpec().load(), memo)
    >>> # enc.encode_documents(["a", "b"]); enc.encode_documents(["b"])  # "b" embedded once
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MemoEncoder", "Sharing", "VectorMemo", "unchanged_tokens"]

Entry = tuple[np.ndarray, float]


def _text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class VectorMemo:
    """Vectors by bucket (``"<fingerprint>-<role>"``) and text hash, kept in memory and optionally on disk.

    Args:
        cache_dir: folder of ``.npz`` shards (one sub-folder per bucket); ``None`` = memory only.
    """

    def __init__(self, cache_dir: str | Path | None = None) -> None:
        self.cache_dir = None if cache_dir is None else Path(cache_dir).expanduser()
        self._buckets: dict[str, dict[str, Entry]] = {}

    def bucket(self, name: str) -> dict[str, Entry]:
        """The entries of ``name`` (read from disk on first use)."""
        if name not in self._buckets:
            self._buckets[name] = self._load(name)
        return self._buckets[name]

    def add(self, name: str, keys: list[str], vecs: np.ndarray, seconds: np.ndarray) -> None:
        """Remember ``vecs`` (and what each cost) under ``name``; write one shard if on disk."""
        bucket = self.bucket(name)
        for k, v, s in zip(keys, vecs, seconds):
            bucket[k] = (v, float(s))
        if self.cache_dir is None or not keys:
            return
        folder = self.cache_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        shard = folder / f"{hashlib.sha1(''.join(keys).encode()).hexdigest()[:16]}.npz"
        tmp = folder / (shard.name + ".tmp")
        with open(tmp, "wb") as fh:  # written whole, then renamed: an interrupted run leaves no torn shard
            np.savez(fh, keys=np.array(keys), vectors=vecs, seconds=seconds)
        tmp.replace(shard)

    def _load(self, name: str) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        if self.cache_dir is None or not (self.cache_dir / name).is_dir():
            return out
        for shard in sorted((self.cache_dir / name).glob("*.npz")):
            with np.load(shard) as data:
                for k, v, s in zip(data["keys"], data["vectors"], data["seconds"]):
                    out[str(k)] = (v, float(s))
        return out


@dataclass(frozen=True)
class Sharing:
    """Texts of at most ``max_tokens`` tokens (special tokens included) belong to ``owner``: they are
    stored under its fingerprint and embedded by it."""

    owner: MemoEncoder
    max_tokens: int

    @property
    def fingerprint(self) -> str:
        return self.owner.fingerprint()


def unchanged_tokens(calibration: Any, max_length: int) -> int:
    """The longest text (tokens, special tokens included) whose vector ``calibration`` leaves unchanged.

    With ``skip_single_basket`` a text whose tokens fit in one basket is not calibrated (counting
    special tokens as content is conservative: an isolated token only shortens the content).
    ``None`` calibration changes nothing within the window. ``0`` = no such bound.

    Example:
        >>> from llamaindex_posfair.calibration.config import CalibrationConfig
        >>> unchanged_tokens(CalibrationConfig(basket_size=128), 256), unchanged_tokens(None, 256)
        (128, 256)
    """
    if calibration is None or float(calibration.strength) == 0.0:
        return max_length
    if not calibration.skip_single_basket:
        return 0
    return min(max_length, int(calibration.basket_size))


class MemoEncoder:
    """Wrap ``encoder`` so every (fingerprint, role, text) is embedded once.

    Args:
        encoder: anything with ``encode_documents``/``encode_queries``, ``fingerprint()``,
            ``count_tokens``, ``dimension``, ``max_length`` (and optionally ``tokenizer``, ``spec``).
        memo: the vector store, shared by several wrappers (default: a new in-memory one).

    Attributes:
        computed: texts actually run through ``encoder``.
        reused: texts served from the memo.
        spent_seconds: wall time spent inside ``encoder``.
        charged_seconds: what every text served (computed or reused) cost when it was computed.

    Example:
        >>> from research.eval.memo import MemoEncoder
        >>> # enc = MemoEncoder(EncoderSpec().load()); enc.encode_queries(["a"]).shape -> (1, 384)
    """

    def __init__(self, encoder: Any, memo: VectorMemo | None = None) -> None:
        self.encoder = encoder
        self.memo = memo if memo is not None else VectorMemo()
        self.sharing: Sharing | None = None
        self.reset_counters()

    # ------------------------------------------------------------------ the wrapped encoder's properties
    @property
    def tokenizer(self) -> Any:
        return getattr(self.encoder, "tokenizer", None)

    @property
    def dimension(self) -> int:
        return int(self.encoder.dimension)

    @property
    def max_length(self) -> int:
        return int(self.encoder.max_length)

    @property
    def spec(self) -> Any:
        return getattr(self.encoder, "spec", None)

    @property
    def calibration(self) -> Any:
        return getattr(self.encoder, "calibration", None)

    def fingerprint(self, *args: Any, **kwargs: Any) -> str:
        return self.encoder.fingerprint(*args, **kwargs)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return list(self.encoder.count_tokens(list(texts)))

    def reset_counters(self) -> None:
        """Zero ``computed``, ``reused``, ``spent_seconds`` and ``charged_seconds``."""
        self.computed = self.reused = 0
        self.spent_seconds = self.charged_seconds = 0.0

    # ------------------------------------------------------------------ sharing
    def share_short_texts(self, other: MemoEncoder, max_tokens: int, probes: Sequence[str], atol: float = 1e-5) -> None:
        """Store texts of at most ``max_tokens`` tokens under ``other``'s fingerprint, after checking the claim.

        Args:
            other: an encoder that gives such texts the same vectors (e.g. the plain model).
            max_tokens: the bound (special tokens included), e.g. :func:`unchanged_tokens`.
            probes: texts to check on; those within the bound are embedded by both encoders.
            atol: largest allowed difference of any coordinate.

        Raises:
            ValueError: no probe within the bound, or the two encoders disagree on one (the claim is wrong).
        """
        short = [t for t, n in zip(probes, self.count_tokens(probes)) if n <= max_tokens]
        if not short:
            raise ValueError(f"no probe text has at most {max_tokens} tokens; pass shorter probes")
        mine = np.asarray(self.encoder.encode_documents(short), dtype=np.float32)
        theirs = np.asarray(other.encoder.encode_documents(short), dtype=np.float32)
        diff = float(np.abs(mine - theirs).max())
        if diff > atol:
            raise ValueError(
                f"encoders {self.fingerprint()} and {other.fingerprint()} differ by {diff:.2e} on texts of at "
                f"most {max_tokens} tokens; they cannot share vectors (lower max_tokens)"
            )
        self.sharing = Sharing(other, max_tokens)

    # ------------------------------------------------------------------ encoding
    def encode_documents(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        return self._encode("documents", list(texts), kwargs)

    def encode_queries(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        return self._encode("queries", list(texts), kwargs)

    def _buckets(self, role: str, texts: list[str], kwargs: dict[str, Any]) -> list[str]:
        """The bucket of each text: the (shared) fingerprint and the role."""
        if "calibration" in kwargs:  # a per-call override: its own fingerprint, never shared
            return [f"{self.encoder.fingerprint(calibration=kwargs['calibration'])}-{role}"] * len(texts)
        own = f"{self.encoder.fingerprint()}-{role}"
        if self.sharing is None or not texts:
            return [own] * len(texts)
        shared = f"{self.sharing.fingerprint}-{role}"
        return [shared if n <= self.sharing.max_tokens else own for n in self.count_tokens(texts)]

    def _encode(self, role: str, texts: list[str], kwargs: dict[str, Any]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        names = self._buckets(role, texts, kwargs)
        keys = [_text_key(t) for t in texts]
        todo: dict[tuple[str, str], str] = {}
        for name, key, text in zip(names, keys, texts):
            if key not in self.memo.bucket(name):
                todo.setdefault((name, key), text)
        if todo:
            self._compute(role, todo, kwargs)
        self.reused += len(texts) - len(todo)
        entries = [self.memo.bucket(n)[k] for n, k in zip(names, keys)]
        self.charged_seconds += sum(e[1] for e in entries)
        return np.stack([e[0] for e in entries])

    def _compute(self, role: str, todo: dict[tuple[str, str], str], kwargs: dict[str, Any]) -> None:
        """Embed the missing texts, bucket by bucket (a shared bucket's texts by its owner)."""
        shared = None if self.sharing is None else f"{self.sharing.fingerprint}-{role}"
        for name in dict.fromkeys(n for n, _ in todo):
            items = [(k, t) for (n, k), t in todo.items() if n == name]
            encoder = self.sharing.owner.encoder if name == shared and self.sharing else self.encoder
            fn = encoder.encode_documents if role == "documents" else encoder.encode_queries
            t0 = time.perf_counter()
            vecs = np.asarray(fn([t for _, t in items], **kwargs), dtype=np.float32)
            seconds = time.perf_counter() - t0
            self.spent_seconds += seconds
            self.computed += len(items)
            weights = np.array([len(t) + 1 for _, t in items], dtype=np.float64)
            self.memo.add(name, [k for k, _ in items], vecs, seconds * weights / weights.sum())
