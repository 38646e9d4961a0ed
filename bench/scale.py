"""The default pipeline at 10k-1M nodes: quality and cost of the default search as the collection grows.

The shipped benchmarks' real ``test`` passages (needle-prose and natural-docs, ingested by ``posfair ingest``'s
own code: :class:`research.default_pipeline.system.StoreIndex`, 254-token nodes, ``SubchunkConfig()``, BM25,
the bundled all-MiniLM-L6-v2 uncalibrated) are put inside a collection of *distractor* nodes, until it holds
``--sizes`` nodes. Encoding a million real nodes is out of reach on a CPU, so a distractor is built from real
vectors: ``--per-node`` (10) sub-chunk vectors drawn at random from a pool of encoded real sub-chunks, each
moved by a little noise (``--jitter``: Gaussian noise of that norm, renormalised, so no two distractors share a
vector exactly), its node vector the normalised mean of its sub-chunk vectors (the layout encodes a node's
text; a distractor has none), and its BM25 vector that of its sub-chunk texts joined. The pool is every
sub-chunk of the shipped prose that is *not* a benchmark ``test`` passage (``research/bench/subchunk_index.py``'s pool,
needle-prose ``test`` and the repository's docs left out; natural-docs is not in it), so no distractor repeats a
relevant passage.

The collection has the layout ``posfair ingest`` writes (copied from the real store's collection), in the
Qdrant Edge store, written in batches of 256 and indexed by ``build_index``; ``--subchunk-m M`` gives the
sub-chunk multivector an HNSW graph (``m=M``) so the search also draws candidates from it.

Reported per size and search: recall@10 of its top 10 against the same search scored exhaustively (every
node a candidate (an exact scan of the node vectors), re-scored by MaxSim and by node cosine, so every node's
node-weighted score is exact before the BM25 fusion), over all nodes and over the benchmarks' real nodes only (the
exhaustive top 10's real nodes found, pooled over queries: a distractor repeats sub-chunks of a small pool, so
many distractors nearly tie and which of them make a top 10 is close to chance); nDCG@10 of both benchmarks' ``test`` queries (mean, and harmonic
over begin/middle/end), the search's and the exhaustive one's; query
p50/p99 ms (query embedding excluded, BM25 query included); write throughput (nodes/s, distractor generation
excluded), index build seconds, RAM per node (the resident memory the process grows by when it reopens the
written store and answers the queries, up to that search: the searches run before the exhaustive reference,
which pages in every vector; the store is reopened as readers open it, its files warmed into the page cache, unless
``--no-warm``), the anonymous part of it (``RssAnon``: memory-mapped file pages, which the
kernel can drop and read again, left out) and disk per node (allocated bytes of the folder, WAL included).
``--storage`` keeps the vectors as a row of :data:`research.storage_arms.ARMS` says (a quantized copy in RAM,
originals memory-mapped). The
searches: the default (``SearchSettings()``: the node cosine and BM25 fused in, as the recipe says, through
``qdrant_tools.search.search``; a collection of at most the recipe's ``exact_up_to`` = 5,000 nodes is scored
exactly), the query of larger collections forced at every size (``exact_up_to=0``: MaxSim over candidates from
the node vector's HNSW, BM25 and, with ``--subchunk-m``, the sub-chunk graph), ``--prefetch`` variants of it
(a fixed number of node-vector candidates) and, with ``--exact``, exact scoring forced at every size.
Each search's five slowest queries are printed with the time Python's garbage collector ran inside them.
Peak memory is printed twice: the kernel's ``ru_maxrss``, and the peaks of resident, anonymous and file-backed
memory sampled every 0.5 s by a child process (:class:`MemoryPeaks`).
Embeddings are memoised under ``--cache``.

Usage::

    nice -n 5 python bench/scale.py --sizes 10000                         # 1-2 minutes once the cache is warm
    nice -n 5 python bench/scale.py --sizes 10000,100000 --prefetch 300   # docs/storage.md, "Any size"
    nice -n 5 python bench/scale.py --sizes 10000 --subchunk-m 16         # with the sub-chunk graph
    nice -n 5 python bench/scale.py --sizes 100000 --storage 1            # fused int8 copy, originals on disk
    nice -n 5 python bench/scale.py --sizes 5000,10000 --exact --prefetch 1000   # exact scoring against candidates
    nice -n 5 python bench/scale.py --sizes 1000000 --exact-queries 30 --index-every 333334 --max-segment-mb 7500
        # a million nodes: the reference over 30 queries, the index built in three parts (docs/storage.md)
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from qdrant_client import models

BENCHMARKS = ("needle-prose", "natural-docs")
COLLECTION = "scale"
K = 10


@dataclass
class RealNodes:
    """The benchmarks' nodes as the default pipeline stored them: vectors, BM25 vectors and their documents."""

    vectors: list[dict[str, Any]] = field(default_factory=list)
    payloads: list[dict[str, Any]] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)  # "benchmark/doc_id"
    config: dict[str, Any] = field(default_factory=dict)  # create_collection kwargs of the real store


