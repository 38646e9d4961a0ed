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

from llamaindex_posfair.scoring import NODE_WEIGHT, cosine_matrix, fuse_node_scores, max_over_owners
from qdrant_tools.encoding import spans_for
from qdrant_tools.subchunks import DEFAULT_SUBCHUNKS, SubchunkConfig, subchunk_text

Scoring = Literal["node", "subchunks", "fusion"]
SCORINGS: tuple[str, ...] = ("node", "subchunks", "fusion")

__all__ = [
    "NODE_SCORING",
    "SCORINGS",
    "NodeScorer",
    "Scoring",
    "ScoringPlan",
    "ScoringSettings",
    "check_scoring",
    "combine_scores",
    "plan_scoring",
]


def check_scoring(scoring: str, node_weight: float) -> None:
    """Raise ``ValueError`` for an unknown ``scoring`` or a ``node_weight`` outside [0, 1]."""
    if scoring not in SCORINGS:
        raise ValueError(f'scoring must be "node", "subchunks" or "fusion", got {scoring!r}')
    if not 0.0 <= node_weight <= 1.0:
        raise ValueError(f"node_weight must lie in [0, 1], got {node_weight!r}")


@dataclass(frozen=True)
class ScoringSettings:
    """How candidates are scored (what ``PositionFairRerank`` and ``POST /v1/rerank`` share).

    Raises:
        ValueError: an unknown ``scoring`` or a ``node_weight`` outside [0, 1].
    """

    scoring: Scoring = "node"
    subchunks: SubchunkConfig = DEFAULT_SUBCHUNKS
    node_weight: float = NODE_WEIGHT

    def __post_init__(self) -> None:
        check_scoring(self.scoring, self.node_weight)

    def wire(self) -> dict[str, Any]:
        """The fields of a ``/v1/rerank`` request that carry these settings."""
        return {
            "scoring": self.scoring,
            "subchunk_tokens": self.subchunks.max_tokens,
            "subchunk_overlap": self.subchunks.overlap_sentences,
            "node_weight": self.node_weight,
        }


NODE_SCORING = ScoringSettings()


@dataclass(frozen=True)
class ScoringPlan:
    """What to embed to score candidates: the node texts first (``n_nodes`` of them), then their sub-chunks.

    Args:
        texts: every document text to embed, in that order.
        n_nodes: how many leading ``texts`` are whole candidates (0 for ``"subchunks"``).
        owners: for each sub-chunk text, the index of its candidate.
    """

    texts: list[str]
    n_nodes: int
    owners: np.ndarray


def plan_scoring(texts: Sequence[str], scoring: Scoring, subchunks: SubchunkConfig, spans_fn: Any) -> ScoringPlan:
    """The texts to embed for ``scoring`` (pure: no model call); ``spans_fn`` tokenizes for the budget."""
    nodes = list(texts) if scoring != "subchunks" else []
    pieces: list[str] = []
    owners: list[int] = []
    if scoring != "node":
        for i, text in enumerate(texts):
            subs = [s.text for s in subchunk_text(text, subchunks, spans_fn)] or [text]
            pieces.extend(subs)
            owners.extend([i] * len(subs))
    return ScoringPlan(nodes + pieces, len(nodes), np.asarray(owners, dtype=np.int64))


def combine_scores(
    query: np.ndarray, vectors: np.ndarray, plan: ScoringPlan, n: int, scoring: Scoring, node_weight: float
) -> np.ndarray:
    """One score per candidate (float32) from the query vector and the vectors of ``plan.texts``."""
    sims = cosine_matrix(query, vectors)
    node = sims[: plan.n_nodes]
    if scoring == "node":
        return node
    best = max_over_owners(sims[plan.n_nodes :], plan.owners, n)
    return best if scoring == "subchunks" else fuse_node_scores(node, best, node_weight).astype(np.float32)


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
    node_weight: float = NODE_WEIGHT

    def __post_init__(self) -> None:
        check_scoring(self.scoring, self.node_weight)

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One score per text (float32), higher is better; one query and one document encode call."""
        q = np.asarray(self.encoder.encode_queries([query]), dtype=np.float32)[0]
        if not texts:
            return np.zeros(0, dtype=np.float32)
        plan = plan_scoring(texts, self.scoring, self.subchunks, spans_for(self.encoder)[0])
        # nodes and sub-chunks in separate calls: one batch mixing both would pad every sub-chunk to a node's length
        parts = [plan.texts[: plan.n_nodes], plan.texts[plan.n_nodes :]]
        vectors = np.concatenate(
            [np.asarray(self.encoder.encode_documents(p), dtype=np.float32).reshape(len(p), -1) for p in parts if p]
        )
        return combine_scores(q, vectors, plan, len(texts), self.scoring, self.node_weight)
