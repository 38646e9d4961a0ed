"""Query a collection written by posfair ingestion: node vectors, re-scored by their best sub-chunk.

With the sub-chunk layout (:mod:`qdrant_tools.subchunks`) a node scores
MaxSim over its sub-chunk multivector — with one query vector that is
``max_j cos(q, s_j)``, the node's best sub-chunk — in one ``query_points`` call:

* a collection of at most ``exact_up_to`` nodes is scored *exactly*: the
  multivector (no HNSW graph) is scanned over every node, no prefetch;
* a larger one in two stages: a prefetch finds ``prefetch_limit`` candidates
  through the node vector (HNSW), re-scored by MaxSim. The node vector is a poor
  proxy for the best sub-chunk: on ~1,700 nodes of prose, 100 candidates keep
  only 64% of the exact top 10, and ~60% of the nodes must be prefetched to keep
  99% (``bench/subchunk_index.py``, docs/storage.md), while the exact scan of
  those nodes costs the same ~1 ms as the 100-candidate prefetch.

Optionally the node's own cosine is fused in,
``w * cos(q, node) + (1 - w) * max_j cos(q, s_j)``, inside Qdrant: a formula
query over two prefetches (the best-sub-chunk ranking and the node-vector
ranking, each ``max(limit, fusion_limit)`` deep, the node ranking at least
``prefetch_limit``); a node missing from one ranking scores 0 there. Without
sub-chunks the node vector is searched directly.

**Hybrid**: a collection that also stores a BM25 sparse vector of each node
(:mod:`qdrant_tools.sparse`) and a query that brings its BM25 vector fuse the
dense ranking above and the BM25 ranking in Qdrant (``Fusion.RRF`` or
``Fusion.DBSF``), still in one ``query_points`` call. BM25 is position-blind: a
term counts wherever it sits in the node.

Only qdrant-client method names are used (``get_collection``, ``query_points``,
``retrieve``), so the embedded store and a server answer alike.

Example:
    >>> hits = search(client, "demo", query_vector, SearchSettings(limit=5))  # doctest: +SKIP
    >>> hits[0].payload["doc_id"], hits[0].score                              # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from qdrant_client import models

from qdrant_tools import payload as P
from qdrant_tools.sparse import SPARSE_VECTOR
from qdrant_tools.subchunks import SUBCHUNK_VECTOR

__all__ = ["Hit", "Layout", "SearchSettings", "collection_layout", "search"]


@dataclass(frozen=True)
class Layout:
    """The named vectors of a posfair collection.

    Args:
        dense: dense vector names with their sizes.
        subchunks: the sub-chunk multivector's name, or ``None`` (single-vector layout).
        points: nodes in the collection when the layout was read (``None`` = unknown).
        sparse: the BM25 sparse vector's name, or ``None`` (no hybrid search).
    """

    dense: dict[str, int]
    subchunks: str | None
    points: int | None = None
    sparse: str | None = None

    def node_vector(self, requested: str | None = None) -> str:
        """The dense vector to search: ``requested``, else ``"calibrated"`` if present, else the only one.

        Raises:
            ValueError: ``requested`` is not a dense vector of the collection, or the choice is ambiguous.
        """
        if requested is not None:
            if requested not in self.dense:
                raise ValueError(f"vector {requested!r} is not a dense vector of the collection (it has {self.names})")
            return requested
        if "calibrated" in self.dense:
            return "calibrated"
        if len(self.dense) == 1:
            return next(iter(self.dense))
        raise ValueError(f"the collection has dense vectors {self.names}; choose one (--vector-name)")

    @property
    def names(self) -> list[str]:
        return sorted(self.dense)


def collection_layout(client: Any, collection: str) -> Layout:
    """Read the layout of ``collection``.

    Raises:
        LookupError: the collection does not exist.
        ValueError: it has one unnamed vector (not written by posfair ingestion).
    """
    if not client.collection_exists(collection):
        raise LookupError(f"collection {collection!r} not found")
    info = client.get_collection(collection)
    vectors = info.config.params.vectors
    if not isinstance(vectors, dict):
        raise ValueError(f"collection {collection!r} has one unnamed vector; it was not written by posfair ingest")
    dense = {n: p.size for n, p in vectors.items() if getattr(p, "multivector_config", None) is None}
    multi = [n for n, p in vectors.items() if getattr(p, "multivector_config", None) is not None]
    sub = SUBCHUNK_VECTOR if SUBCHUNK_VECTOR in multi else None
    sparse = SPARSE_VECTOR if SPARSE_VECTOR in (info.config.params.sparse_vectors or {}) else None
    return Layout(dense=dense, subchunks=sub, points=info.points_count, sparse=sparse)


@dataclass(frozen=True)
class SearchSettings:
    """How a query is answered.

    Args:
        limit: hits returned.
        vector: the dense (node) vector to search; ``None`` = ``"calibrated"`` or the only one.
        subchunks: re-score by the best sub-chunk when the collection has sub-chunk vectors.
        prefetch_limit: candidates found through the node vector and re-scored (bounds recall),
            in collections of more than ``exact_up_to`` nodes.
        exact_up_to: collections of at most this many nodes are scored by exact MaxSim over every
            node (no prefetch; 0 = always prefetch). The scan grows with the sub-chunks stored:
            ~1 ms per 7,000 sub-chunks on one CPU core.
        node_weight: weight ``w`` of the node cosine in the fused score (0 = best sub-chunk only).
        evidence: also return, per hit, the document offsets of its best-matching sub-chunk
            (one more ``retrieve`` call).
        sparse: fuse the BM25 sparse vector in (hybrid search), when the collection has one and a
            sparse query is given.
        fusion: how the dense ranking (best sub-chunk) and the BM25 ranking are fused in Qdrant:
            ``"rrf"`` (reciprocal rank fusion) or ``"dbsf"`` (distribution-based score fusion).
        fusion_limit: candidates of each ranking that enter the fusion.

    Raises:
        ValueError: a setting out of range (named, with typical values).
    """

    limit: int = 5
    vector: str | None = None
    subchunks: bool = True
    prefetch_limit: int = 100
    exact_up_to: int = 10_000
    node_weight: float = 0.0
    evidence: bool = False
    sparse: bool = True
    fusion: Literal["rrf", "dbsf"] = "rrf"
    fusion_limit: int = 50

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"limit must be a positive integer, got {self.limit!r}")
        if not isinstance(self.prefetch_limit, int) or self.prefetch_limit < 1:
            raise ValueError(f"prefetch_limit must be a positive integer, got {self.prefetch_limit!r}; typical 50-200")
        if isinstance(self.exact_up_to, bool) or not isinstance(self.exact_up_to, int) or self.exact_up_to < 0:
            raise ValueError(
                f"exact_up_to must be an integer >= 0, got {self.exact_up_to!r}; typical 10000 (0 = always prefetch)"
            )
        if not 0.0 <= self.node_weight <= 1.0:
            raise ValueError(f"node_weight must lie in [0, 1], got {self.node_weight!r}; 0 = best sub-chunk only")
        if self.fusion not in ("rrf", "dbsf"):
            raise ValueError(f'fusion must be "rrf" or "dbsf", got {self.fusion!r}')
        if not isinstance(self.fusion_limit, int) or self.fusion_limit < 1:
            raise ValueError(f"fusion_limit must be a positive integer, got {self.fusion_limit!r}; typical 20-100")

    def scores_exactly(self, points: int | None) -> bool:
        """Whether a sub-chunk collection of ``points`` nodes is scored exactly (``None``: size unknown: no)."""
        return points is not None and points <= self.exact_up_to


@dataclass(frozen=True)
class Hit:
    """One result: point id, score, payload, and (if asked) the best sub-chunk's document offsets."""

    id: str
    score: float
    payload: dict[str, Any]
    evidence: tuple[int, int] | None = None