@dataclass
class Pool:
    """Encoded real sub-chunks that distractors are drawn from."""

    vectors: np.ndarray
    texts: list[str]


# ------------------------------------------------------------------ data
def real_nodes(encoder: Any, fused_weight: float | None, node_quantization: str | None) -> RealNodes:
    """Both benchmarks' ``test`` corpora ingested by the default pipeline (``fused_weight``: with the fused multivector
    at that node weight; ``node_quantization="int8"``: an int8 copy of the node vectors); every stored point read back."""
    from qdrant_tools.encoding import resolve_chunking
    from qdrant_tools.layout import NodeLayout
    from qdrant_tools.scroll import scroll_pages
    from qdrant_tools.subchunks import SubchunkConfig
    from research.default_pipeline import system as pipeline
    from research.eval.benchmarks.loaders import load_shipped

    out = RealNodes()
    chunk_tokens = resolve_chunking(encoder).chunk_tokens
    layout = NodeLayout(  # float rows in RAM: `--storage` keeps them as an arm says
        chunk_tokens=chunk_tokens,
        subchunks=SubchunkConfig(),
        fused_weight=fused_weight,
        node_quantization=node_quantization,
        node_on_disk=False,
        fused_quantization=None,
    )
    for name in BENCHMARKS:
        bench = load_shipped(name, "test")
        ids = list(bench.corpus)
        index = pipeline.StoreIndex.build(encoder, [bench.corpus[d] for d in ids], ids, layout, bm25=True)
        try:
            config = index.client.get_collection(pipeline.COLLECTION).config
            out.config = {
                "vectors_config": config.params.vectors,
                "sparse_vectors_config": config.params.sparse_vectors,
                "metadata": getattr(config, "metadata", None),
            }
            for points in scroll_pages(index.client, pipeline.COLLECTION, with_vectors=True):
                out.vectors += [dict(p.vector) for p in points]
                out.payloads += [dict(p.payload) for p in points]
                out.docs += [f"{name}/{p.payload['doc_id']}" for p in points]
        finally:
            index.close()
    return out


def pool(encoder: Any) -> Pool:
    """Every sub-chunk of the shipped prose outside the benchmarks' ``test`` passages and the repository's docs
    (which change with every commit), encoded (memoised)."""
    from qdrant_tools.encoding import spans_for
    from qdrant_tools.subchunks import SubchunkConfig, subchunk_text
    from research.bench.subchunk_index import prose_pool

    spans_fn, _ = spans_for(encoder)
    texts = []
    for doc_id, text, source in prose_pool(None):
        if source != "repo-docs" and not doc_id.startswith("needle/test/"):  # docs change with every commit
            texts += [s.text for s in subchunk_text(text, SubchunkConfig(), spans_fn)]
    texts = sorted(set(texts))
    vecs = np.asarray(encoder.encode_documents(texts), dtype=np.float32)
    return Pool(vecs / np.linalg.norm(vecs, axis=1, keepdims=True), texts)


