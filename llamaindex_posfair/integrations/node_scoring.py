"""Score candidate texts against a query: node vector, best sub-chunk, or a fusion of both.

The query-time counterpart of the sub-chunk layout of ``posfair ingest``, for
indexes built elsewhere (no re-index): each candidate is cut into the same
sentence-aligned sub-chunks (:mod:`qdrant_tools.subchunks`), every sub-chunk is
embedded, and the candidate scores its best one. Used by
:class:`~llamaindex_posfair.PositionFairRerank` (and by the rerank endpoint of
the serving endpoints), so every reranking path scores alike.

Example:
    >>> scorer = NodeScorer(encoder, scoring="subchunks")          # doctest: +SKIP
    >>> scorer.scores("where is the evidence?", ["a long passage ..."])  # doctest: +SKIP
    array([0.61], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from qdrant_tools.encoding import spans_for
from qdrant_tools.subchunks import DEFAULT_SUBCHUNKS, SubchunkConfig, subchunk_text

Scoring = Literal["node", "subchunks", "fusion"]
SCORINGS: tuple[str, ...] = ("node", "subchunks", "fusion")

__all__ = ["SCORINGS", "NodeScorer", "Scoring"]


def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


@dataclass
class NodeScorer:
    """Cosine scores of candidate texts for a query.

    Args:
        encoder: a ``PosFairEncoder`` (or anything with ``encode_queries`` / ``encode_documents``;
            a fast ``tokenizer`` makes sub-chunks follow its tokens).
        scoring: ``"node"`` = one vector per candidate; ``"subchunks"`` = its best
            sub-chunk; ``"fusion"`` = ``node_weight * node + (1 - node_weight) * best sub-chunk``.
        subchunks: how candidates are cut into sub-chunks.
        node_weight: weight of the node cosine in ``"fusion"``.

    Raises:
        ValueError: an unknown ``scoring`` or a ``node_weight`` outside [0, 1].
    """

    encoder: Any
    scoring: Scoring = "node"
    subchunks: SubchunkConfig = DEFAULT_SUBCHUNKS
    node_weight: float = 0.3

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS:
            raise ValueError(f'scoring must be "node", "subchunks" or "fusion", got {self.scoring!r}')
        if not 0.0 <= self.node_weight <= 1.0:
            raise ValueError(f"node_weight must lie in [0, 1], got {self.node_weight!r}")

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One score per text (float32), higher is better."""
        q = _unit_rows(self.encoder.encode_queries([query]))[0]
        if not texts:
            return np.zeros(0, dtype=np.float32)
        node = _unit_rows(self.encoder.encode_documents(list(texts))) @ q if self.scoring != "subchunks" else None
        if self.scoring == "node":
            return node
        best = self._best_subchunks(q, texts)
        return best if node is None else self.node_weight * node + (1.0 - self.node_weight) * best

    def _best_subchunks(self, q: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        spans_fn, _ = spans_for(self.encoder)
        pieces: list[str] = []
        owners: list[int] = []
        for i, text in enumerate(texts):
            subs = [s.text for s in subchunk_text(text, self.subchunks, spans_fn)] or [text]
            pieces.extend(subs)
            owners.extend([i] * len(subs))
        sims = _unit_rows(self.encoder.encode_documents(pieces)) @ q
        best = np.full(len(texts), -np.inf, dtype=np.float32)
        np.maximum.at(best, np.asarray(owners), sims.astype(np.float32))
        return best