def _unit(x: np.ndarray) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), 1e-12)


def _subchunk_arm(q: np.ndarray, vector: str, settings: SearchSettings, layout: Layout, flt: Any, limit: int) -> Any:
    """Nodes by their best sub-chunk: an exact MaxSim scan of the multivector (no HNSW graph), or MaxSim over
    ``prefetch_limit`` candidates found through the node vector."""
    if settings.scores_exactly(layout.points):
        return models.Prefetch(query=[q.tolist()], using=layout.subchunks, limit=limit, filter=flt)
    nodes = models.Prefetch(query=q.tolist(), using=vector, limit=max(settings.prefetch_limit, limit), filter=flt)
    return models.Prefetch(prefetch=nodes, query=[q.tolist()], using=layout.subchunks, limit=limit)


def node_fusion(node_weight: float) -> models.FormulaQuery:
    """``(1 - w) * best sub-chunk + w * node cosine`` over the prefetches ``[sub-chunk arm, node arm]``; a node
    missing from one arm scores 0 there."""
    terms = [
        models.MultExpression(mult=[1.0 - node_weight, "$score[0]"]),
        models.MultExpression(mult=[node_weight, "$score[1]"]),
    ]
    return models.FormulaQuery(formula=models.SumExpression(sum=terms), defaults={"$score[0]": 0.0, "$score[1]": 0.0})