def distractors(pool: Pool, n: int, rng: np.random.Generator, args: argparse.Namespace, node_name: str):
    """``n`` distractor points' vectors, in batches of 256 (see the module docstring); with ``args.fused``, also
    their fused multivector (:func:`qdrant_tools.encoding.fused_rows`, as ingestion writes it)."""
    from qdrant_tools.encoding import fused_rows, subchunk_mean
    from qdrant_tools.sparse import Bm25Sparse
    from qdrant_tools.subchunks import FUSED_VECTOR

    bm25 = Bm25Sparse()
    dim = pool.vectors.shape[1]
    for start in range(0, n, 256):
        k = min(256, n - start)
        pick = rng.integers(0, len(pool.texts), size=(k, args.per_node))
        subs = pool.vectors[pick] + args.jitter / np.sqrt(dim) * rng.standard_normal((k, args.per_node, dim))
        subs = (subs / np.linalg.norm(subs, axis=2, keepdims=True)).astype(np.float32)
        node = np.stack([subchunk_mean(row) for row in subs])
        texts = [" ".join(pool.texts[j] for j in row) for row in pick]
        sparse = bm25.embed_documents(texts)
        vectors = [{node_name: node[i].tolist(), "subchunks": subs[i].tolist(), "bm25": sparse[i]} for i in range(k)]
        if args.fused is not None:
            for i, v in enumerate(vectors):
                v[FUSED_VECTOR] = fused_rows(node[i], subs[i], args.fused).tolist()
        yield list(zip(vectors, ({"text": t} for t in texts)))


# ------------------------------------------------------------------ the collection
def rss_mb() -> float:
    """Resident memory of this process now (Linux ``/proc``), MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def anon_mb() -> float:
    """Anonymous resident memory of this process now (``RssAnon``: what cannot be paged back to a file), MB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1e3 for line in f if line.startswith("RssAnon:"))


_PEAKS_CHILD = """
import os, sys, time
status, out = f"/proc/{sys.argv[1]}/status", sys.argv[2]
peaks = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0}
while os.path.exists(status):
    try:
        with open(status) as f:
            for line in f:
                key = line.split(":")[0]
                if key in peaks:
                    peaks[key] = max(peaks[key], int(line.split()[1]))
    except OSError:
        break
    with open(out + ".tmp", "w") as f:
        f.write(" ".join(str(peaks[k]) for k in ("VmRSS", "RssAnon", "RssFile")))
    os.replace(out + ".tmp", out)
    time.sleep(0.5)
"""


class MemoryPeaks:
    """Peak resident, anonymous and file-backed memory of this process, sampled every 0.5 s by a child process
    (a thread of this one would stall while Qdrant Edge holds the interpreter lock, as through an index build)."""

    def __enter__(self) -> MemoryPeaks:
        import subprocess

        self._out = Path(tempfile.mkdtemp(prefix="posfair-peaks-")) / "peaks"
        self._child = subprocess.Popen([sys.executable, "-c", _PEAKS_CHILD, str(os.getpid()), str(self._out)])
        return self

    def __exit__(self, *exc: object) -> None:
        self._child.kill()
        self._child.wait()
        shutil.rmtree(self._out.parent, ignore_errors=True)

    def gb(self) -> tuple[float, float, float]:
        """``(VmRSS, RssAnon, RssFile)`` peaks so far, GB (zeros before the first sample)."""
        try:
            return tuple(int(x) / 1e6 for x in self._out.read_text().split())  # type: ignore[return-value]
        except (FileNotFoundError, ValueError):
            return 0.0, 0.0, 0.0

    def describe(self) -> str:
        rss, anon, file = self.gb()
        return f"sampled peaks so far: resident {rss:.1f} GB, anonymous {anon:.1f} GB, file-backed {file:.1f} GB"


def folder_mb(folder: Path) -> float:
    return sum(f.stat().st_blocks * 512 for f in folder.rglob("*") if f.is_file()) / 1e6  # allocated, not sparse


