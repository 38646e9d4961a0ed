"""How should the sub-chunk layout be searched in Qdrant? Recall against exact MaxSim, latency, build cost.

Every alternative holds the *same* vectors: the corpus is ingested once by
``posfair ingest``'s own code (:class:`research.default_pipeline.system.StoreIndex`:
254-token nodes, ``SubchunkConfig()``, the bundled all-MiniLM-L6-v2 with
calibration off), the stored vectors are read back, and the other layouts are
written from them into the shipped embedded default, Qdrant Edge
(``open_store(folder)``):

* **A** today's layout: node-vector HNSW prefetch (limit P) re-scored by MaxSim over the
  sub-chunk multivector (``m=0``), one ``query_points`` through :func:`qdrant_tools.search.search`
  (what ships);
* **B** the sub-chunk multivector *with* an HNSW graph (default ``m``), queried directly by MaxSim;
* **C** one point per sub-chunk (dense HNSW vector, payload ``node``), grouped by node with the
  store's ``query_points_groups`` (the Edge wrapper groups client-side, re-querying a longer ranking
  until the groups are full: :mod:`qdrant_tools.store.groups`);
* **D** A with P a fraction of the nodes; and, on B's collection, one ``query_points`` whose prefetch
  list draws from both the node vector (P) and the indexed multivector (L), re-scored by MaxSim.

Reported per row: recall@10 of nodes against exact MaxSim in numpy over every stored sub-chunk vector,
query p50/p99 ms (query embedding excluded), the store's write + index seconds (embeddings memoised;
the cold embedding time is stated once, it is the same for every layout), float32 vector bytes per
node and the folder's allocated size. For A, a note gives the recall of the same two-stage query in
numpy with an exact node prefetch (the design's ceiling, whatever HNSW does).

Corpus: all shipped prose — needle-prose dev+test passages, As You Like It, ``examples/data``, the
DUMP pairs' texts and the repository's docs — cut into ~2,200-character passages (the needle passages'
size) where longer; queries are needle-prose dev+test. ``--passages N`` takes the first N passages
(needle first); more than the shipped prose needs ``--extra DIR`` (.txt/.md files, cut the same way).
Embeddings are memoised under ``--cache`` (default ``~/.cache/llamaindex_posfair/subidx``).

Usage::

    nice -n 5 python research/bench/subchunk_index.py                      # all shipped prose
    nice -n 5 python research/bench/subchunk_index.py --passages 400       # smaller
    nice -n 5 python research/bench/subchunk_index.py --extra ~/corpus     # more passages from your own prose
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np
from qdrant_client import models

ROOT = Path(__file__).resolve().parents[2]
PASSAGE_CHARS = 2200
K = 10


# ------------------------------------------------------------------ corpus
def cut_passages(text: str, target: int = PASSAGE_CHARS) -> list[str]:
    """Paragraphs packed into passages of about ``target`` characters (a longer paragraph stays whole)."""
    out, cur = [], ""
    for para in (p.strip() for p in text.split("\n\n")):
        if not para:
            continue
        if cur and len(cur) + len(para) > target:
            out.append(cur)
            cur = ""
        cur = f"{cur}\n\n{para}" if cur else para
    if cur:
        out.append(cur)
    return out


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in (".txt", ".md") and p.is_file())


def prose_pool(extra: Path | None) -> list[tuple[str, str, str]]:
    """Every available passage as ``(doc_id, text, source)``, needle-prose first."""
    from research.eval.benchmarks.loaders import load_shipped

    pool = []
    for split in ("dev", "test"):
        pool += [(f"needle/{split}/{d}", t, "needle-prose") for d, t in load_shipped(split=split).corpus.items()]
    folders = [
        ("as-you-like-it", ROOT / "llamaindex_posfair/data/dump/as_you_like_it"),
        ("examples", ROOT / "examples/data"),
    ]
    for source, folder in folders:
        for f in _files(folder):
            pool += [(f"{source}/{f.name}#{i}", t, source) for i, t in enumerate(cut_passages(f.read_text()))]
    seen: set[str] = set()
    for name in ("train", "test"):
        for i, line in enumerate((ROOT / f"llamaindex_posfair/data/dump/{name}.jsonl").read_text().splitlines()):
            for key, text in json.loads(line).items():
                if key != "query" and text not in seen:
                    seen.add(text)
                    pool.append((f"dump/{name}/{i}/{key}", text, "dump-pairs"))
    for f in [ROOT / "README.md", *_files(ROOT / "docs")]:
        pool += [(f"docs/{f.name}#{i}", t, "repo-docs") for i, t in enumerate(cut_passages(f.read_text()))]
    if extra is not None:
        for f in _files(extra):
            pool += [
                (f"extra/{f.relative_to(extra)}#{i}", t, "extra") for i, t in enumerate(cut_passages(f.read_text()))
            ]
    return pool


def needle_queries() -> list[str]:
    from research.eval.benchmarks.loaders import load_shipped

    return [q for split in ("dev", "test") for q in load_shipped(split=split).queries.values()]


# ------------------------------------------------------------------ measuring
@dataclass
class Row:
    name: str
    recall: float
    p50: float
    p99: float
    build_s: float
    bytes_per_node: float
    store_mb: float
    note: str


def _folder_mb(folder: Path) -> float:
    return sum(f.stat().st_blocks * 512 for f in folder.rglob("*") if f.is_file()) / 1e6  # allocated, not sparse


def timed_answers(
    queries: np.ndarray, n_nodes: int, ask: Callable[[np.ndarray], list[tuple[int, float]]]
) -> tuple[np.ndarray, np.ndarray]:
    """``[n_queries, n_nodes]`` scores (``-inf`` where not returned) and per-query milliseconds."""
    ask(queries[0])  # warm-up
    out = np.full((len(queries), n_nodes), -np.inf)
    ms = np.zeros(len(queries))
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        hits = ask(q)
        ms[i] = 1000 * (time.perf_counter() - t0)
        for row, score in hits:
            out[i, row] = max(out[i, row], score)
    return out, ms


def measure(name, queries, exact, ask, build_s, bytes_per_node, folder, note="") -> Row:
    from research.default_pipeline.system import prefetch_recall

    scores, ms = timed_answers(queries, exact.shape[1], ask)
    return Row(
        name,
        prefetch_recall(scores, exact, K),
        float(np.percentile(ms, 50)),
        float(np.percentile(ms, 99)),
        build_s,
        bytes_per_node,
        _folder_mb(folder),
        note,
    )


# ------------------------------------------------------------------ the layouts
def write_points(client, collection: str, ids, vectors: dict[str, list], payloads) -> float:
    """Upsert in batches of 256 and build the index; seconds taken."""
    t0 = time.perf_counter()
    for s in range(0, len(ids), 256):
        part = {k: v[s : s + 256] for k, v in vectors.items()}
        client.upsert(collection, models.Batch(ids=ids[s : s + 256], vectors=part, payloads=payloads[s : s + 256]))
    client.build_index(collection)
    return time.perf_counter() - t0


def subchunk_params(dim: int, m: int | None) -> models.VectorParams:
    """The sub-chunk multivector as ``posfair ingest`` declares it (``qdrant_tools.spec.VectorConfig``), HNSW ``m``."""
    from qdrant_tools.spec import HnswSpec, VectorConfig

    hnsw = None if m is None else HnswSpec(m=m)
    return VectorConfig(name="subchunks", size=dim, multivector=True, hnsw=hnsw).to_qdrant()


def build_b(client, v, node_name: str, collection: str = "b", m: int | None = None) -> float:
    """B: node vector + sub-chunk multivector with an HNSW graph (default m; ``m=0``: today's layout)."""
    dim = v.node.shape[1]
    client.create_collection(
        collection,
        vectors_config={
            node_name: models.VectorParams(size=dim, distance=models.Distance.COSINE),
            "subchunks": subchunk_params(dim, m),
        },
    )
    subs = [v.sub[v.owner == i].tolist() for i in range(len(v.ids))]
    payloads = [{"node": i} for i in range(len(v.ids))]
    return write_points(client, collection, v.ids, {node_name: v.node.tolist(), "subchunks": subs}, payloads)


def build_c(client, v) -> float:
    """C: one point per sub-chunk (dense HNSW vector), payload ``node`` (integer index)."""
    client.create_collection("c", vectors_config={"sub": models.VectorParams(size=v.sub.shape[1], distance="Cosine")})
    client.create_payload_index("c", "node", field_schema="integer")
    payloads = [{"node": int(o)} for o in v.owner]
    return write_points(client, "c", list(range(len(v.owner))), {"sub": v.sub.tolist()}, payloads)


def ask_search(index, settings):
    from qdrant_tools.search import collection_vectors, search

    vectors = collection_vectors(index.client, "pipeline")
    return lambda q: [
        (index.row_of[h.id], h.rank_score) for h in search(index.client, "pipeline", q, settings, vectors=vectors)
    ]


def ask_b(client, ef: int | None = None):
    params = models.SearchParams(hnsw_ef=ef) if ef else None

    def ask(q):
        pts = client.query_points("b", query=[q.tolist()], using="subchunks", limit=K, search_params=params).points
        return [(p.payload["node"], p.score) for p in pts]

    return ask


def ask_c(client, ef: int | None = None):
    params = models.SearchParams(hnsw_ef=ef) if ef else None

    def ask(q):
        res = client.query_points_groups(
            "c", group_by="node", query=q.tolist(), using="sub", limit=K, group_size=1, search_params=params
        )
        return [(int(g.id), g.hits[0].score) for g in res.groups]

    return ask


def ask_d(client, node_name: str, p: int, multi_limit: int):
    """One query_points: prefetch [node vector (p), indexed multivector (multi_limit)] re-scored by MaxSim."""

    def ask(q):
        ql = q.tolist()
        prefetch = [
            models.Prefetch(query=ql, using=node_name, limit=p),
            models.Prefetch(query=[ql], using="subchunks", limit=multi_limit),
        ]
        pts = client.query_points("b", prefetch=prefetch, query=[ql], using="subchunks", limit=K).points
        return [(p.payload["node"], p.score) for p in pts]

    return ask


# ------------------------------------------------------------------ main
def scan_latency(n_nodes: int, per_node: int, n_queries: int = 50, dim: int = 384) -> str:
    """p50/p99 ms of the exact MaxSim scan (``search()`` default) on random vectors: how it grows with size."""
    from qdrant_tools.search import search
    from qdrant_tools.store import open_store
    from research.default_pipeline.system import HARNESS_SEARCH

    rng = np.random.default_rng(0)
    folder = Path(tempfile.mkdtemp(prefix="posfair-scan-"))
    store = open_store(folder)
    try:
        store.create_collection(
            "s",
            vectors_config={
                "vanilla": models.VectorParams(size=dim, distance=models.Distance.COSINE),
                "subchunks": subchunk_params(dim, 0),
            },
        )
        for s in range(0, n_nodes, 256):
            k = min(256, n_nodes - s)
            node = rng.normal(size=(k, dim)).astype(np.float32)
            subs = rng.normal(size=(k, per_node, dim)).astype(np.float32)
            vecs = {"vanilla": node.tolist(), "subchunks": [x.tolist() for x in subs]}
            store.upsert("s", models.Batch(ids=list(range(s, s + k)), vectors=vecs, payloads=[{}] * k))
        store.build_index("s")
        settings = HARNESS_SEARCH.overridden(limit=K, exact_up_to=n_nodes)
        ms = []
        for q in rng.normal(size=(n_queries + 1, dim)).astype(np.float32):
            t0 = time.perf_counter()
            search(store, "s", q, settings)
            ms.append(1000 * (time.perf_counter() - t0))
        ms = ms[1:]
        return (
            f"| {n_nodes:,} | {per_node} | {n_nodes * per_node:,} | {np.percentile(ms, 50):.1f} "
            f"| {np.percentile(ms, 99):.1f} |"
        )
    finally:
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=None, help="first N passages of the pool (default: all)")
    ap.add_argument("--extra", type=Path, default=None, help="folder of more .txt/.md prose for the pool")
    ap.add_argument("--prefetch", default="100,300,1000", help="A: prefetch limits")
    ap.add_argument("--fractions", default="0.1,0.25,0.5", help="D: prefetch limits as fractions of the nodes")
    ap.add_argument("--cache", default="~/.cache/llamaindex_posfair/subidx", help="embedding memo folder")
    ap.add_argument("--skip-b", action="store_true", help="skip the multivector HNSW (slow to build at scale)")
    ap.add_argument(
        "--scan-sizes",
        default="",
        help="also time the exact scan on random vectors, e.g. 10000x8,30000x8 (nodes x sub-chunks per node)",
    )
    return ap.parse_args(argv)


