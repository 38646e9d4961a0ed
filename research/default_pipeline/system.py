"""The default pipeline itself as a system of the harness: ingest into the embedded store, retrieve through it.

What is measured is what ships: the benchmark's passages are written as
documents (``doc_id`` = passage id) by :func:`qdrant_tools.ingest.ingest_documents`
into an embedded store, every query is answered by :func:`qdrant_tools.search.search`,
and the node hits are aggregated to file level (a passage scores its best
node; a passage without a node among the hits scores ``-inf`` and ranks after
every hit, last among ties by the metrics' pessimistic tie rule).

Besides quality, a :class:`DefaultPipelineSystem` records what the layout costs
(:class:`DefaultPipelineStats`): vectors and bytes per node, ingest chunks/s, query
latency through the store, and — for the sub-chunk layout — the prefetch's
recall against exact MaxSim over every stored sub-chunk vector (numpy).

The store is pluggable: ``client_factory(folder) -> client``; the default is
:data:`DEFAULT_CLIENT_FACTORY`.

Example:
    >>> from qdrant_tools.layout import NodeLayout
    >>> from qdrant_tools.subchunks import SubchunkConfig
    >>> from research.default_pipeline.system import DefaultPipelineSystem, eval_search
    >>> layout = NodeLayout(chunk_tokens=510, subchunks=SubchunkConfig(48, 1))
    >>> eval_search(layout, prefetch_limit=50).limit
    50
    >>> # system = DefaultPipelineSystem("default pipeline", encoder, layout, eval_search(layout))
    >>> # run_eval(bench, [system])[0].ndcg.harmonic, system.stats.query_p50_ms
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from llamaindex_posfair.scoring import max_over_owners, unit_rows, weigh_node_scores
from qdrant_tools import payload as P
from qdrant_tools.chunking import SourceDocument, content_hash
from qdrant_tools.ingest import IngestConfig, ingest_documents
from qdrant_tools.layout import NodeLayout
from qdrant_tools.scroll import scroll_pages
from qdrant_tools.search import SearchSettings, collection_vectors, search
from qdrant_tools.sparse import Bm25Sparse
from qdrant_tools.subchunks import SUBCHUNK_VECTOR
from research.eval.harness.systems import EncodeCache

__all__ = [
    "DEFAULT_CLIENT_FACTORY",
    "HARNESS_SEARCH",
    "DefaultPipelineStats",
    "DefaultPipelineSystem",
    "IndexPool",
    "NodeVectors",
    "StorageStats",
    "StoreIndex",
    "edge_store",
    "eval_search",
    "ingest_config",
    "int8_roundtrip",
    "layout_label",
    "local_store",
    "node_scores",
    "prefetch_recall",
]

COLLECTION = "pipeline"


def local_store(folder: str) -> Any:
    """qdrant-client's embedded local mode in ``folder``."""
    from qdrant_client import QdrantClient

    return QdrantClient(path=folder)


def edge_store(folder: str) -> Any:
    """The shipped embedded default: Qdrant Edge in ``folder`` (:func:`qdrant_tools.store.open_store`)."""
    from qdrant_tools.store import open_store

    return open_store(folder)


#: How the harness opens an embedded store in a folder: the store ``posfair ingest`` uses by default.
DEFAULT_CLIENT_FACTORY: Callable[[str], Any] = edge_store


# ------------------------------------------------------------------ settings
def ingest_config(layout: NodeLayout, bm25: bool = False) -> IngestConfig:
    """The ``IngestConfig`` of ``posfair ingest`` writing ``layout`` (no progress bar); ``bm25``: also a BM25
    sparse vector of each node (default :class:`Bm25Sparse` settings), so a search with
    ``SearchSettings(sparse=True)`` fuses it in (hybrid)."""
    return IngestConfig(layout=layout, show_progress=False, sparse=Bm25Sparse() if bm25 else None)