@dataclass
class Built:
    """A collection of ``n`` nodes: the store, where each real node sits, and what building it cost."""

    store: Any
    folder: Path
    n: int
    doc_of: dict[int, str]
    write_s: float
    index_s: float
    rss_before: float = 0.0
    anon_before: float = 0.0
    open_s: float = 0.0

    def reopen(self, warm: bool) -> None:
        """Close the store and open it again from its folder (what a reader process does: ``warm``, the files
        read into the page cache as ``PosFairRetriever.from_path`` opens them); the resident memory it grows by
        from here on, while it answers queries, is the RAM it needs. ``open_s``: opening and loading the
        collection, warming included."""
        from qdrant_tools.store import open_store

        self.store.close()
        self.rss_before, self.anon_before = rss_mb(), anon_mb()
        t0 = time.perf_counter()
        self.store = open_store(self.folder, auto_index=False, warm=warm)
        self.store.count(COLLECTION)  # loads the collection (and warms it)
        self.open_s = time.perf_counter() - t0


def create(
    store: Any, real: RealNodes, subchunk_m: int | None, storage: Any, max_segment_mb: int | None = None
) -> None:
    """The collection with the real store's layout (``subchunk_m``: an HNSW graph on the sub-chunks), its vectors
    kept as the arm ``storage`` of :mod:`research.storage_arms` says (``max_segment_mb``: Qdrant's
    ``max_segment_size``, so that no optimization merges segments past it)."""
    from research.storage_arms import arm_vectors

    vectors = arm_vectors(dict(real.config["vectors_config"]), storage)
    if subchunk_m is not None:
        hnsw = models.HnswConfigDiff(m=subchunk_m)
        vectors["subchunks"] = vectors["subchunks"].model_copy(update={"hnsw_config": hnsw})
    store.create_collection(
        COLLECTION,
        vectors_config=vectors,
        sparse_vectors_config=real.config["sparse_vectors_config"],
        metadata=real.config["metadata"],
        optimizers_config=models.OptimizersConfigDiff(max_segment_size=max_segment_mb * 1024)
        if max_segment_mb
        else None,
    )


def build(n: int, real: RealNodes, pool_: Pool, args: argparse.Namespace, work: Path) -> Built:
    """Real nodes at random positions among ``n - len(real)`` distractors; upserts timed apart from generation.

    With ``args.index_every``, the index is built each time that many more points are written (so that one
    optimization rewrites only those), and ``index_s`` sums every build."""
    from qdrant_tools.sparse import SPARSE_VECTOR
    from qdrant_tools.store import open_store
    from qdrant_tools.subchunks import FUSED_VECTOR, SUBCHUNK_VECTOR

    rng = np.random.default_rng(args.seed)
    node_name = next(k for k in real.vectors[0] if k not in (SUBCHUNK_VECTOR, SPARSE_VECTOR, FUSED_VECTOR))
    ids = rng.permutation(n)  # point ids: the real nodes' first, then the distractors'
    doc_of = {int(ids[i]): d for i, d in enumerate(real.docs)}
    folder = work / f"n{n}"
    store = open_store(folder, auto_index=False)
    create(store, real, args.subchunk_m, args.storage, args.max_segment_mb)
    real_batches = [
        list(zip(real.vectors[s : s + 256], real.payloads[s : s + 256])) for s in range(0, len(real.docs), 256)
    ]
    write_s, index_s, row, indexed = 0.0, 0.0, 0, 0
    for batch in itertools.chain(real_batches, distractors(pool_, n - len(real.docs), rng, args, node_name)):
        points = [models.PointStruct(id=int(ids[row + i]), vector=v, payload=p) for i, (v, p) in enumerate(batch)]
        t0 = time.perf_counter()
        store.upsert(COLLECTION, points)
        write_s += time.perf_counter() - t0
        row += len(batch)
        if args.index_every and row - indexed >= args.index_every:
            index_s += store.build_index(COLLECTION)
            indexed = row
    index_s += store.build_index(COLLECTION)
    return Built(store, folder, n, doc_of, write_s, index_s)


