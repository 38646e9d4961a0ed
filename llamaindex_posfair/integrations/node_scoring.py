"""Score candidate texts against a query: node vector, best sub-chunk, or both weighted by the node weight.

The query-time counterpart of the sub-chunk layout of ``posfair ingest``, for
indexes built elsewhere (no re-index): each candidate is cut into the same
sentence-aligned sub-chunks (:mod:`qdrant_tools.subchunks`), every sub-chunk is
embedded, and the candidate scores its best one. Used by
:class:`~llamaindex_posfair.PosFairRerank` (and by the rerank endpoint of
the serving endpoints), so every reranking path scores alike.

Example:
    >>> scorer = NodeScorer(encoder, scoring="subchunks")          # doctest: +SKIP
    >>> scorer.scores("where is the evidence?", ["a long passage ..."])  # doctest: +SKIP
    array([0.61], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from llamaindex_posfair.scoring import NODE_WEIGHT, cosine_matrix, max_over_owners, weigh_node_scores
from qdrant_tools.encoding import document_token_counter, spans_for, subchunk_mean, whole_text_node_vectors
from qdrant_tools.subchunks import NodeSource, SubchunkConfig, check_node_source, subchunk_text

Scoring = Literal["node", "subchunks", "weighted"]
SCORINGS: tuple[str, ...] = ("node", "subchunks", "weighted")

__all__ = [
    "NODE_SCORING",
    "SCORINGS",
    "NodeScorer",
    "Scoring",
    "ScoringSettings",
    "ScoringTexts",
    "check_scoring",
    "combine_scores",
    "scoring_texts",
    "truncated_texts",
]


def check_scoring(scoring: str, node_weight: float, node_source: str = "encoded") -> None:
    """Raise ``ValueError`` for an unknown ``scoring`` or ``node_source`` (:data:`qdrant_tools.subchunks.NodeSource`:
    where a candidate's node vector comes from), or a ``node_weight`` outside [0, 1]."""
    check_node_source(node_source)
    if scoring not in SCORINGS:
        raise ValueError(f'scoring must be "node", "subchunks" or "weighted", got {scoring!r}')
    if not 0.0 <= node_weight <= 1.0:
        raise ValueError(f"node_weight must lie in [0, 1], got {node_weight!r}")


@dataclass(frozen=True)
class ScoringSettings:
    """How candidates are scored (what ``PosFairRerank`` and ``POST /v1/rerank`` share).

    Raises:
        ValueError: an unknown ``scoring`` or a ``node_weight`` outside [0, 1].
    """

    scoring: Scoring = "node"
    subchunks: SubchunkConfig = field(default_factory=SubchunkConfig)
    node_weight: float = NODE_WEIGHT
    node_source: NodeSource = "encoded"

    def __post_init__(self) -> None:
        check_scoring(self.scoring, self.node_weight, self.node_source)

    def wire(self) -> dict[str, Any]:
        """The fields of a ``/v1/rerank`` request that carry these settings."""
        return {
            "scoring": self.scoring,
            "subchunk_tokens": self.subchunks.max_tokens,
            "subchunk_overlap": self.subchunks.overlap_sentences,
            "node_weight": self.node_weight,
            "node_source": self.node_source,
        }


NODE_SCORING = ScoringSettings()


@dataclass(frozen=True)
class ScoringTexts:
    """What to embed to score candidates: the node texts first (``n_nodes`` of them), then their sub-chunks.

    Args:
        texts: every document text to embed, in that order.
        n_nodes: how many leading ``texts`` are whole candidates (0 for ``"subchunks"``).
        owners: for each sub-chunk text, the index of its candidate.
        truncated: per candidate, whether its text exceeds the encoder's window (its node vector is then the
            mean of its sub-chunk vectors, as the store writes it); empty: none is.
    """

    texts: list[str]
    n_nodes: int
    owners: np.ndarray
    truncated: tuple[bool, ...] = ()


def scoring_texts(
    texts: Sequence[str],
    scoring: Scoring,
    subchunks: SubchunkConfig,
    spans_fn: Any,
    node_source: NodeSource = "encoded",
    truncated: Sequence[bool] = (),
) -> ScoringTexts:
    """The texts to embed for ``scoring`` (pure: no model call); ``spans_fn`` tokenizes for the budget.

    Node texts are embedded when the score uses an encoded node vector; sub-chunks when it uses
    sub-chunks or derives the node vector from them (``node_source="subchunk-mean"``). ``truncated``
    (:func:`truncated_texts`): the texts longer than the window, whose node-weighted score uses the mean of their
    sub-chunk vectors as the node vector, as :func:`qdrant_tools.encoding.whole_text_node_vectors` stores it.
    """
    derived = node_source == "subchunk-mean"
    nodes = list(texts) if scoring != "subchunks" and not derived else []
    pieces: list[str] = []
    owners: list[int] = []
    if scoring != "node" or derived:
        for i, text in enumerate(texts):
            subs = [s.text for s in subchunk_text(text, subchunks, spans_fn)] or [text]
            pieces.extend(subs)
            owners.extend([i] * len(subs))
    long = tuple(bool(t) for t in truncated) if scoring == "weighted" and nodes else ()
    return ScoringTexts(nodes + pieces, len(nodes), np.asarray(owners, dtype=np.int64), long)


def truncated_texts(encoder: Any, texts: Sequence[str]) -> list[bool]:
    """Whether each text exceeds the encoder's window (document prompt and special tokens counted); all
    ``False`` for an encoder that cannot count its tokens."""
    limit = getattr(encoder, "max_length", None)
    if not texts or limit is None or not hasattr(encoder, "count_tokens"):
        return [False] * len(texts)
    return [n > limit for n in document_token_counter(encoder)(list(texts))]


def combine_scores(
    query: np.ndarray, vectors: np.ndarray, to_embed: ScoringTexts, n: int, scoring: Scoring, node_weight: float
) -> np.ndarray:
    """One score per candidate (float32) from the query vector and the vectors of ``to_embed.texts``.

    A ScoringTexts without node texts (``node_source="subchunk-mean"``) scores each node by the mean of its
    sub-chunk vectors (:func:`qdrant_tools.encoding.subchunk_mean`).
    """
    subs = vectors[to_embed.n_nodes :]
    if to_embed.n_nodes or scoring == "subchunks":
        node_vectors = vectors[: to_embed.n_nodes]
        if any(to_embed.truncated):
            node_vectors = whole_text_node_vectors(
                node_vectors, [subs[to_embed.owners == i] for i in range(n)], to_embed.truncated
            )
    else:
        node_vectors = np.stack([subchunk_mean(subs[to_embed.owners == i]) for i in range(n)])
    node = cosine_matrix(query, node_vectors) if len(node_vectors) else np.zeros(0, dtype=np.float32)
    if scoring == "node":
        return node
    best = max_over_owners(cosine_matrix(query, subs), to_embed.owners, n)
    return best if scoring == "subchunks" else weigh_node_scores(node, best, node_weight).astype(np.float32)


@dataclass
class NodeScorer:
    """Cosine scores of candidate texts for a query.

    Args:
        encoder: a ``PosFairEncoder`` (or anything with ``encode_queries`` / ``encode_documents``;
            a fast ``tokenizer`` makes sub-chunks follow its tokens).
        scoring: ``"node"`` = one vector per candidate; ``"subchunks"`` = its best
            sub-chunk; ``"weighted"`` = ``node_weight * node + (1 - node_weight) * best sub-chunk``.
        subchunks: how candidates are cut into sub-chunks.
        node_weight: weight of the node cosine in ``"weighted"``.
        node_source: ``"encoded"`` (the candidate's text) or ``"subchunk-mean"`` (the normalised mean of
            its sub-chunk vectors: as a collection ingested with ``node_source="subchunk-mean"`` stores it).

    Raises:
        ValueError: an unknown ``scoring`` or ``node_source``, or a ``node_weight`` outside [0, 1].
    """

    encoder: Any
    scoring: Scoring = "node"
    subchunks: SubchunkConfig = field(default_factory=SubchunkConfig)
    node_weight: float = NODE_WEIGHT
    node_source: NodeSource = "encoded"

    def __post_init__(self) -> None:
        check_scoring(self.scoring, self.node_weight, self.node_source)

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One score per text (float32), higher is better; one query and one document encode call."""
        q = np.asarray(self.encoder.encode_queries([query]), dtype=np.float32)[0]
        if not texts:
            return np.zeros(0, dtype=np.float32)
        long = truncated_texts(self.encoder, texts) if self.scoring == "weighted" else ()
        to_embed = scoring_texts(
            texts, self.scoring, self.subchunks, spans_for(self.encoder)[0], self.node_source, long
        )
        # nodes and sub-chunks in separate calls: one batch mixing both would pad every sub-chunk to a node's length
        parts = [to_embed.texts[: to_embed.n_nodes], to_embed.texts[to_embed.n_nodes :]]
        vectors = np.concatenate(
            [np.asarray(self.encoder.encode_documents(p), dtype=np.float32).reshape(len(p), -1) for p in parts if p]
        )
        return combine_scores(q, vectors, to_embed, len(texts), self.scoring, self.node_weight)