def layout_label(layout: NodeLayout, bm25: bool = False) -> str:
    """E.g. ``"510-tok nodes, sub-chunks ≤48 tok, 1-sent overlap"``.

    Example:
        >>> from qdrant_tools.subchunks import SubchunkConfig
        >>> layout_label(NodeLayout(chunk_tokens=510, subchunks=SubchunkConfig(48, 1)), bm25=True)
        '510-tok nodes, sub-chunks ≤48 tok, 1-sent overlap, BM25'
    """
    text = f"{layout.chunk_tokens}-tok nodes"
    if layout.subchunks is None:
        return f"{text}, single vector"
    s = layout.subchunks
    text += f", sub-chunks ≤{s.max_tokens} tok, {s.overlap_sentences}-sent overlap"
    text += ", node = sub-chunk mean" if layout.node_source == "subchunk-mean" else ""
    return text + (", int8" if layout.subchunk_quantization == "int8" else "") + (", BM25" if bm25 else "")


#: The search the harness starts from: that of the sweeps which chose the product's defaults (best sub-chunk
#: only, plain RRF over 50 nodes per ranking, exact up to 10,000 nodes), not the product's ``SearchSettings()``;
#: each grid point sets what it varies.
HARNESS_SEARCH = SearchSettings(
    prefetch_limit=100, prefetch_max=None, exact_up_to=10_000, node_weight=0.0, fusion="rrf", fusion_limit=50
)


def eval_search(
    layout: NodeLayout,
    prefetch_limit: int = 100,
    node_weight: float = 0.0,
    depth: int = 100,
    exact_up_to: int = HARNESS_SEARCH.exact_up_to,
) -> SearchSettings:
    """The ``SearchSettings`` the harness queries with.

    A sub-chunk layout returns every re-scored candidate (``limit = prefetch_limit``), so the
    file-level ranking reaches as deep as the prefetch allows and no deeper; the single-vector
    layout returns ``depth`` nodes. ``exact_up_to``: see :class:`SearchSettings` (0 = always the
    two-stage query, as in :func:`node_scores` with ``prefetch_limit``).
    """
    limit = prefetch_limit if layout.subchunks is not None else depth
    return replace(
        HARNESS_SEARCH, limit=limit, prefetch_limit=prefetch_limit, node_weight=node_weight, exact_up_to=exact_up_to
    )


#: The fields of a recipe's default search that shape its ranking (the harness keeps its own depth and evidence).
RANKING_FIELDS = (
    "node_weight",
    "fusion",
    "fusion_limit",
    "sparse_weight",
    "rrf_k",
    "prefetch_limit",
    "prefetch_max",
    "exact_up_to",
)


def ranked_as(layout: NodeLayout, search: SearchSettings) -> SearchSettings:
    """The harness search of ``layout`` (:func:`eval_search`) ranking as ``search`` (a recipe's) does."""
    return replace(eval_search(layout), **{f: getattr(search, f) for f in RANKING_FIELDS})


# ------------------------------------------------------------------ accounting (pure)
@dataclass(frozen=True)
class StorageStats:
    """Vectors and bytes of one stored corpus.

    Args:
        nodes: points written (one per node).
        passages: documents ingested.
        dim: vector size.
        dense_per_node: dense (node) vectors per point.
        subchunk_vectors: sub-chunk vectors over all points.
        store_bytes: size of the store's folder on disk (``None`` if not measured).
        fused_vectors: rows of the fused multivector over all points (0 without it; float32 in every count).

    Example:
        >>> s = StorageStats(nodes=2, passages=1, dim=4, dense_per_node=1, subchunk_vectors=6)
        >>> s.vectors_per_node, s.bytes_per_node, s.bytes_per_node_int8, s.bytes_per_passage
        (4.0, 64.0, 28.0, 128.0)
    """

    nodes: int
    passages: int
    dim: int
    dense_per_node: int
    subchunk_vectors: int
    store_bytes: int | None = None
    fused_vectors: int = 0

    @property
    def subchunks_per_node(self) -> float:
        return self.subchunk_vectors / max(self.nodes, 1)

    @property
    def fused_per_node(self) -> float:
        return self.fused_vectors / max(self.nodes, 1)

    @property
    def vectors_per_node(self) -> float:
        return self.dense_per_node + self.subchunks_per_node + self.fused_per_node

    @property
    def vectors_per_passage(self) -> float:
        return self.vectors_per_node * self.nodes / max(self.passages, 1)

    @property
    def bytes_per_node(self) -> float:
        """float32 vector bytes per node (payload and index not counted)."""
        return 4.0 * self.dim * self.vectors_per_node

    @property
    def bytes_per_passage(self) -> float:
        """float32 vector bytes per passage (the corpus's vector storage over its passages): the fair
        storage unit across node sizes, since a smaller node holds fewer sub-chunks but there are more nodes."""
        return self.bytes_per_node * self.nodes / max(self.passages, 1)

    @property
    def bytes_per_node_int8(self) -> float:
        """Vector bytes per node searched with int8 sub-chunks: float32 node vectors + one byte per
        sub-chunk dimension (Qdrant keeps the float originals besides, on disk when ``on_disk``)."""
        return 4.0 * self.dim * (self.dense_per_node + self.fused_per_node) + 1.0 * self.dim * self.subchunks_per_node

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "passages": self.passages,
            "vectors_per_node": round(self.vectors_per_node, 3),
            "vectors_per_passage": round(self.vectors_per_passage, 3),
            "bytes_per_node": round(self.bytes_per_node, 1),
            "bytes_per_node_int8": round(self.bytes_per_node_int8, 1),
            "bytes_per_passage": round(self.bytes_per_passage, 1),
            "store_bytes": self.store_bytes,
        }