# ------------------------------------------------------------------ queries
@dataclass
class Queries:
    """Both benchmarks' ``test`` queries: dense and BM25 vectors, judgements and position groups."""

    ids: list[str]  # "benchmark/query_id"
    dense: np.ndarray
    sparse: list[Any]
    qrels: dict[str, dict[str, float]]
    groups: dict[str, str]


def load_queries(encoder: Any) -> Queries:
    from qdrant_tools.sparse import Bm25Sparse
    from research.eval.benchmarks.loaders import load_shipped

    bm25, out = Bm25Sparse(), Queries([], np.zeros((0, 0)), [], {}, {})
    texts = []
    for name in BENCHMARKS:
        bench = load_shipped(name, "test")
        for qid, text in bench.queries.items():
            key = f"{name}/{qid}"
            out.ids.append(key)
            texts.append(text)
            out.qrels[key] = {f"{name}/{d}": g for d, g in bench.qrels[qid].items()}
            if qid in bench.groups:
                out.groups[key] = bench.groups[qid]
    out.dense = np.asarray(encoder.encode_queries(texts), dtype=np.float32)
    out.sparse = [bm25.embed_query(t) for t in texts]
    return out


def searcher(built: Built, settings: Any) -> Any:
    """``(query vector, BM25 query) -> ranked point ids`` through ``qdrant_tools.search.search``."""
    from qdrant_tools.search import collection_vectors, search

    vectors = collection_vectors(built.store, COLLECTION)
    return lambda q, sq: [
        int(h.id) for h in search(built.store, COLLECTION, q, settings, vectors=vectors, sparse_query=sq)
    ]


def exhaustive(built: Built, settings: Any) -> Any:
    """The same ranking as :func:`searcher` with every node a candidate, found by an exact scan (``exact=True``,
    no index), each re-scored by MaxSim and by node cosine: every node's node-weighted score is exact, then its top
    ``max(limit, fusion_limit)`` is fused with BM25's as ``search`` fuses them."""
    from qdrant_tools.search import collection_vectors, node_weighted_formula

    vectors = collection_vectors(built.store, COLLECTION)
    node, depth = vectors.node_vector(settings.vector), max(settings.limit, settings.fusion_limit)

    def ask(q: np.ndarray, sq: Any) -> list[int]:
        ql = (q / np.linalg.norm(q)).tolist()
        exact = models.SearchParams(exact=True)  # re-scoring many candidates could otherwise go through an index
        every = models.Prefetch(query=ql, using=node, limit=built.n, params=exact)
        sub = models.Prefetch(prefetch=every, query=[ql], using=vectors.subchunks, limit=built.n, params=exact)
        cos = models.Prefetch(prefetch=every, query=ql, using=node, limit=built.n, params=exact)
        dense = models.Prefetch(prefetch=[sub, cos], query=node_weighted_formula(settings.node_weight), limit=depth)
        arms = [dense, models.Prefetch(query=sq, using=vectors.sparse, limit=depth)]
        query = settings.fusion_query()
        return [int(p.id) for p in built.store.query_points(COLLECTION, prefetch=arms, query=query, limit=100).points]

    return ask


class GcClock:
    """Milliseconds Python's cyclic garbage collector has run so far (through ``gc.callbacks``): a pause of the
    bench process, whose heap holds the builder's data, shows up in a query's time without being the store's."""

    def __init__(self) -> None:
        self.ms = 0.0
        self._start = 0.0
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.ms += 1000 * (time.perf_counter() - self._start)


GC_CLOCK = GcClock()