def _dense_parts(q: np.ndarray, vector: str, settings: SearchSettings, layout: Layout, flt: Any, limit: int) -> dict:
    """The ``query_points`` arguments of the dense ranking: the node vector, the best sub-chunk, or their fusion
    in Qdrant: a formula over two prefetches of the same depth (the sub-chunk and the node ranking) — ``limit``
    deep for an exactly scored collection, else both over the ``prefetch_limit`` node candidates, so every
    candidate has both scores."""
    if layout.subchunks is None or not settings.subchunks:
        return {"query": q.tolist(), "using": vector, "filter": flt}
    exact = settings.scores_exactly(layout.points)
    depth = limit if exact else settings.prefetch_limit
    sub = _subchunk_arm(q, vector, settings, layout, flt, depth if settings.node_weight > 0 else limit)
    if settings.node_weight == 0:
        return {"prefetch": sub.prefetch, "query": sub.query, "using": sub.using, "filter": sub.filter}
    nodes = models.Prefetch(query=q.tolist(), using=vector, limit=depth, filter=flt)
    return {"prefetch": [sub, nodes], "query": node_fusion(settings.node_weight)}


def _dense_query(client, collection, q, vector, settings, query_filter, layout) -> list[Any]:
    """The dense ranking in one ``query_points`` call."""
    fused = settings.node_weight > 0 and layout.subchunks is not None and settings.subchunks
    depth = max(settings.limit, settings.fusion_limit) if fused else settings.limit  # fused rankings need depth
    parts = _dense_parts(q, vector, settings, layout, query_filter, depth)
    flt = parts.pop("filter", None)
    return client.query_points(collection, **parts, query_filter=flt, limit=settings.limit, with_payload=True).points


def _hybrid_query(client, collection, q, sparse_query, vector, settings, query_filter, layout) -> list[Any]:
    """One ``query_points`` call: the dense ranking and the BM25 ranking, fused in Qdrant (RRF or DBSF)."""
    limit = max(settings.limit, settings.fusion_limit)
    dense = _dense_parts(q, vector, settings, layout, query_filter, limit)
    arms = [
        models.Prefetch(**dense, limit=limit),
        models.Prefetch(query=sparse_query, using=layout.sparse, limit=limit, filter=query_filter),
    ]
    fusion = models.Fusion.RRF if settings.fusion == "rrf" else models.Fusion.DBSF
    return client.query_points(
        collection, prefetch=arms, query=models.FusionQuery(fusion=fusion), limit=settings.limit, with_payload=True
    ).points


def _evidence(
    client: Any, collection: str, q: np.ndarray, points: Sequence[Any], sub: str
) -> dict[str, tuple[int, int]]:
    """Point id -> document offsets of its best-matching sub-chunk."""
    if not points:
        return {}
    records = client.retrieve(
        collection, ids=[p.id for p in points], with_payload=[P.SUBCHUNK_SPANS], with_vectors=[sub]
    )
    out = {}
    for r in records:
        spans = (r.payload or {}).get(P.SUBCHUNK_SPANS)
        vecs = np.asarray((r.vector or {}).get(sub) or [], dtype=np.float32)
        if spans and len(vecs) == len(spans):
            best = int(np.argmax(vecs @ q / np.maximum(np.linalg.norm(vecs, axis=1), 1e-12)))
            out[str(r.id)] = (int(spans[best][0]), int(spans[best][1]))
    return out


def search(
    client: Any,
    collection: str,
    query_vector: Sequence[float] | np.ndarray,
    settings: SearchSettings | None = None,
    *,
    layout: Layout | None = None,
    query_filter: models.Filter | None = None,
    sparse_query: models.SparseVector | None = None,
) -> list[Hit]:
    """The ``settings.limit`` best nodes for ``query_vector`` (best first).

    Args:
        client: a ``QdrantClient`` or the embedded store.
        collection: the collection.
        query_vector: the query embedding (normalised or not).
        settings: see :class:`SearchSettings`.
        layout: the collection's layout if already read (saves a call).
        query_filter: a Qdrant filter applied to the candidates.
        sparse_query: the query's BM25 vector (:meth:`qdrant_tools.sparse.Bm25Sparse.embed_query`, with the
            settings the collection was written with); with a sparse collection and ``settings.sparse``
            the dense and BM25 rankings are fused (hybrid search).

    Raises:
        LookupError / ValueError: see :func:`collection_layout` and :meth:`Layout.node_vector`.
    """
    settings = settings or SearchSettings()
    layout = layout or collection_layout(client, collection)
    vector = layout.node_vector(settings.vector)
    q = _unit(np.asarray(query_vector, dtype=np.float32).reshape(-1))
    sub = layout.subchunks if settings.subchunks else None
    if settings.sparse and layout.sparse and sparse_query is not None:
        points = _hybrid_query(client, collection, q, sparse_query, vector, settings, query_filter, layout)
    else:
        points = _dense_query(client, collection, q, vector, settings, query_filter, layout)
    evidence = _evidence(client, collection, q, points, sub) if (settings.evidence and sub) else {}
    return [Hit(str(p.id), float(p.score), dict(p.payload or {}), evidence.get(str(p.id))) for p in points]