@dataclass(frozen=True)
class NodeVectors:
    """Every stored vector of a collection, read back from the store.

    Args:
        ids: point ids, one per node (row order of ``node``).
        doc_col: per node, the column of its passage in the score matrix.
        node: ``[n_nodes, dim]`` node vectors (normalised).
        sub: ``[n_sub, dim]`` sub-chunk vectors (normalised; empty for the single-vector layout).
        owner: per sub-chunk vector, the row of its node.
    """

    ids: list[str]
    doc_col: np.ndarray
    node: np.ndarray
    sub: np.ndarray
    owner: np.ndarray


def int8_roundtrip(x: np.ndarray, quantile: float = 0.99) -> np.ndarray:
    """``x`` through int8 scalar quantization and back, as Qdrant quantizes (256 levels between the
    ``(1-quantile)/2`` and ``(1+quantile)/2`` quantiles of all values, outliers clipped).

    Example:
        >>> x = np.linspace(-1, 1, 1000).reshape(10, 100)
        >>> float(np.abs(int8_roundtrip(x) - x).max()) < 0.02
        True
    """
    if x.size == 0:
        return x.astype(np.float32)
    lo, hi = np.quantile(x, [(1 - quantile) / 2, (1 + quantile) / 2])
    step = max(float(hi - lo), 1e-12) / 255.0
    q = np.clip(np.round((np.clip(x, lo, hi) - lo) / step), 0, 255)
    return (lo + q * step).astype(np.float32)


def node_scores(
    vectors: NodeVectors,
    queries: np.ndarray,
    node_weight: float = 0.0,
    prefetch_limit: int | None = None,
    int8: bool = False,
) -> np.ndarray:
    """``[n_queries, n_nodes]`` scores the sub-chunk layout gives, computed in numpy.

    ``w * cos(q, node) + (1 - w) * max_j q·s_j`` over every node (``prefetch_limit=None``: exact
    MaxSim), or only over the ``prefetch_limit`` nodes nearest by node cosine, the rest ``-inf``
    (what the store's two-stage query does). ``int8`` rounds the sub-chunk vectors through
    :func:`int8_roundtrip` first (quantized scoring without rescoring).
    """
    q = unit_rows(queries)
    cos = q @ unit_rows(vectors.node).T
    sub = int8_roundtrip(vectors.sub) if int8 else vectors.sub  # stored unit vectors, scored as Qdrant scores them
    out = weigh_node_scores(cos, max_over_owners(q @ sub.T, vectors.owner, len(vectors.ids)), node_weight)
    if prefetch_limit is not None and prefetch_limit < out.shape[1]:
        keep = np.argsort(-cos, axis=1, kind="stable")[:, :prefetch_limit]
        masked = np.full_like(out, -np.inf)
        np.put_along_axis(masked, keep, np.take_along_axis(out, keep, axis=1), axis=1)
        out = masked
    return out