def answer(queries: Queries, ask: Any, label: str | None = None) -> tuple[list[list[int]], np.ndarray]:
    """Each query's ranked point ids from ``ask`` and its milliseconds (after one warm-up query); with ``label``,
    print the slowest queries and the garbage collector's share of each."""
    ask(queries.dense[0], queries.sparse[0])
    ranked, ms, gc_ms = [], np.zeros(len(queries.ids)), np.zeros(len(queries.ids))
    for i, (q, sq) in enumerate(zip(queries.dense, queries.sparse)):
        t0, g0 = time.perf_counter(), GC_CLOCK.ms
        ranked.append(ask(q, sq))
        ms[i], gc_ms[i] = 1000 * (time.perf_counter() - t0), GC_CLOCK.ms - g0
    if label is not None:
        slow = np.argsort(-ms)[:5]
        cells = ", ".join(f"#{i} {ms[i]:.1f} (GC {gc_ms[i]:.1f})" for i in slow)
        first = ", ".join(f"{x:.1f}" for x in ms[:5])
        print(
            f"  {label}: slowest queries (#order), ms: {cells}; first five {first}; GC {gc_ms.sum():.0f} ms in all",
            flush=True,
        )
    return ranked, ms


def ndcg(built: Built, queries: Queries, ranked: list[list[int]]) -> dict[str, tuple[float, float]]:
    """Per benchmark: (mean, harmonic over position groups) nDCG@10 of documents ranked by their best node."""
    from llamaindex_posfair.eval.metrics import group_scores, harmonic_mean, ndcg_at_k

    out = {}
    for name in BENCHMARKS:
        values = {}
        for qid, ids in zip(queries.ids, ranked):
            if qid.startswith(f"{name}/"):
                docs = list(dict.fromkeys(built.doc_of.get(i, f"distractor/{i}") for i in ids))
                values[qid] = ndcg_at_k(docs, queries.qrels[qid], K)
        out[name] = (float(np.nanmean(list(values.values()))), harmonic_mean(group_scores(values, queries.groups)))
    return out


def recall(got: list[list[int]], want: list[list[int]], keep: Any = None) -> float:
    """Share of the exhaustive top ``K`` found in the top ``K`` (mean over queries); ``keep``: count only these
    nodes of the exhaustive top ``K`` (pooled over queries, as a query's top ``K`` may hold none)."""
    if keep is None:
        return float(np.mean([len(set(g[:K]) & set(w[:K])) / max(1, len(w[:K])) for g, w in zip(got, want)]))
    found = total = 0
    for g, w in zip(got, want):
        kept = {i for i in w[:K] if i in keep}
        found, total = found + len(kept & set(g[:K])), total + len(kept)
    return found / total if total else float("nan")


@dataclass
class Row:
    n: int
    variant: str
    recall: float
    real_recall: float  # the same, counting only the benchmarks' real nodes of the exhaustive top 10
    ndcg: dict[str, tuple[float, float]]
    ndcg_exact: dict[str, tuple[float, float]]
    p50: float
    p99: float
    exact_p50: float
    write_per_s: float
    index_s: float
    ram_per_node: float
    anon_per_node: float
    disk_per_node: float
    load: str


def spread(queries: Queries, n: int | None) -> tuple[Queries, list[int]]:
    """``n`` of the queries spread evenly over the list (both benchmarks), and their places; ``None``: all."""
    if n is None or n >= len(queries.ids):
        return queries, list(range(len(queries.ids)))
    keep = sorted({int(i) for i in np.linspace(0, len(queries.ids) - 1, n)})
    sub = Queries(
        [queries.ids[i] for i in keep],
        queries.dense[keep],
        [queries.sparse[i] for i in keep],
        queries.qrels,
        queries.groups,
    )
    return sub, keep


