"""Chunk-max: the usual user fix for position bias (cut passages small, keep the best chunk).

Each passage is cut into consecutive chunks of ``chunk_tokens`` tokens (exact
substrings, ``systems.segment_text``), every chunk is embedded on its own, and a
passage scores the maximum of its chunks' cosines with the query. The index
stores one vector per chunk, so ``vectors_per_passage`` is the mean chunk count
(known after ``score`` has run).

Example:
    >>> from research.eval.harness.chunking_systems import ChunkMaxSystem
    >>> # rows = ChunkMaxSystem("chunk-max 128", enc, 128).score(cache)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llamaindex_posfair.scoring import max_over_owners

from .systems import EncodeCache, segment_text

__all__ = ["ChunkMaxSystem", "chunk_corpus"]


def chunk_corpus(texts: list[str], tokenizer: Any, chunk_tokens: int) -> tuple[list[str], np.ndarray]:
    """All chunks of all ``texts`` and, per chunk, the index of its passage."""
    chunks: list[str] = []
    owners: list[int] = []
    for i, text in enumerate(texts):
        pieces = segment_text(text, tokenizer, chunk_tokens)
        chunks.extend(pieces)
        owners.extend([i] * len(pieces))
    return chunks, np.asarray(owners, dtype=np.int64)


@dataclass
class ChunkMaxSystem:
    """Chunks of ``chunk_tokens`` tokens embedded separately; passage score = best chunk.

    Args:
        name: Row label.
        encoder: Encoder of chunks and queries.
        chunk_tokens: Tokens per chunk (64/128/256 are the usual choices).
        calibration: Optional ``CalibrationConfig`` for the chunks and queries
            (a chunk shorter than one basket is left unchanged by default).

    Raises:
        ValueError: ``chunk_tokens`` is not a positive integer.
    """

    name: str
    encoder: Any
    chunk_tokens: int = 128
    calibration: Any = None
    kind: str = "chunk-max"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = float("nan")

    def __post_init__(self) -> None:
        if isinstance(self.chunk_tokens, bool) or self.chunk_tokens < 1:
            raise ValueError(f"chunk_tokens must be a positive integer, got {self.chunk_tokens!r}; e.g. 64, 128, 256")
        self.params = {"chunk_tokens": self.chunk_tokens, **self.params}

    def score(self, cache: EncodeCache) -> np.ndarray:
        chunks, owners = chunk_corpus(cache.docs, self.encoder.tokenizer, self.chunk_tokens)
        vecs = cache.texts_matrix(self.encoder, chunks, self.calibration, f"segments{self.chunk_tokens}")
        q = cache.queries_matrix(self.encoder, self.calibration)
        self.vectors_per_passage = len(chunks) / max(cache.n_docs, 1)
        return max_over_owners(q @ vecs.T, owners, cache.n_docs).astype(np.float32)
