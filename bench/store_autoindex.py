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
  (numpy) over ``--queries`` (200) queries drawn like the data.

Data: ``--data random`` (default): i.i.d. Gaussian vectors normalised to unit
length, a hard case for HNSW (no structure to exploit); ``--data clustered``:
"real-like" unit vectors around 1,000 random centres (Gaussian noise of norm
~0.8 of the centre), closer to text embeddings, which lie near a lower-dimensional
set. ``--pause-s`` sleeps after each upsert (a writer that embeds between batches:
builds then start in its pauses, so upserts may wait for them).

Example:
    nice -n 5 .venv/bin/python bench/store_autoindex.py            # the table in docs/storage.md
    .venv/bin/python bench/store_autoindex.py --points 20000 --dim 64
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from qdrant_client import models

from qdrant_tools.store import open_store


def make_vectors(kind: str, n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":
        x = rng.standard_normal((n, dim), dtype=np.float32)
    else:
        centres = np.random.default_rng(12345).standard_normal((1000, dim), dtype=np.float32)
        x = centres[rng.integers(0, len(centres), n)] + 0.8 * rng.standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", choices=["random", "clustered"], default="random")
    ap.add_argument("--pause-s", type=float, default=0.0, help="sleep after each upsert (default 0)")
    ap.add_argument("--hnsw-ef", type=int, default=None, help="search_params hnsw_ef (default: Qdrant's)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the index")
    args = ap.parse_args()

    print(f"load average (1/5/15 min) at start: {load()}  cpus: {os.cpu_count()}")
    data = make_vectors(args.data, args.points, args.dim, 0)
    queries = make_vectors(args.data, args.queries, args.dim, 1)
    folder = tempfile.mkdtemp(prefix="autoindex-bench-")
    store = open_store(os.path.join(folder, "store"))
    store.create_collection("bench", vectors_config=models.VectorParams(size=args.dim, distance=models.Distance.COSINE))

    times = []
    t0 = time.perf_counter()
    for i in range(0, args.points, args.batch):
        j = min(i + args.batch, args.points)
        t = time.perf_counter()
        store.upsert("bench", models.Batch(ids=list(range(i, j)), vectors=data[i:j].tolist()))
        times.append(time.perf_counter() - t)
        if args.pause_s:
            time.sleep(args.pause_s)
    wrote = time.perf_counter() - t0
    t1 = time.perf_counter()
    caught_up = store.wait_for_index("bench", timeout=args.timeout)
    catch_up = time.perf_counter() - t1
    info = store.get_collection("bench")

    params = models.SearchParams(hnsw_ef=args.hnsw_ef) if args.hnsw_ef else None
    latencies, recalls = [], []
    exact = np.argsort(-(queries @ data.T), axis=1)[:, :10]
    for q, e in zip(queries, exact):
        t = time.perf_counter()
        hits = store.query_points("bench", query=q.tolist(), limit=10, search_params=params).points
        latencies.append(time.perf_counter() - t)
        recalls.append(len({p.id for p in hits} & set(e.tolist())) / 10)
    store.close()
    ms = np.array(latencies) * 1000

    rows = [
        ("points x dims, data", f"{args.points:,} x {args.dim}, {args.data}"),
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