def measure(
    built: Built,
    queries: Queries,
    variants: dict[str, Any],
    exact: Any,
    exact_queries: int | None = None,
    peaks: MemoryPeaks | None = None,
) -> list[Row]:
    """Every variant's answers against the exhaustive search of the same collection (over ``exact_queries`` of
    the queries, spread over both benchmarks: :func:`spread`; recall is over those)."""
    from research.default_pipeline.system import cpu_load

    answers = {}
    for label, settings in variants.items():  # before the exhaustive scan, which pages in every vector
        got, ms = answer(queries, searcher(built, settings), label)
        ram = [(rss_mb() - built.rss_before) * 1e6 / built.n, (anon_mb() - built.anon_before) * 1e6 / built.n]
        answers[label] = got, ms, ram
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"  peak RSS up to the searches (build included, before the exhaustive reference): {peak:.1f} GB", flush=True)
    if peaks is not None:
        print(f"  {peaks.describe()}", flush=True)
    sub, keep = spread(queries, exact_queries)
    if len(keep) < len(queries.ids):
        print(f"  exhaustive reference over {len(keep)} of {len(queries.ids)} queries", flush=True)
    want, exact_ms = answer(sub, exhaustive(built, exact))
    reference = ndcg(built, sub, want)
    rows = []
    for label, (got, ms, (ram, anon)) in answers.items():
        scored = [got[i] for i in keep]  # the answers to the queries the reference scored
        rows.append(
            Row(
                built.n,
                label,
                recall(scored, want),
                recall(scored, want, keep=built.doc_of),
                ndcg(built, queries, got),
                reference,
                float(np.percentile(ms, 50)),
                float(np.percentile(ms, 99)),
                float(np.percentile(exact_ms, 50)),
                built.n / built.write_s,
                built.index_s,
                ram,
                anon,
                folder_mb(built.folder) * 1e6 / built.n,
                cpu_load(),
            )
        )
    return rows