def prefetch_recall(store: np.ndarray, exact: np.ndarray, k: int = 10) -> float:
    """Mean share of each query's exact top-``k`` nodes that the store's answer also ranks in its top ``k``.

    Example:
        >>> exact = np.array([[3.0, 2.0, 1.0]])
        >>> prefetch_recall(np.array([[3.0, -np.inf, 1.0]]), exact, k=2)
        0.5
    """
    k = min(k, exact.shape[1])
    top_exact = np.argsort(-exact, axis=1, kind="stable")[:, :k]
    shares = []
    for row, want in zip(store, top_exact):
        found = np.flatnonzero(np.isfinite(row))
        got = found[np.argsort(-row[found], kind="stable")][:k]
        shares.append(len(set(want.tolist()) & set(got.tolist())) / k)
    return float(np.mean(shares)) if shares else float("nan")


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


# ------------------------------------------------------------------ the store
def _vector_name(encoder: Any) -> str:
    """The node vector's name as ``posfair ingest`` names it (``EncoderSet.single``)."""
    spec = getattr(encoder, "spec", None)
    calibration = spec.calibration if spec is not None else getattr(encoder, "calibration", None)
    return "vanilla" if calibration is None else "calibrated"


@dataclass
class StoreIndex:
    """A benchmark corpus ingested by the default pipeline into an embedded store (built by :meth:`build`).

    Attributes:
        storage: vectors and bytes.
        ingest_seconds: ingestion wall time, memoised embeddings charged at their cold cost.
        vectors: every stored vector, read back (for exact MaxSim).
        bm25: the store holds a BM25 sparse vector of each node (:meth:`answer` fuses it in).
    """

    client: Any
    folder: Path | None
    layout: NodeLayout
    storage: StorageStats
    ingest_seconds: float
    vectors: NodeVectors
    row_of: dict[str, int]
    closed: bool = False
    bm25: bool = False

    @classmethod
    def build(
        cls,
        encoder: Any,
        texts: Sequence[str],
        doc_ids: Sequence[str],
        layout: NodeLayout,
        client_factory: Callable[[str], Any] = DEFAULT_CLIENT_FACTORY,
        folder: str | Path | None = None,
        *,
        bm25: bool = False,
    ) -> StoreIndex:
        """Ingest ``texts`` as documents ``doc_ids`` with ``encoder`` (``posfair ingest`` with ``layout``).

        Args:
            folder: the store's folder (created; default: a new temporary folder, removed on close).
            bm25: also store a BM25 sparse vector of each node (:func:`ingest_config`).
        """
        folder = Path(folder or tempfile.mkdtemp(prefix="posfair-default-pipeline-"))
        folder.mkdir(parents=True, exist_ok=True)
        docs = [SourceDocument(d, t, d, content_hash(t)) for d, t in zip(doc_ids, texts)]
        client = client_factory(str(folder))
        if hasattr(encoder, "reset_counters"):
            encoder.reset_counters()
        t0 = time.perf_counter()
        report = ingest_documents(
            client, COLLECTION, docs, {_vector_name(encoder): encoder}, ingest_config(layout, bm25)
        )
        wall = time.perf_counter() - t0
        seconds = wall - getattr(encoder, "spent_seconds", 0.0) + getattr(encoder, "charged_seconds", 0.0)
        vectors = read_vectors(client, COLLECTION, {d: i for i, d in enumerate(doc_ids)})
        storage = StorageStats(
            nodes=report.chunks_written,
            passages=len(docs),
            dim=int(encoder.dimension),
            dense_per_node=1,
            subchunk_vectors=len(vectors.owner),
            store_bytes=_folder_bytes(folder),
            fused_vectors=len(vectors.owner) if layout.fused_weight is not None else 0,
        )
        row_of = {pid: i for i, pid in enumerate(vectors.ids)}
        return cls(client, folder, layout, storage, seconds, vectors, row_of, bm25=bm25)

    def answer(
        self,
        queries: np.ndarray,
        settings: SearchSettings,
        texts: Sequence[str] | None = None,
        collection: str = COLLECTION,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every query through :func:`qdrant_tools.search.search` (with ``texts`` and a BM25 layout: hybrid), on
        ``collection`` of the store (the ingested one, or a copy of it with the same points).

        Returns:
            ``([n_queries, n_nodes] node scores, -inf where not returned; per-query search seconds)``.
        """
        if self.closed:
            raise RuntimeError("this StoreIndex is closed; build it again (IndexPool does)")
        vectors = collection_vectors(self.client, collection)
        out = np.full((len(queries), len(self.row_of)), -np.inf, dtype=np.float64)
        seconds = np.zeros(len(queries))
        bm25 = Bm25Sparse() if self.bm25 and texts is not None else None
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            sparse = bm25.embed_query(texts[i]) if bm25 is not None else None
            hits = search(self.client, collection, q, settings, vectors=vectors, sparse_query=sparse)
            seconds[i] = time.perf_counter() - t0
            for h in hits:
                out[i, self.row_of[h.id]] = h.rank_score
        return out, seconds

    def close(self, remove: bool = True) -> None:
        """Close the client (and remove the folder)."""
        if not self.closed:
            self.client.close()
            self.closed = True
            if remove and self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)


def read_vectors(client: Any, collection: str, column: dict[str, int]) -> NodeVectors:
    """Every point's node and sub-chunk vectors, in scroll order (``column``: doc id -> score column)."""
    vectors = collection_vectors(client, collection)
    name = vectors.node_vector()
    ids, cols, nodes, subs, owner = [], [], [], [], []
    for points in scroll_pages(client, collection, with_payload=[P.DOC_ID], with_vectors=True):
        for p in points:
            ids.append(str(p.id))
            cols.append(column[p.payload[P.DOC_ID]])
            nodes.append(np.asarray(p.vector[name], dtype=np.float32))
            rows = p.vector.get(SUBCHUNK_VECTOR) or []
            subs.extend(np.asarray(r, dtype=np.float32) for r in rows)
            owner.extend([len(ids) - 1] * len(rows))
    dim = len(nodes[0]) if nodes else 0
    return NodeVectors(
        ids=ids,
        doc_col=np.asarray(cols, dtype=np.int64),
        node=np.stack(nodes) if nodes else np.zeros((0, dim), np.float32),
        sub=np.stack(subs) if subs else np.zeros((0, dim), np.float32),
        owner=np.asarray(owner, dtype=np.int64),
    )


class IndexPool:
    """Built stores shared by systems with the same encoder, corpus and layout (query settings differ).

    At most ``max_open`` stay open; the least recently used is closed (and built again if asked for).

    Args:
        client_factory: ``folder -> client``.
        max_open: stores kept open.

    Example:
        >>> with IndexPool() as pool:  # doctest: +SKIP
        ...     index = pool.get(encoder, texts, ids, NodeLayout(chunk_tokens=254))
    """

    def __init__(self, client_factory: Callable[[str], Any] = DEFAULT_CLIENT_FACTORY, max_open: int = 2) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be a positive integer, got {max_open}")
        self.client_factory = client_factory
        self.max_open = max_open
        self._open: OrderedDict[tuple[Any, ...], StoreIndex] = OrderedDict()
        self.builds = 0

    def get(
        self, encoder: Any, texts: Sequence[str], doc_ids: Sequence[str], layout: NodeLayout, bm25: bool = False
    ) -> StoreIndex:
        corpus = hashlib.sha256("\x00".join([*doc_ids, *texts]).encode()).hexdigest()[:16]
        key = (encoder.fingerprint(), corpus, layout, bm25)
        if key in self._open:
            self._open.move_to_end(key)
            return self._open[key]
        index = StoreIndex.build(encoder, texts, doc_ids, layout, self.client_factory, bm25=bm25)
        self.builds += 1
        self._open[key] = index
        while len(self._open) > self.max_open:
            self._open.popitem(last=False)[1].close()
        return index

    def close(self) -> None:
        while self._open:
            self._open.popitem()[1].close()

    def __enter__(self) -> IndexPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------------ the system
@dataclass(frozen=True)
class DefaultPipelineStats:
    """What one default-pipeline system cost, next to its quality.

    Attributes:
        storage: vectors and bytes.
        ingest_chunks_per_second: nodes written per second of (cold-equivalent) ingestion.
        query_p50_ms / query_p99_ms: wall time of one ``search`` call through the store.
        prefetch_recall: share of the exact top-10 nodes the store's answer keeps (``nan`` when
            not measured: the single-vector layout, or a numpy-scored system).
    """

    storage: StorageStats
    ingest_chunks_per_second: float
    query_p50_ms: float
    query_p99_ms: float
    prefetch_recall: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.storage.to_dict(),
            "ingest_chunks_per_second": round(self.ingest_chunks_per_second, 2),
            "query_p50_ms": round(self.query_p50_ms, 2),
            "query_p99_ms": round(self.query_p99_ms, 2),
            "prefetch_recall@10": None if np.isnan(self.prefetch_recall) else round(self.prefetch_recall, 4),
        }


