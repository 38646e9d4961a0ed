"""Query a collection written by posfair ingestion: node vectors, re-scored by their best sub-chunk.

With the sub-chunk layout (:mod:`qdrant_tools.subchunks`) a node scores MaxSim over its sub-chunk
multivector, ``max_j cos(q, s_j)``, optionally fused with its own cosine,
``w * cos(q, node) + (1 - w) * max_j cos(q, s_j)``, in one ``query_points`` call: an exact scan up to
``exact_up_to`` nodes, above that a re-scoring of candidates drawn from indexes (the node vector's HNSW,
BM25 in a hybrid query, and the sub-chunk graph where the collection has one). A collection with a fused
multivector (:data:`~qdrant_tools.subchunks.FUSED_VECTOR`) written at the query's weight answers with one
MaxSim over its rows; any other weight takes the two-arm formula. A hybrid query fuses the dense ranking
with the BM25 one (:mod:`qdrant_tools.sparse`) in Qdrant (RRF or DBSF). docs/storage.md ("What ships",
"Any size") says what each path costs and recalls.

**Scores**: a hit's score (:attr:`Hit.score`) is its relevance in [0, 1] (:func:`relevance`): the cosine of
its best sub-chunk (of the node vector without sub-chunks), kept in ranking order; :attr:`Hit.rank_score`
is the value Qdrant ordered by. A BM25-only query (:func:`sparse_request`) keeps its BM25 scores.

Only qdrant-client method names are used (``get_collection``, ``query_points``, ``retrieve``), so the
embedded store and a server answer alike.

Example:
    >>> hits = search(client, "demo", query_vector, SearchSettings(limit=5))  # doctest: +SKIP
    >>> hits[0].fields["doc_id"], hits[0].score                               # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from qdrant_client import models

from qdrant_tools import payload as P
from qdrant_tools.metadata import recorded_fused_weight
from qdrant_tools.sparse import SPARSE_VECTOR
from qdrant_tools.subchunks import FUSED_VECTOR, SUBCHUNK_VECTOR

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import AsyncStoreLike, StoreLike

__all__ = [
    "RRF_SEARCH",
    "CollectionVectors",
    "Hit",
    "SearchSettings",
    "acollection_vectors",
    "asearch",
    "collection_vectors",
    "query_request",
    "ranking_params",
    "search",
    "sparse_request",
]

logger = logging.getLogger(__name__)

#: Share of a collection's nodes drawn from the node vector's HNSW when ``SearchSettings.prefetch_max`` is set.
PREFETCH_SHARE = 0.02
#: A ranking over a quantized vector keeps this many times the hits it returns from the quantized scan, then
#: re-scores them from the original vectors.
RESCORE_OVERSAMPLING = 2.0

#: How far a hit's relevance stays below the hit ranked before it, where its own similarity is higher.
RANK_STEP = 1e-6

#: Collections already told (once per process) that they lack the sub-chunk graph.
_ADVISED: set[str] = set()


@dataclass(frozen=True)
class CollectionVectors:
    """The named vectors of a posfair collection.

    Args:
        dense: dense vector names with their sizes.
        subchunks: the sub-chunk multivector's name, or ``None`` (single-vector layout).
        points: nodes in the collection when the vectors were read (``None`` = unknown).
        sparse: the BM25 sparse vector's name, or ``None`` (no hybrid search).
        subchunk_graph: the sub-chunk multivector has an HNSW graph (``m`` > 0), so collections above
            ``exact_up_to`` also draw candidates from it; ``False`` for collections written with ``m=0``.
        fused: the fused multivector's name (:data:`~qdrant_tools.subchunks.FUSED_VECTOR`), or ``None``.
        fused_weight: the node weight its rows were fused at, as the collection records it
            (:func:`qdrant_tools.metadata.recorded_fused_weight`).
        quantized: the vectors with a quantized copy: a stage that ranks by one of them scans the copy and
            re-scores its best from the originals (:func:`ranking_params`).
    """

    dense: dict[str, int]
    subchunks: str | None
    points: int | None = None
    sparse: str | None = None
    subchunk_graph: bool = False
    fused: str | None = None
    fused_weight: float | None = None
    quantized: frozenset[str] = frozenset()

    def fuses_at(self, node_weight: float) -> bool:
        """Whether the fused multivector scores ``node_weight`` (it was written at that weight)."""
        return self.fused is not None and self.fused_weight is not None and abs(self.fused_weight - node_weight) < 1e-9

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


def collection_vectors(client: StoreLike, collection: str) -> CollectionVectors:
    """Read the named vectors of ``collection``.

    Raises:
        LookupError: the collection does not exist.
        ValueError: it has one unnamed vector (not written by posfair ingestion).
    """
    if not client.collection_exists(collection):
        raise LookupError(f"collection {collection!r} not found")
    return vectors_of(collection, client.get_collection(collection))


async def acollection_vectors(aclient: AsyncStoreLike, collection: str) -> CollectionVectors:
    """:func:`collection_vectors` through an ``AsyncQdrantClient``."""
    if not await aclient.collection_exists(collection):
        raise LookupError(f"collection {collection!r} not found")
    return vectors_of(collection, await aclient.get_collection(collection))


def vectors_of(collection: str, info: models.CollectionInfo) -> CollectionVectors:
    """The named vectors described by a collection's ``get_collection`` answer.

    Raises:
        ValueError: it has one unnamed vector (not written by posfair ingestion).
    """
    vectors = info.config.params.vectors
    if not isinstance(vectors, dict):
        raise ValueError(f"collection {collection!r} has one unnamed vector; it was not written by posfair ingest")
    dense = {n: p.size for n, p in vectors.items() if getattr(p, "multivector_config", None) is None}
    multi = [n for n, p in vectors.items() if getattr(p, "multivector_config", None) is not None]
    sub = SUBCHUNK_VECTOR if SUBCHUNK_VECTOR in multi else None
    sparse = SPARSE_VECTOR if SPARSE_VECTOR in (info.config.params.sparse_vectors or {}) else None
    graph = sub is not None and _hnsw_m(vectors[sub], info.config.hnsw_config) > 0
    weight = recorded_fused_weight(getattr(info.config, "metadata", None) or {})
    fused = FUSED_VECTOR if FUSED_VECTOR in multi and sub is not None and weight is not None else None
    shared = info.config.quantization_config is not None
    quantized = frozenset(n for n, p in vectors.items() if shared or getattr(p, "quantization_config", None))
    return CollectionVectors(
        dense=dense,
        subchunks=sub,
        points=info.points_count,
        sparse=sparse,
        subchunk_graph=graph,
        fused=fused,
        fused_weight=None if fused is None else float(weight),
        quantized=quantized,
    )


def _hnsw_m(params: Any, collection_hnsw: Any) -> int:
    """The HNSW ``m`` a vector is indexed with: its own, else the collection's, else Qdrant's default 16."""
    for config in (getattr(params, "hnsw_config", None), collection_hnsw):
        m = getattr(config, "m", None)
        if m is not None:
            return int(m)
    return 16


@dataclass(frozen=True)
class SearchSettings:
    """How a query is answered; ``SearchSettings()`` is the search ``posfair ingest`` records.

    The default: node weight 0.5 (one MaxSim over the default layout's fused rows), BM25 fused by DBSF over 100
    nodes per ranking (docs/evidence.md, "DBSF, the default fusion"; collections written with the earlier
    :data:`RRF_SEARCH` keep it until switched), exact up to 5,000 nodes, above that 2% of the nodes (300 to 2,000)
    re-scored from BM25 and HNSW candidates.

    Args:
        limit: hits returned.
        vector: the dense (node) vector to search; ``None`` = ``"calibrated"`` or the only one.
        subchunks: re-score by the best sub-chunk when the collection has sub-chunk vectors.
        prefetch_limit: candidates found through the node vector and re-scored (bounds recall),
            in collections of more than ``exact_up_to`` nodes.
        prefetch_max: if set, the node-vector candidates grow with the collection: 2% of its nodes
            (:data:`PREFETCH_SHARE`), at least ``prefetch_limit``, at most ``prefetch_max``
            (:meth:`node_candidates`); ``None`` = always ``prefetch_limit``.
        subchunk_candidates: candidates found through the sub-chunk multivector's HNSW graph (collections
            of more than ``exact_up_to`` nodes written with one, :attr:`CollectionVectors.subchunk_graph`); 0 = none.
        exact_up_to: collections of at most this many nodes are scored by exact MaxSim over every
            node (no prefetch; 0 = always prefetch). The scan grows with the sub-chunks stored
            (``bench/scale.py`` measures it).
        node_weight: weight ``w`` of the node cosine in the node-weighted score (0 = best sub-chunk only).
        evidence: also return, per hit, the document offsets of its best-matching sub-chunk
            (one more ``retrieve`` call).
        evidence_limit: only the best this many hits get their evidence (``None``: every hit); reading the
            sub-chunk vectors of 100 hits costs more than the query itself.
        sparse: fuse the BM25 sparse vector in (hybrid search), when the collection has one and a
            sparse query is given.
        fusion: how the dense ranking (best sub-chunk) and the BM25 ranking are fused in Qdrant:
            ``"rrf"`` (reciprocal rank fusion) or ``"dbsf"`` (distribution-based score fusion).
        fusion_limit: candidates of each ranking that enter the fusion.
        sparse_limit: candidates of the BM25 ranking that enter the fusion (``None``: as many as the dense
            ranking's, the larger of ``limit`` and ``fusion_limit``); LlamaIndex's ``sparse_top_k``.
        sparse_weight: weight of the BM25 ranking against the dense ranking's 1.0 in reciprocal rank fusion
            (weighted RRF, one ``RrfQuery``; 1.0 = plain RRF). DBSF takes no weights: it must be 1.0 there.
        rrf_k: the ``k`` of reciprocal rank fusion, ``1 / (k + rank)`` (``None`` = Qdrant's default, 2;
            LlamaIndex's ``QueryFusionRetriever`` uses 60).

    Raises:
        ValueError: a setting out of range (named, with typical values).
    """

    limit: int = 5
    vector: str | None = None
    subchunks: bool = True
    prefetch_limit: int = 300
    prefetch_max: int | None = 2000
    exact_up_to: int = 5000
    subchunk_candidates: int = 300
    node_weight: float = 0.5
    evidence: bool = False
    evidence_limit: int | None = None
    sparse: bool = True
    fusion: Literal["rrf", "dbsf"] = "dbsf"
    fusion_limit: int = 100
    sparse_limit: int | None = None
    sparse_weight: float = 1.0
    rrf_k: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"limit must be a positive integer, got {self.limit!r}")
        ev = self.evidence_limit
        if ev is not None and (isinstance(ev, bool) or not isinstance(ev, int) or ev < 0):
            raise ValueError(f"evidence_limit must be None or an integer >= 0, got {ev!r}; e.g. 10 (0 = none)")
        if not isinstance(self.prefetch_limit, int) or self.prefetch_limit < 1:
            raise ValueError(f"prefetch_limit must be a positive integer, got {self.prefetch_limit!r}; typical 50-200")
        cap = self.prefetch_max
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < self.prefetch_limit):
            raise ValueError(
                f"prefetch_max must be None or an integer >= prefetch_limit ({self.prefetch_limit}), got {cap!r}"
            )
        if isinstance(self.exact_up_to, bool) or not isinstance(self.exact_up_to, int) or self.exact_up_to < 0:
            raise ValueError(
                f"exact_up_to must be an integer >= 0, got {self.exact_up_to!r}; typical 5000 (0 = always prefetch)"
            )
        subs = self.subchunk_candidates
        if isinstance(subs, bool) or not isinstance(subs, int) or subs < 0:
            raise ValueError(
                f"subchunk_candidates must be an integer >= 0, got {self.subchunk_candidates!r}; typical 100-300"
            )
        if not 0.0 <= self.node_weight <= 1.0:
            raise ValueError(f"node_weight must lie in [0, 1], got {self.node_weight!r}; 0 = best sub-chunk only")
        if self.fusion not in ("rrf", "dbsf"):
            raise ValueError(f'fusion must be "rrf" or "dbsf", got {self.fusion!r}')
        if not isinstance(self.fusion_limit, int) or self.fusion_limit < 1:
            raise ValueError(f"fusion_limit must be a positive integer, got {self.fusion_limit!r}; typical 20-100")
        sparse = self.sparse_limit
        if sparse is not None and (isinstance(sparse, bool) or not isinstance(sparse, int) or sparse < 1):
            raise ValueError(f"sparse_limit must be None or a positive integer, got {sparse!r}; typical 20-100")
        self._check_rrf()

    def _check_rrf(self) -> None:
        if not self.sparse_weight > 0.0:
            raise ValueError(f"sparse_weight must be > 0, got {self.sparse_weight!r}; 1.0 = plain RRF")
        if self.fusion == "dbsf" and self.sparse_weight != 1.0:
            raise ValueError(f"sparse_weight={self.sparse_weight!r} needs fusion='rrf': DBSF takes no weights")
        if self.rrf_k is not None and (
            isinstance(self.rrf_k, bool) or not isinstance(self.rrf_k, int) or self.rrf_k < 1
        ):
            raise ValueError(f"rrf_k must be a positive integer or None, got {self.rrf_k!r}; typical 2 or 60")
        if self.fusion == "dbsf" and self.rrf_k is not None:
            raise ValueError(f"rrf_k={self.rrf_k!r} needs fusion='rrf'; drop it for DBSF")

    def overridden(self, **given: Any) -> SearchSettings:
        """This search with the ``given`` fields that are not ``None`` on top. Choosing ``fusion="dbsf"`` also
        drops the RRF weight and ``k`` (DBSF takes neither), unless they are given too.

        Example:
            >>> s = RRF_SEARCH.overridden(fusion="dbsf", limit=3, node_weight=None)
            >>> s.fusion, s.sparse_weight, s.rrf_k, s.limit
            ('dbsf', 1.0, None, 3)

        Raises:
            ValueError: an unknown setting, or one out of range (named).
        """
        unknown = sorted(set(given) - set(self.__dataclass_fields__))
        if unknown:
            raise ValueError(f"no search setting {unknown}; the settings are {sorted(self.__dataclass_fields__)}")
        given = {k: v for k, v in given.items() if v is not None}
        if given.get("fusion") == "dbsf":
            given = {"sparse_weight": 1.0, "rrf_k": None, **given}
        return replace(self, **given)

    def fusion_query(self) -> models.FusionQuery | models.RrfQuery:
        """The query that fuses ``[dense ranking, BM25 ranking]``: plain ``Fusion.RRF`` / ``Fusion.DBSF``, or a
        weighted / re-parametrised ``RrfQuery``."""
        if self.fusion == "dbsf":
            return models.FusionQuery(fusion=models.Fusion.DBSF)
        if self.sparse_weight == 1.0 and self.rrf_k is None:
            return models.FusionQuery(fusion=models.Fusion.RRF)
        weights = None if self.sparse_weight == 1.0 else [1.0, self.sparse_weight]
        return models.RrfQuery(rrf=models.Rrf(k=self.rrf_k, weights=weights))

    def node_candidates(self, points: int | None) -> int:
        """Candidates drawn from the node vector's HNSW in a collection of ``points`` nodes (``None``: unknown).

        Example:
            >>> s = SearchSettings(prefetch_limit=300, prefetch_max=2000)
            >>> s.node_candidates(10_000), s.node_candidates(50_000), s.node_candidates(1_000_000)
            (300, 1000, 2000)
        """
        if self.prefetch_max is None or points is None:
            return self.prefetch_limit
        return max(self.prefetch_limit, min(int(points * PREFETCH_SHARE), self.prefetch_max))

    def scores_exactly(self, points: int | None) -> bool:
        """Whether a sub-chunk collection of ``points`` nodes is scored exactly (``None``: size unknown: no)."""
        return points is not None and points <= self.exact_up_to


#: The default search of collections written before DBSF: the same candidates fused by weighted RRF
#: (BM25 weight 1.5, ``k`` = 60).
RRF_SEARCH = SearchSettings(fusion="rrf", sparse_weight=1.5, rrf_k=60)


@dataclass(frozen=True)
class Hit:
    """One result of :func:`search`.

    Args:
        id: the point id.
        score: the hit's relevance in [0, 1] (:func:`relevance`): the cosine similarity of its best sub-chunk
            to the query (its node vector's in a collection without sub-chunks), never above the score of a hit
            ranked before it, so one cutoff means the same for every query and keeps a prefix of the ranking.
        payload: the point's payload.
        evidence: the document offsets of its best-matching sub-chunk (if asked).
        fusion_score: the value the dense and BM25 rankings were fused to (RRF or DBSF, the order of the
            hits); ``None`` when the query was not fused.
        rank_score: the value Qdrant ordered the hits by (the fusion value of a fused query, else the dense or
            BM25 score of its ranking).
    """

    id: str
    score: float
    payload: dict[str, Any]
    evidence: tuple[int, int] | None = None
    fusion_score: float | None = None
    rank_score: float | None = None

    @property
    def fields(self) -> dict[str, Any]:
        """posfair's fields of the point (document id, offsets, text...: :func:`qdrant_tools.payload.posfair_fields`)."""
        return P.posfair_fields(self.payload)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), 1e-12)


def _candidates(
    q: np.ndarray, vector: str, settings: SearchSettings, vectors: CollectionVectors, flt: Any, sparse: Any
) -> list[models.Prefetch]:
    """Where a collection above ``exact_up_to`` finds the nodes it re-scores (none of them scans the collection):
    the node vector's HNSW (:meth:`SearchSettings.node_candidates`), the sub-chunk multivector's own HNSW graph
    when it has one (``subchunk_candidates``) and, in a hybrid query, the BM25 ranking (``fusion_limit``)."""
    node = settings.node_candidates(vectors.points)
    out = [models.Prefetch(query=q.tolist(), using=vector, limit=node, filter=flt)]
    if vectors.subchunk_graph and settings.subchunk_candidates > 0:
        subs = settings.subchunk_candidates
        out.append(models.Prefetch(query=[q.tolist()], using=vectors.subchunks, limit=subs, filter=flt))
    if sparse is not None:
        out.append(models.Prefetch(query=sparse, using=vectors.sparse, limit=settings.fusion_limit, filter=flt))
    return out


def _exact_candidates(
    q: np.ndarray, vector: str, settings: SearchSettings, vectors: CollectionVectors, flt: Any, sparse: Any, limit: int
) -> list[models.Prefetch]:
    """The nodes an exactly scored collection weighs and fuses: the ``limit`` best by an exact MaxSim scan, the ``limit`` best
    by an exact node-vector scan and, in a hybrid query, the BM25 ranking (``fusion_limit``). Both arms of the
    node-weighting formula re-score their union, so every node of either ranking has both scores (a node missing from one
    ranking no longer scores 0 there)."""
    exact = models.SearchParams(exact=True)  # a built index would answer approximately
    out = [
        models.Prefetch(query=[q.tolist()], using=vectors.subchunks, limit=limit, filter=flt, params=exact),
        models.Prefetch(query=q.tolist(), using=vector, limit=limit, filter=flt, params=exact),
    ]
    if sparse is not None:
        out.append(models.Prefetch(query=sparse, using=vectors.sparse, limit=settings.fusion_limit, filter=flt))
    return out


def ranking_params(
    vectors: CollectionVectors, using: str, exact: bool = False, every: bool = False
) -> models.SearchParams | None:
    """The search parameters of a stage whose scores rank its hits. A quantized vector (``vectors.quantized``)
    is scanned through its quantized copy and its best ``RESCORE_OVERSAMPLING`` x ``limit`` hits re-scored
    from the originals, so the ranking follows the original vectors; ``every``: the stage scans every point
    (an exactly scored collection), which reads the originals alone, as a collection without the copy ranks.
    ``exact``: no index. ``None``: none of these.

    Example:
        >>> vectors = CollectionVectors(dense={"vanilla": 8}, subchunks=None, quantized=frozenset({"vanilla"}))
        >>> ranking_params(vectors, "vanilla").quantization.rescore
        True
        >>> ranking_params(vectors, "vanilla", every=True).quantization.ignore
        True
    """
    if using not in vectors.quantized:
        return models.SearchParams(exact=True) if exact else None
    if every:
        return models.SearchParams(exact=exact, quantization=models.QuantizationSearchParams(ignore=True))
    rescore = models.QuantizationSearchParams(rescore=True, oversampling=RESCORE_OVERSAMPLING)
    return models.SearchParams(exact=exact, quantization=rescore)


def _rescored(
    cands: list[models.Prefetch], query: Any, using: str, limit: int, vectors: CollectionVectors
) -> models.Prefetch:
    """``cands`` (one prefetch or several, their union) re-scored by ``query`` on ``using``."""
    union = cands[0] if len(cands) == 1 else cands
    params = ranking_params(vectors, using)
    return models.Prefetch(prefetch=union, query=query, using=using, limit=limit, params=params)


def _subchunk_arm(
    q: np.ndarray,
    vectors: CollectionVectors,
    flt: Any,
    limit: int,
    cands: list[models.Prefetch] | None,
    using: str | None = None,
) -> models.Prefetch:
    """Nodes by MaxSim over ``using`` (default the sub-chunk multivector, each node's best sub-chunk; the fused
    multivector gives the node-weighted score): an exact scan (``cands`` is ``None``; ``exact=True`` where the sub-chunk
    multivector has a graph, which would otherwise answer approximately), or MaxSim over ``cands``
    (:func:`_candidates`)."""
    using = using or vectors.subchunks
    if cands is None:
        graph = vectors.subchunk_graph and using == vectors.subchunks
        params = ranking_params(vectors, using, exact=graph, every=True)
        return models.Prefetch(query=[q.tolist()], using=using, limit=limit, filter=flt, params=params)
    return _rescored(cands, [q.tolist()], using, limit, vectors)


def node_weighted_formula(node_weight: float) -> models.FormulaQuery:
    """``(1 - w) * best sub-chunk + w * node cosine`` over the prefetches ``[sub-chunk arm, node arm]`` (both
    re-score the same candidates; a node missing from one would score 0 there)."""
    terms = [
        models.MultExpression(mult=[1.0 - node_weight, "$score[0]"]),
        models.MultExpression(mult=[node_weight, "$score[1]"]),
    ]
    return models.FormulaQuery(formula=models.SumExpression(sum=terms), defaults={"$score[0]": 0.0, "$score[1]": 0.0})


def _dense_parts(
    q: np.ndarray,
    vector: str,
    settings: SearchSettings,
    vectors: CollectionVectors,
    flt: Any,
    limit: int,
    sparse: models.SparseVector | None = None,
) -> dict[str, Any]:
    """The ``query_points`` arguments of the dense ranking: the node vector, the best sub-chunk, or their node-weighted
    score in Qdrant: a formula over two prefetches (the sub-chunk and the node ranking) that re-score the same
    candidates, as deep as they are, so every candidate has both scores: :func:`_exact_candidates` for an exactly
    scored collection, else :func:`_candidates` (``sparse``: the BM25 query of a hybrid search). A collection
    whose fused multivector was written at this node weight gives the node-weighted score in one arm instead."""
    if vectors.subchunks is None or not settings.subchunks:
        return {"query": q.tolist(), "using": vector, "filter": flt, "params": ranking_params(vectors, vector)}
    exact = settings.scores_exactly(vectors.points)
    # one arm: the best sub-chunk alone, or the fused multivector written at this node weight
    one_arm = settings.node_weight == 0 or vectors.fuses_at(settings.node_weight)
    if exact and one_arm:
        cands = None  # an exact MaxSim scan is the ranking
    elif exact:
        cands = _exact_candidates(q, vector, settings, vectors, flt, sparse, limit)
    else:
        cands = _candidates(q, vector, settings, vectors, flt, sparse)
    depth = limit if cands is None else sum(p.limit for p in cands)  # at most this many distinct candidates
    using = vectors.fused if settings.node_weight > 0 and one_arm else vectors.subchunks
    sub = _subchunk_arm(q, vectors, flt, limit if one_arm else depth, cands, using)
    if one_arm:
        return {key: getattr(sub, key) for key in ("prefetch", "query", "using", "filter", "params")}
    nodes = _rescored(cands, q.tolist(), vector, depth, vectors)
    return {"prefetch": [sub, nodes], "query": node_weighted_formula(settings.node_weight)}


def _dense_request(q, vector, settings, query_filter, vectors) -> dict[str, Any]:
    """The ``query_points`` arguments of the dense ranking."""
    weighted = settings.node_weight > 0 and vectors.subchunks is not None and settings.subchunks
    # node-weighted rankings need depth
    depth = max(settings.limit, settings.fusion_limit) if weighted else settings.limit
    parts = _dense_parts(q, vector, settings, vectors, query_filter, depth)
    flt, params = parts.pop("filter", None), parts.pop("params", None)
    return {**parts, "query_filter": flt, "search_params": params, "limit": settings.limit}


def _hybrid_request(q, sparse_query, vector, settings, query_filter, vectors) -> dict[str, Any]:
    """The ``query_points`` arguments of the dense ranking and the BM25 ranking, fused in Qdrant (RRF or DBSF)."""
    limit = max(settings.limit, settings.fusion_limit)
    dense = _dense_parts(q, vector, settings, vectors, query_filter, limit, sparse_query)
    arms = [
        models.Prefetch(**dense, limit=limit),
        models.Prefetch(
            query=sparse_query, using=vectors.sparse, limit=settings.sparse_limit or limit, filter=query_filter
        ),
    ]
    return {"prefetch": arms, "query": settings.fusion_query(), "limit": settings.limit}


def sparse_request(
    sparse_query: models.SparseVector, vectors: CollectionVectors, limit: int, query_filter: models.Filter | None = None
) -> dict[str, Any]:
    """The ``query_points`` arguments of the BM25 ranking alone (keyword search).

    Raises:
        ValueError: the collection has no BM25 sparse vector.
    """
    if vectors.sparse is None:
        raise ValueError("the collection has no BM25 sparse vector (written without BM25); search it densely")
    return {"query": sparse_query, "using": vectors.sparse, "query_filter": query_filter, "limit": limit}


def query_request(
    query_vector: Sequence[float] | np.ndarray,
    settings: SearchSettings,
    vectors: CollectionVectors,
    *,
    query_filter: models.Filter | None = None,
    sparse_query: models.SparseVector | None = None,
) -> dict[str, Any]:
    """The arguments of the one ``query_points`` call that answers a query (after the collection name):
    :func:`search` and :func:`asearch` send it, with ``with_payload=True``."""
    vector = vectors.node_vector(settings.vector)
    q = _unit(np.asarray(query_vector, dtype=np.float32).reshape(-1))
    if settings.sparse and vectors.sparse and sparse_query is not None:
        return _hybrid_request(q, sparse_query, vector, settings, query_filter, vectors)
    return _dense_request(q, vector, settings, query_filter, vectors)


def _first_time(key: str) -> bool:
    """``True`` the first time ``key`` is asked in this process (the advice below is given once)."""
    if key in _ADVISED:
        return False
    _ADVISED.add(key)
    return True


def _advise_graph(collection: str, vectors: CollectionVectors, settings: SearchSettings) -> None:
    """Say once per collection that one searched above ``exact_up_to`` has no sub-chunk graph to draw from."""
    if vectors.subchunk_graph or vectors.subchunks is None or not settings.subchunks:
        return
    if settings.scores_exactly(vectors.points) or not _first_time(collection):
        return
    logger.warning(
        "collection %r holds %s nodes, more than exact_up_to=%d, and its sub-chunk vectors have no HNSW graph "
        "(written with m=0): its candidates come from the node vector (and BM25) only. Re-ingesting it with a "
        "sub-chunk graph (posfair ingest --subchunk-graph-m 16 into a new collection, or "
        "IngestConfig(layout=NodeLayout(subchunk_graph_m=16))) adds the best sub-chunks as candidates: closer to "
        "exact MaxSim, at a much longer index build and slower queries (docs/storage.md, 'Any size')",
        collection,
        vectors.points,
        settings.exact_up_to,
    )


def _advise_fused(collection: str, vectors: CollectionVectors, settings: SearchSettings) -> None:
    """Say once per collection that one searched through candidates at a fused weight lacks the fused multivector."""
    if vectors.fused is not None or vectors.subchunks is None or not settings.subchunks or settings.node_weight == 0:
        return
    if settings.scores_exactly(vectors.points) or not _first_time(f"fused:{collection}"):
        return
    logger.warning(
        "collection %r has no fused multivector (written before it was the default, or with --fused-weight 0): "
        "each query re-scores its candidates once per formula arm. A copy with the fused rows scores them once, "
        "about half the latency above exact_up_to: `posfair storage migrate --collection %s --to NEW "
        "--fused-weight %g` builds it from the stored vectors without encoding (qdrant_tools.fuse.fuse_collection; "
        "docs/storage.md, 'Any size')",
        collection,
        collection,
        settings.node_weight,
    )


def _score_rows(vectors: CollectionVectors, settings: SearchSettings) -> str | None:
    """The multivector whose rows give a hit's evidence and best sub-chunk: the fused rows where the search
    weighs the node at their weight (each row a sub-chunk plus the same node term; the ranking scored them
    already), else the sub-chunk multivector (``None``: a node-vector search, or no sub-chunks)."""
    if vectors.subchunks is None or not settings.subchunks:
        return None
    return vectors.fused if settings.node_weight > 0 and vectors.fuses_at(settings.node_weight) else vectors.subchunks


def _read_requests(
    points: Sequence[Any], vectors: CollectionVectors, settings: SearchSettings, fused: bool
) -> list[dict[str, Any]]:
    """The ``retrieve`` calls that read what the hits need back: for a fused query, every hit's rows (and its
    node vector beside fused rows: :func:`_similarity`); for a dense query, whose answer holds the dense score,
    every hit's node vector where that score weighs it, and the rows of the best ``evidence_limit`` hits."""
    if not points:
        return []
    rows, node = _score_rows(vectors, settings), vectors.node_vector(settings.vector)
    ids = [p.id for p in points]
    if fused:
        return [_read_request(ids, [node] if rows is None else [rows, node] if rows == vectors.fused else [rows])]
    out = [_read_request(ids, [node])] if rows is not None and settings.node_weight > 0 else []
    if rows is not None and _wants_evidence(settings):
        out.append(_read_request(ids if settings.evidence_limit is None else ids[: settings.evidence_limit], [rows]))
    return out


def _read_request(ids: Sequence[Any], reads: list[str]) -> dict[str, Any]:
    """The ``retrieve`` arguments that read ``reads`` (and the sub-chunk spans) of the points ``ids``."""
    return {"ids": list(ids), "with_payload": P.payload_fields(P.SUBCHUNK_SPANS), "with_vectors": reads}


def _cosines(rows: Any, q: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows if rows is not None else [], dtype=np.float32)
    if rows.size == 0:
        return np.zeros(0, dtype=np.float32)
    rows = rows.reshape(-1, q.shape[0])
    return rows @ q / np.maximum(np.linalg.norm(rows, axis=1), 1e-12)


def _row_scores(read: Mapping[str, Any], q: np.ndarray, rows: str | None, vectors: CollectionVectors) -> np.ndarray:
    """A hit's score against each row read back: the dot product with a fused row (as Qdrant ranks it), the
    cosine with a sub-chunk (empty: none read)."""
    got = read.get(rows) if rows is not None else None
    if rows is not None and rows == vectors.fused:
        return np.asarray(got or [], dtype=np.float32).reshape(-1, q.shape[0]) @ q
    return _cosines(got, q)


def _node_term(rows: str | None, vectors: CollectionVectors, settings: SearchSettings, fused: bool) -> float:
    """The weight of the node cosine inside the value a hit's best sub-chunk is taken from: Qdrant's own score
    of a dense query (the ranking's ``w * cos(node) + (1 - w) * best``), or the fused rows read back for a fused
    query (each ``(1 - w) * sub-chunk + w * node``); 0 for sub-chunk rows read back, or no rows."""
    if rows is None:
        return 0.0
    return settings.node_weight if not fused or rows == vectors.fused else 0.0


def _similarity(score: float, row_scores: np.ndarray, node: np.ndarray, fused: bool, has_rows: bool, w: float) -> float:
    """A hit's relevance before :func:`relevance`: its best sub-chunk's cosine (its node cosine without rows).

    ``score`` is Qdrant's, ``row_scores`` the rows read back (:func:`_row_scores`), ``node`` the node cosine
    read back (empty: not read) and ``w`` the node weight inside the value the best sub-chunk is taken from
    (:func:`_node_term`), so the best sub-chunk is ``(value - w * cos(node)) / (1 - w)``.
    """
    if not has_rows:
        return score if not fused else float(node[0]) if node.size else 0.0
    if fused and row_scores.size == 0:
        return 0.0
    value = float(row_scores.max()) if fused else score
    if w == 0.0:
        return value
    if node.size == 0:
        return 0.0
    if w >= 1.0:
        return float(node[0])
    return (value - w * float(node[0])) / (1.0 - w)


def _best_span(record: Any, row_scores: np.ndarray) -> tuple[int, int] | None:
    """The document offsets of a read-back hit's best-matching sub-chunk (``None``: no spans or rows). A fused row
    adds the same node term to every sub-chunk, so its best dot product is the best sub-chunk's."""
    spans = P.posfair_fields(record.payload).get(P.SUBCHUNK_SPANS)
    if not spans or len(row_scores) != len(spans):
        return None
    best = int(np.argmax(row_scores))
    return int(spans[best][0]), int(spans[best][1])


def relevance(scores: Sequence[float]) -> list[float]:
    """Scores in ranking order as relevance in [0, 1]: each clipped to [0, 1] and kept below the one before it
    (by at least :data:`RANK_STEP` while above 0), so a score cutoff keeps a prefix of the ranking and sorting
    by score gives the ranking back.

    Example:
        >>> [round(x, 6) for x in relevance([0.62, 0.71, 0.4, -0.1])]
        [0.62, 0.619999, 0.4, 0.0]
    """
    out: list[float] = []
    for s in scores:
        value = min(max(float(s), 0.0), 1.0)
        out.append(max(min(value, out[-1] - RANK_STEP), 0.0) if out else value)
    return out


def _hits(
    points: Sequence[Any],
    records: Sequence[Any],
    q: np.ndarray,
    vectors: CollectionVectors,
    settings: SearchSettings,
    fused: bool,
    evidence: bool,
) -> list[Hit]:
    """``query_points`` answers as :class:`Hit` objects: relevance scores (:func:`_similarity` in ranking order)
    and the evidence of the best ``evidence_limit`` hits."""
    read: dict[str, dict[str, Any]] = {}
    by_id: dict[str, Any] = {}
    for r in records:  # one point may come back from two reads (its node vector, its rows)
        read.setdefault(str(r.id), {}).update(r.vector or {})
        by_id[str(r.id)] = r
    rows, node = _score_rows(vectors, settings), vectors.node_vector(settings.vector)
    w = _node_term(rows, vectors, settings, fused)
    limit = len(points) if settings.evidence_limit is None else settings.evidence_limit
    raw, found = [], []
    for i, p in enumerate(points):
        got = read.get(str(p.id), {})
        row_scores = _row_scores(got, q, rows, vectors)
        raw.append(_similarity(float(p.score), row_scores, _cosines(got.get(node), q), fused, rows is not None, w))
        record = by_id.get(str(p.id))
        found.append(_best_span(record, row_scores) if evidence and i < limit and record is not None else None)
    return [
        Hit(str(p.id), score, dict(p.payload or {}), span, float(p.score) if fused else None, float(p.score))
        for p, score, span in zip(points, relevance(raw), found)
    ]


def hits_of(points: Sequence[Any]) -> list[Hit]:
    """``query_points`` answers of a BM25-only query (:func:`sparse_request`) as :class:`Hit` objects: the
    BM25 score as is (not a relevance in [0, 1]; docs/vector-store.md, "Scores")."""
    return [Hit(str(p.id), float(p.score), dict(p.payload or {}), rank_score=float(p.score)) for p in points]


def _fused(request: Mapping[str, Any]) -> bool:
    """Whether a :func:`query_request` fuses the dense and BM25 rankings (its scores are fusion values)."""
    return isinstance(request.get("query"), models.FusionQuery | models.RrfQuery)


def _wants_evidence(settings: SearchSettings) -> bool:
    return settings.evidence and settings.subchunks and settings.evidence_limit != 0


def _answer(
    points: Sequence[Any],
    records: Sequence[Any],
    query_vector: Sequence[float] | np.ndarray,
    vectors: CollectionVectors,
    settings: SearchSettings,
    request: Mapping[str, Any],
) -> list[Hit]:
    """The hits of a query's ``query_points`` answer and its read-back ``records`` (:func:`_hits`)."""
    q = _unit(np.asarray(query_vector, dtype=np.float32).reshape(-1))
    return _hits(points, records, q, vectors, settings, _fused(request), _wants_evidence(settings))


def _advise(collection: str, vectors: CollectionVectors, settings: SearchSettings) -> None:
    _advise_graph(collection, vectors, settings)
    _advise_fused(collection, vectors, settings)


def search(
    client: StoreLike,
    collection: str,
    query_vector: Sequence[float] | np.ndarray,
    settings: SearchSettings | None = None,
    *,
    vectors: CollectionVectors | None = None,
    query_filter: models.Filter | None = None,
    sparse_query: models.SparseVector | None = None,
) -> list[Hit]:
    """The ``settings.limit`` best nodes for ``query_vector`` (best first).

    Args:
        client: a ``QdrantClient`` or the embedded store.
        collection: the collection.
        query_vector: the query embedding (normalised or not).
        settings: see :class:`SearchSettings`.
        vectors: the collection's named vectors if already read (saves a call).
        query_filter: a Qdrant filter applied to the candidates.
        sparse_query: the query's BM25 vector (:meth:`qdrant_tools.sparse.Bm25Sparse.embed_query`, with the
            settings the collection was written with); with a sparse collection and ``settings.sparse``
            the dense and BM25 rankings are fused (hybrid search).

    Raises:
        LookupError / ValueError: see :func:`collection_vectors` and :meth:`CollectionVectors.node_vector`.
    """
    settings = settings or SearchSettings()
    vectors = vectors or collection_vectors(client, collection)
    _advise(collection, vectors, settings)
    request = query_request(query_vector, settings, vectors, query_filter=query_filter, sparse_query=sparse_query)
    points = client.query_points(collection, **request, with_payload=True).points
    records = [
        r
        for read in _read_requests(points, vectors, settings, _fused(request))
        for r in client.retrieve(collection, **read)
    ]
    return _answer(points, records, query_vector, vectors, settings, request)


async def asearch(
    aclient: AsyncStoreLike,
    collection: str,
    query_vector: Sequence[float] | np.ndarray,
    settings: SearchSettings,
    *,
    vectors: CollectionVectors,
    query_filter: models.Filter | None = None,
    sparse_query: models.SparseVector | None = None,
) -> list[Hit]:
    """:func:`search` through an ``AsyncQdrantClient`` (the same request; ``vectors`` read beforehand)."""
    _advise(collection, vectors, settings)
    request = query_request(query_vector, settings, vectors, query_filter=query_filter, sparse_query=sparse_query)
    points = (await aclient.query_points(collection, **request, with_payload=True)).points
    records = [
        r
        for read in _read_requests(points, vectors, settings, _fused(request))
        for r in await aclient.retrieve(collection, **read)
    ]
    return _answer(points, records, query_vector, vectors, settings, request)