# ------------------------------------------------------------------ main
def table(rows: list[Row]) -> str:
    head = (
        "| nodes | search | recall@10 vs exhaustive | real nodes' recall@10 | needle nDCG@10 mean / harmonic (exhaustive) "
        "| natural-docs nDCG@10 mean / harmonic (exhaustive) | p50 ms | p99 ms | exhaustive p50 ms "
        "| write nodes/s | index s | RAM B/node | of it anonymous | disk B/node | load |\n" + "|---" * 15 + "|\n"
    )

    def cell(r: Row, name: str) -> str:
        (m, h), (em, eh) = r.ndcg[name], r.ndcg_exact[name]
        return f"{100 * m:.1f} / {100 * h:.1f} ({100 * em:.1f} / {100 * eh:.1f})"

    return head + "\n".join(
        f"| {r.n:,} | {r.variant} | {r.recall:.3f} | {r.real_recall:.3f} | {cell(r, BENCHMARKS[0])} | {cell(r, BENCHMARKS[1])} "
        f"| {r.p50:.1f} | {r.p99:.1f} | {r.exact_p50:.1f} | {r.write_per_s:,.0f} | {r.index_s:.1f} "
        f"| {r.ram_per_node:,.0f} | {r.anon_per_node:,.0f} | {r.disk_per_node:,.0f} | {r.load} |"
        for r in rows
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000", help="collection sizes in nodes, e.g. 10000,100000")
    ap.add_argument("--prefetch", default="", help="also run these node-vector prefetch limits, e.g. 300,1000")
    ap.add_argument("--exact", action="store_true", help="also run exact scoring at every size (exact_up_to = size)")
    ap.add_argument("--subchunk-m", type=int, default=None, help="HNSW m of the sub-chunk multivector (default: 0)")
    ap.add_argument(
        "--fused",
        type=float,
        default=None,
        help="node weight of the fused multivector (default: the recipe's, Recipe.default(); 0 = the layout without)",
    )
    ap.add_argument(
        "--storage",
        default=None,
        help="how the vectors are kept: a row of research.storage_arms.ARMS, by number or label "
        "(default: the shipped layout's row, research.storage_arms.SHIPPED; 0 = the float layout)",
    )
    ap.add_argument("--per-node", type=int, default=10, help="sub-chunks per distractor node")
    ap.add_argument("--jitter", type=float, default=0.1, help="norm of the noise added to a drawn sub-chunk vector")
    ap.add_argument(
        "--no-warm",
        action="store_true",
        help="reopen the store without reading its files into the page cache (open_store(warm=False))",
    )
    ap.add_argument(
        "--exact-queries",
        type=int,
        default=None,
        help="score only this many queries (spread over both benchmarks) exhaustively for the recall reference "
        "(default: all; the exhaustive scan reads every vector for each query)",
    )
    ap.add_argument(
        "--index-every",
        type=int,
        default=None,
        help="build the index each time this many more points are written (default: once, after all writes)",
    )
    ap.add_argument(
        "--max-segment-mb",
        type=int,
        default=None,
        help="Qdrant's max_segment_size in MB: no optimization merges segments past it (default: Qdrant's)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default="~/.cache/llamaindex_posfair/scale", help="embedding memo folder")
    return ap.parse_args(argv)


def variants(n: int, args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    """The default search, the large-collection query at any size and its ``--prefetch`` variants; and the
    settings :func:`exhaustive` scores every node with (the default's)."""
    from dataclasses import replace

    from qdrant_tools.search import SearchSettings

    default = SearchSettings().overridden(limit=100)  # the harness' depth: documents are ranked from 100 nodes
    candidates = replace(default, exact_up_to=0)  # the query of collections above exact_up_to, at any size
    out = {f"default (exact_up_to={default.exact_up_to:,})": default, "candidates (exact_up_to=0)": candidates}
    if args.exact:
        out[f"exact (exact_up_to={n:,})"] = replace(default, exact_up_to=n)
    for p in (int(x) for x in args.prefetch.split(",") if x):
        out[f"candidates, P={p}"] = replace(candidates, prefetch_limit=p, prefetch_max=None)
    return out, default


def main(argv: list[str] | None = None) -> None:
    from llamaindex_posfair.encoders.spec import EncoderSpec
    from research.default_pipeline.system import cpu_load
    from research.eval.memo import MemoEncoder, VectorMemo

    args = parse_args(argv)
    from llamaindex_posfair.integrations.recipe import Recipe
    from research.storage_arms import ARMS, SHIPPED

    by_label = {a.label: a for a in ARMS}
    args.storage = by_label.get(args.storage) or ARMS[SHIPPED if args.storage is None else int(args.storage)]
    print(f"storage: {args.storage.label}", flush=True)

    layout = Recipe.default().layout  # the layout posfair ingest writes
    args.fused = layout.fused_weight if args.fused is None else (args.fused or None)
    print(f"load average before: {cpu_load()} ({os.cpu_count()} CPUs)", flush=True)
    encoder = MemoEncoder(EncoderSpec(calibration=None).load(device="cpu"), VectorMemo(Path(args.cache).expanduser()))
    t0 = time.perf_counter()
    real, pool_ = real_nodes(encoder, args.fused, layout.node_quantization), pool(encoder)
    queries = load_queries(encoder)
    print(
        f"fused multivector: {'none' if args.fused is None else f'node weight {args.fused:g}'}; "
        f"real nodes {len(real.docs):,}; pool {len(pool_.texts):,} sub-chunks; {len(queries.ids)} queries; "
        f"prepared in {time.perf_counter() - t0:.0f} s (embedding charged {encoder.charged_seconds:.0f} s)",
        flush=True,
    )
    rows = []
    with MemoryPeaks() as peaks:
        for n in (int(x) for x in args.sizes.split(",")):
            rows += measure_size(n, real, pool_, queries, args, peaks)
            print(table(rows), flush=True)
        print(f"\n{peaks.describe()}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"peak RSS {peak:.1f} GB; load average after: {cpu_load()}")


def measure_size(
    n: int, real: RealNodes, pool_: Pool, queries: Queries, args: argparse.Namespace, peaks: MemoryPeaks
) -> list[Row]:
    """Build, reopen and measure one collection of ``n`` nodes; its rows."""
    work = Path(tempfile.mkdtemp(prefix="posfair-scale-"))
    try:
        built = build(n, real, pool_, args, work)
        segments = built.store.get_collection(COLLECTION).segments_count
        print(
            f"{n:,} nodes: written in {built.write_s:.1f} s, indexed in {built.index_s:.1f} s, {segments} segments; "
            f"{peaks.describe()}",
            flush=True,
        )
        built.reopen(not args.no_warm)
        print(f"{n:,} nodes: reopened in {built.open_s:.1f} s ({'cold' if args.no_warm else 'warmed'})", flush=True)
        rows = measure(built, queries, *variants(n, args), exact_queries=args.exact_queries, peaks=peaks)
        built.store.close()
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
