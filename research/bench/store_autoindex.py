"""Automatic indexing of the embedded Edge store: plain upserts, no build_index, then search.

Upserts ``--points`` vectors (default 100,000 x 384 dims) in batches of ``--batch``
(256) through ``EdgeStore.upsert`` into a collection created with the defaults a
LlamaIndex ``QdrantVectorStore`` uses (cosine, Qdrant's default HNSW and
``indexing_threshold`` 10,000 KB = 6,667 points of 384 dims), never calling
``build_index``. Prints:

* upsert throughput and the longest single upsert (the writer's worst wait);
* the time from the last upsert until the background indexer has caught up
  (``wait_for_index``), with the indexed / total vectors and segments then;
* p50 / p99 of ``query_points(limit=10)`` and recall@10 against exact brute force
  (numpy) over exactly the inserted points, for ``--queries`` (200) queries.

Data: ``--data random`` (default): i.i.d. Gaussian vectors normalised to unit
length, a hard case for HNSW (no structure to exploit); ``--data clustered``:
"real-like" unit vectors around 1,000 random centres (Gaussian noise of norm
~0.8 of the centre), closer to text embeddings, which lie near a lower-dimensional
set; queries for both are drawn like the data. ``--data real``: real
all-MiniLM-L6-v2 sentence embeddings read from the embedding memo on disk
(:class:`research.eval.memo.VectorMemo`, one ``<fingerprint>-<role>``
folder of ``.npz`` shards per bucket) in each ``--memo DIR`` (default
``/tmp/sweep/memo`` and ``~/.cache/llamaindex_posfair/scale``): every stored vector
of every fingerprint and role whose dimension is ``--dim``, identical rows once,
unit-normalised. ``--queries`` of them are held out first (query-role vectors
preferred, then document vectors) and never inserted. If fewer than ``--points``
real vectors remain, the rest are *jittered copies*: a real vector drawn at random
plus Gaussian noise of norm ``--jitter`` (0.1), renormalised; the header and the
table say how many points are real and how many are jittered copies.
``--pause-s`` sleeps after each upsert (a writer that embeds between batches:
builds then start in its pauses, so upserts may wait for them).

Example:
    nice -n 5 .venv/bin/python research/bench/store_autoindex.py            # the table in docs/storage.md
    .venv/bin/python research/bench/store_autoindex.py --points 20000 --dim 64
    nice -n 5 .venv/bin/python research/bench/store_autoindex.py --data real  # memo vectors (+ jittered copies)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from qdrant_client import models

from qdrant_tools.store import EdgeStore, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from research.eval.memo import VectorMemo

DEFAULT_MEMOS = ["/tmp/sweep/memo", "~/.cache/llamaindex_posfair/scale"]


def make_vectors(kind: str, n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":
        x = rng.standard_normal((n, dim), dtype=np.float32)
    else:
        centres = np.random.default_rng(12345).standard_normal((1000, dim), dtype=np.float32)
        x = centres[rng.integers(0, len(centres), n)] + 0.8 * rng.standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def load_memo(dirs: list[str], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct unit vector of dimension ``dim`` in the memo folders, and whether each is a query's.

    A vector stored under both roles counts as a query's (held out first, so never inserted).
    """
    index: dict[bytes, int] = {}
    vecs: list[np.ndarray] = []
    is_query: list[bool] = []
    for d in dirs:
        memo = VectorMemo(d)
        root = Path(memo.cache_dir or d)
        if not root.is_dir():
            print(f"memo {d}: not found, skipped")
            continue
        for sub in sorted(p for p in root.iterdir() if p.is_dir()):
            query = sub.name.rsplit("-", 1)[-1] == "queries"
            rows = [np.asarray(v, dtype=np.float32) for v, _ in memo.bucket(sub.name).values()]
            rows = [v / np.linalg.norm(v) for v in rows if v.shape == (dim,) and np.linalg.norm(v) > 0]
            before = len(vecs)
            for v in rows:
                at = index.setdefault(v.tobytes(), len(vecs))
                if at == len(vecs):
                    vecs.append(v)
                    is_query.append(query)
                elif query:
                    is_query[at] = True
            print(f"memo {root / sub.name}: {len(rows):,} vectors of {dim} dims, {len(vecs) - before:,} new")
    if not vecs:
        raise SystemExit(f"no {dim}-dim vectors in {dirs}")
    return np.stack(vecs), np.array(is_query)