Scoring = Literal["store", "exact", "int8-simulated"]


@dataclass
class DefaultPipelineSystem:
    """The default pipeline as a ``RetrievalSystem``: ingest ``cache.docs`` with ``layout``, query through the store.

    Args:
        name: Row label.
        encoder: the node (and sub-chunk) encoder, e.g. a bound ``EncoderSpec`` view (wrap it in a
            :class:`~research.eval.memo.MemoEncoder` to share embeddings across settings).
        layout: ingestion settings (:class:`qdrant_tools.layout.NodeLayout`).
        search: query settings (:func:`eval_search`).
        scoring: ``"store"`` (through :func:`qdrant_tools.search.search`), ``"exact"`` (numpy MaxSim
            over every stored vector: no prefetch bound) or ``"int8-simulated"`` (numpy two-stage
            query with int8-rounded sub-chunk vectors).
        pool: share built stores between systems (default: build and close one per ``score``).
        bm25: the store also holds a BM25 sparse vector of each node, and queries fuse it in
            (:func:`ingest_config`).

    Attributes:
        stats: :class:`DefaultPipelineStats`, set by ``score``.
    """

    name: str
    encoder: Any
    layout: NodeLayout
    search: SearchSettings
    scoring: Scoring = "store"
    pool: IndexPool | None = None
    bm25: bool = False
    kind: str = "default-pipeline"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = float("nan")
    stats: DefaultPipelineStats | None = None

    def __post_init__(self) -> None:
        if self.scoring not in ("store", "exact", "int8-simulated"):
            raise ValueError(f'scoring must be "store", "exact" or "int8-simulated", got {self.scoring!r}')
        if self.scoring != "store" and self.layout.subchunks is None:
            raise ValueError(f"scoring={self.scoring!r} needs a sub-chunk layout; use scoring='store'")
        s = self.search
        self.params = {"prefetch": s.prefetch_limit, "w": s.node_weight, "scoring": self.scoring, **self.params}

    def score(self, cache: EncodeCache) -> np.ndarray:
        pool = self.pool or IndexPool(max_open=1)
        try:
            index = pool.get(self.encoder, cache.docs, cache.doc_ids, self.layout, self.bm25)
            queries = np.asarray(self.encoder.encode_queries(list(cache.queries)), dtype=np.float32)
            nodes, recall, seconds = self._node_scores(index, queries, list(cache.queries))
        finally:
            if self.pool is None:
                pool.close()
        ingest = index.storage.nodes / index.ingest_seconds if index.ingest_seconds > 0 else float("nan")
        ms = 1000.0 * seconds if len(seconds) else np.array([np.nan])
        self.stats = DefaultPipelineStats(
            storage=index.storage,
            ingest_chunks_per_second=ingest,
            query_p50_ms=float(np.percentile(ms, 50)),
            query_p99_ms=float(np.percentile(ms, 99)),
            prefetch_recall=recall,
        )
        self.vectors_per_passage = index.storage.vectors_per_passage
        return max_over_owners(nodes, index.vectors.doc_col, cache.n_docs)

    def _node_scores(
        self, index: StoreIndex, queries: np.ndarray, texts: Sequence[str]
    ) -> tuple[np.ndarray, float, np.ndarray]:
        w = self.search.node_weight
        if self.scoring == "store":
            nodes, seconds = index.answer(queries, self.search, texts)
            if self.layout.subchunks is None:
                return nodes, float("nan"), seconds
            return nodes, prefetch_recall(nodes, node_scores(index.vectors, queries, w)), seconds
        exact = self.scoring == "exact" or self.search.scores_exactly(len(index.vectors.node))  # as the store does
        prefetch = None if exact else self.search.prefetch_limit
        nodes = node_scores(index.vectors, queries, w, prefetch, int8=self.scoring == "int8-simulated")
        return nodes, float("nan"), np.zeros(0)


def cpu_load() -> str:
    """The 1/5/15-minute load averages, for timing notes (``"n/a"`` where the OS has none)."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover - platform without load averages
        return "n/a"