def load_data(args):
    from llamaindex_posfair.encoders.spec import EncoderSpec
    from research.eval.memo import MemoEncoder, VectorMemo

    pool = prose_pool(args.extra)
    if args.passages is not None and args.passages > len(pool):
        print(f"> asked for {args.passages} passages; only {len(pool)} are available (add prose with --extra DIR)")
    pool = pool[: args.passages] if args.passages else pool
    encoder = MemoEncoder(EncoderSpec(calibration=None, dtype=None).load(device="cpu"), VectorMemo(args.cache))
    return pool, encoder


def run(args) -> list[Row]:
    from qdrant_tools.layout import NodeLayout
    from qdrant_tools.subchunks import SubchunkConfig
    from research.default_pipeline.system import HARNESS_SEARCH, StoreIndex, node_scores, prefetch_recall

    pool, encoder = load_data(args)
    queries = np.asarray(encoder.encode_queries(needle_queries()), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    index = StoreIndex.build(
        encoder,
        [t for _, t, _ in pool],
        [d for d, _, _ in pool],
        NodeLayout(chunk_tokens=254, subchunks=SubchunkConfig(), fused_weight=None, node_quantization=None),
    )
    v = index.vectors
    n, n_sub, dim = len(v.ids), len(v.owner), v.node.shape[1]
    exact = node_scores(v, queries)
    sources: dict[str, int] = {}
    for _, _, s in pool:
        sources[s] = sources.get(s, 0) + 1
    print(
        f"corpus: {len(pool)} passages ({', '.join(f'{k} {c}' for k, c in sources.items())}), {n} nodes, "
        f"{n_sub} sub-chunks ({n_sub / n:.1f}/node); {len(queries)} queries (needle-prose dev+test)"
    )
    print(f"embedding (cold, memoised after): {encoder.charged_seconds:.1f}s; chunks {SubchunkConfig()}")
    node_bytes, sub_bytes = 4 * dim, 4 * dim * n_sub / n
    a_build = index.ingest_seconds - encoder.charged_seconds
    rows = []
    limits = [int(x) for x in args.prefetch.split(",")] + [
        max(K, round(float(f) * n)) for f in args.fractions.split(",") if f
    ]
    for p in limits:
        name = f"A: node prefetch P={p} ({p / n:.0%} of nodes) → MaxSim (search(), exact_up_to=0)"
        ask = ask_search(index, HARNESS_SEARCH.overridden(limit=K, prefetch_limit=p, exact_up_to=0))
        ceiling = prefetch_recall(node_scores(v, queries, prefetch_limit=p), exact, K)
        note = f"numpy, exact node prefetch: {ceiling:.3f}"
        rows.append(measure(name, queries, exact, ask, a_build, node_bytes + sub_bytes, index.folder, note))
    name = f"A0: today's collection (m=0), exact MaxSim scan, no prefetch (search() default, {n} ≤ exact_up_to)"
    ask = ask_search(index, HARNESS_SEARCH.overridden(limit=K))
    rows.append(measure(name, queries, exact, ask, a_build, node_bytes + sub_bytes, index.folder))
    work = Path(tempfile.mkdtemp(prefix="posfair-subidx-"))
    try:
        rows += run_b_c_d(args, work, v, index, queries, exact, node_bytes, sub_bytes)
    finally:
        index.close()
        shutil.rmtree(work, ignore_errors=True)
    return rows


def run_b_c_d(args, work, v, index, queries, exact, node_bytes, sub_bytes) -> list[Row]:
    from qdrant_tools.store import open_store

    node_name = "vanilla"  # the node vector posfair ingest writes with calibration off
    rows = []
    c_dir = work / "c"
    store_c = open_store(c_dir)
    c_s = build_c(store_c, v)
    for ef in (None, 256):
        name = f"C: sub-chunk points, query_points_groups(node) top-{K} groups" + (f", hnsw_ef={ef}" if ef else "")
        rows.append(measure(name, queries, exact, ask_c(store_c, ef), c_s, sub_bytes, c_dir, "grouped client-side"))
    store_c.close()
    if args.skip_b:
        return rows
    b_dir = work / "b"
    store_b = open_store(b_dir)
    store_a2 = open_store(work / "a2")
    a2_s = build_b(store_a2, v, node_name, "a2", m=0)
    store_a2.close()
    b_s = build_b(store_b, v, node_name)
    note = f"A's layout written the same way: {a2_s:.1f}s"
    for ef in (None, 256):
        name = "B: multivector HNSW (m=16), MaxSim directly" + (f", hnsw_ef={ef}" if ef else "")
        rows.append(measure(name, queries, exact, ask_b(store_b, ef), b_s, node_bytes + sub_bytes, b_dir, note))
    for p, lim in ((100, 100), (100, 300)):
        name = f"D: prefetch [node P={p}, multivector HNSW L={lim}] → MaxSim"
        ask = ask_d(store_b, node_name, p, lim)
        rows.append(measure(name, queries, exact, ask, b_s, node_bytes + sub_bytes, b_dir))
    store_b.close()
    return rows


def table(rows: list[Row]) -> str:
    head = (
        "| layout / query | recall@10 vs exact MaxSim | p50 ms | p99 ms | write+index s | vector bytes/node "
        "| store MB | note |\n|---|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(
        f"| {r.name} | {r.recall:.3f} | {r.p50:.2f} | {r.p99:.2f} | {r.build_s:.1f} | {r.bytes_per_node:,.0f} "
        f"| {r.store_mb:.1f} | {r.note} |"
        for r in rows
    )


def main(argv=None) -> None:
    from research.default_pipeline.system import cpu_load

    args = parse_args(argv)
    print(f"load average before: {cpu_load()} ({os.cpu_count()} CPUs)")
    if args.scan_sizes:
        print("\n| nodes | sub-chunks/node | sub-chunk vectors | exact scan p50 ms | p99 ms |\n|---|---|---|---|---|")
        for size in args.scan_sizes.split(","):
            n_nodes, per_node = (int(x) for x in size.split("x"))
            print(scan_latency(n_nodes, per_node), flush=True)
        if args.passages == 0:
            return
    rows = run(args)
    print()
    print(table(rows))
    print(f"\nload average after: {cpu_load()}")


if __name__ == "__main__":
    main()