def real_vectors(
    dirs: list[str], n: int, n_queries: int, dim: int, jitter: float
) -> tuple[np.ndarray, np.ndarray, str]:
    """``n`` points (real, then jittered copies if short), ``n_queries`` held-out real queries, a label."""
    vecs, is_query = load_memo(dirs, dim)
    rng = np.random.default_rng(0)
    q_idx, d_idx = rng.permutation(np.flatnonzero(is_query)), rng.permutation(np.flatnonzero(~is_query))
    held = np.concatenate([q_idx, d_idx])[:n_queries]
    if len(vecs) - len(held) < 1 or len(held) < n_queries:
        raise SystemExit(f"only {len(vecs):,} distinct vectors: too few for {n_queries} queries and any points")
    pool = vecs[np.setdiff1d(np.arange(len(vecs)), held)]
    real = pool[rng.permutation(len(pool))[:n]]
    extra = n - len(real)
    noise = rng.standard_normal((extra, dim), dtype=np.float32)
    noise *= jitter / np.maximum(np.linalg.norm(noise, axis=1, keepdims=True), 1e-12)
    copies = real[rng.integers(0, len(real), extra)] + noise
    copies /= np.linalg.norm(copies, axis=1, keepdims=True)
    data = np.concatenate([real, copies])[rng.permutation(n)]
    n_q = int(is_query[held].sum())
    label = f"real ({len(real):,} memo + {extra:,} jittered copies, noise norm {jitter:g})"
    print(
        f"data real: {len(vecs):,} distinct memo vectors; {len(held)} held-out queries "
        f"({n_q} query-role, {len(held) - n_q} document-role), not inserted; "
        f"{n:,} points = {len(real):,} real + {extra:,} jittered copies "
        f"(real vector + Gaussian noise of norm {jitter:g}, renormalised)"
    )
    return data, vecs[held], label


def prepare(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, str]:
    """The points, the queries and the data label of the table."""
    if args.data == "real":
        return real_vectors(args.memo or DEFAULT_MEMOS, args.points, args.queries, args.dim, args.jitter)
    data = make_vectors(args.data, args.points, args.dim, 0)
    return data, make_vectors(args.data, args.queries, args.dim, 1), args.data


def load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", choices=["random", "clustered", "real"], default="random")
    ap.add_argument(
        "--memo",
        action="append",
        metavar="DIR",
        help=f"memo folder for --data real (repeatable; default {DEFAULT_MEMOS})",
    )
    ap.add_argument("--jitter", type=float, default=0.1, help="noise norm of the jittered copies (--data real)")
    ap.add_argument("--pause-s", type=float, default=0.0, help="sleep after each upsert (default 0)")
    ap.add_argument("--hnsw-ef", type=int, default=None, help="search_params hnsw_ef (default: Qdrant's)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the index")
    return ap.parse_args()


def upsert_all(store: EdgeStore, data: np.ndarray, batch: int, pause_s: float) -> tuple[list[float], float]:
    """Upsert ``data`` in batches; the time of each upsert and the total."""
    times = []
    t0 = time.perf_counter()
    for i in range(0, len(data), batch):
        j = min(i + batch, len(data))
        t = time.perf_counter()
        store.upsert("bench", models.Batch(ids=list(range(i, j)), vectors=data[i:j].tolist()))
        times.append(time.perf_counter() - t)
        if pause_s:
            time.sleep(pause_s)
    return times, time.perf_counter() - t0


def search_all(
    store: EdgeStore, data: np.ndarray, queries: np.ndarray, hnsw_ef: int | None
) -> tuple[np.ndarray, list[float]]:
    """Latency (ms) of each query and its recall@10 against numpy's exact top 10 over ``data``."""
    params = models.SearchParams(hnsw_ef=hnsw_ef) if hnsw_ef else None
    latencies, recalls = [], []
    exact = np.argsort(-(queries @ data.T), axis=1)[:, :10]
    for q, e in zip(queries, exact):
        t = time.perf_counter()
        hits = store.query_points("bench", query=q.tolist(), limit=10, search_params=params).points
        latencies.append(time.perf_counter() - t)
        recalls.append(len({p.id for p in hits} & set(e.tolist())) / 10)
    return np.array(latencies) * 1000, recalls


def main() -> None:
    args = parse_args()
    print(f"load average (1/5/15 min) at start: {load()}  cpus: {os.cpu_count()}")
    data, queries, label = prepare(args)
    folder = tempfile.mkdtemp(prefix="autoindex-bench-")
    store = open_store(os.path.join(folder, "store"))
    store.create_collection("bench", vectors_config=models.VectorParams(size=args.dim, distance=models.Distance.COSINE))
    times, wrote = upsert_all(store, data, args.batch, args.pause_s)
    t1 = time.perf_counter()
    caught_up = store.wait_for_index("bench", timeout=args.timeout)
    catch_up = time.perf_counter() - t1
    info = store.get_collection("bench")
    ms, recalls = search_all(store, data, queries, args.hnsw_ef)
    store.close()

    rows = [
        ("points x dims, data", f"{args.points:,} x {args.dim}, {label}"),
        ("upserts (batch)", f"{len(times)} ({args.batch})" + (f", pause {args.pause_s}s" if args.pause_s else "")),
        ("upsert throughput", f"{args.points / wrote:,.0f} points/s ({wrote:.1f} s)"),
        ("upsert p50 / longest", f"{np.median(times) * 1000:.1f} ms / {max(times) * 1000:.1f} ms"),
        ("index caught up after last upsert", f"{catch_up:.1f} s" + ("" if caught_up else " (timed out)")),
        (
            "indexed / points, segments",
            f"{info.indexed_vectors_count:,} / {info.points_count:,}, {info.segments_count}",
        ),
        ("hnsw_ef", str(args.hnsw_ef or "default")),
        ("query_points p50 / p99 (limit 10)", f"{np.percentile(ms, 50):.2f} ms / {np.percentile(ms, 99):.2f} ms"),
        (f"recall@10 ({args.queries} queries)", f"{np.mean(recalls):.3f}"),
    ]
    print("| measure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    print(f"load average (1/5/15 min) at end: {load()}")


if __name__ == "__main__":
    main()
