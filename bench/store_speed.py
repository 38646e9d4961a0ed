"""Embedded store speed: qdrant-client's local mode vs the Qdrant Edge store (``open_store(path)``).

Points are 384-dim unit vectors of low intrinsic dimension, like real text
embeddings: a random 16-dim subspace plus isotropic noise (half the norm of
the subspace part by default), normalised. Each
point carries a payload like posfair's (``doc_id``, ``group`` (10 values),
``chunk_index``, 200 characters of text). Queries are fresh draws from the
same distribution; "exact" answers come from numpy.

Measured per engine and size, on a fresh folder:

* upsert/s: ``upsert(models.Batch, wait=True)`` of ``--batch`` points at a time;
* exact p50: query latency before any index (the Edge store scans exactly);
* index s: ``EdgeStore.build_index`` (what ingestion runs when it finishes; local mode has none);
* query p50 / p99, recall@10: top-10 with payload, after the index, against numpy's exact top-10;
* filtered p50 / p99, recall@10: the same with a keyword filter (``group``, 10% of the points, indexed);
* reopen s: close, open the folder again and count the points (Edge opens shards lazily; counted here);
* disk MB: the folder's allocated blocks; count: every point counted after reopening.

Usage:
    python bench/store_speed.py                                  # 10k and 100k, local mode skipped at 100k
    python bench/store_speed.py --sizes 10000 --queries 100
    python bench/store_speed.py --sizes 10000,100000 --skip-local-at 0   # local mode at 100k too (slow)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COLLECTION = "bench"
VECTOR = "dense"


@dataclass
class Row:
    engine: str
    points: int
    upsert_per_s: float
    exact_p50_ms: float
    index_s: float | None
    p50_ms: float
    p99_ms: float
    recall: float
    f_p50_ms: float
    f_p99_ms: float
    f_recall: float
    reopen_s: float
    size_mb: float
    counted: bool


def make_data(
    n: int, n_queries: int, dim: int, intrinsic: int, noise: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points and ``n_queries`` queries: a random ``intrinsic``-dim subspace plus isotropic noise, unit length.

    ``noise`` is the expected norm of the noise relative to the norm of the subspace part.
    """
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(intrinsic, dim)) / np.sqrt(intrinsic)  # rows of norm ~ sqrt(dim / intrinsic)

    def draw(k: int) -> np.ndarray:
        x = rng.normal(size=(k, intrinsic)) @ basis + noise * rng.normal(size=(k, dim))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    return draw(n), draw(n_queries)


def payload(i: int) -> dict:
    return {
        "doc_id": f"doc{i // 20:06d}.md",
        "group": f"g{i % 10}",
        "chunk_index": i % 20,
        "text": f"chunk {i} " + "lorem ipsum dolor sit amet " * 7,
    }


def exact_top(x: np.ndarray, queries: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[set[int]]:
    scores = queries @ x.T
    if mask is not None:
        scores[:, ~mask] = -np.inf
    return [set(np.argpartition(-s, k)[:k].tolist()) for s in scores]


def open_engine(engine: str, path: Path):
    from qdrant_tools.store import open_store

    return open_store(path, engine=engine)


def create(store) -> None:
    from qdrant_client import models

    store.create_collection(
        COLLECTION, vectors_config={VECTOR: models.VectorParams(size=384, distance=models.Distance.COSINE)}
    )
    store.create_payload_index(COLLECTION, "group", models.PayloadSchemaType.KEYWORD)
    store.create_payload_index(COLLECTION, "doc_id", models.PayloadSchemaType.KEYWORD)


def upsert_all(store, x: np.ndarray, batch: int) -> float:
    from qdrant_client import models

    t0 = time.perf_counter()
    for start in range(0, len(x), batch):
        ids = list(range(start, min(start + batch, len(x))))
        store.upsert(
            COLLECTION,
            models.Batch(ids=ids, vectors={VECTOR: x[ids].tolist()}, payloads=[payload(i) for i in ids]),
            wait=True,
        )
    return len(x) / (time.perf_counter() - t0)


def run_queries(store, queries: np.ndarray, group: str | None) -> tuple[list[float], list[set[int]]]:
    from qdrant_client import models

    flt = None
    if group is not None:
        flt = models.Filter(must=[models.FieldCondition(key="group", match=models.MatchValue(value=group))])
    times, found = [], []
    for q in queries:
        t0 = time.perf_counter()
        res = store.query_points(COLLECTION, query=q.tolist(), using=VECTOR, limit=10, query_filter=flt)
        times.append((time.perf_counter() - t0) * 1000)
        found.append({int(p.id) for p in res.points})
    return times, found


def recall(found: list[set[int]], truth: list[set[int]]) -> float:
    return float(np.mean([len(f & t) / len(t) for f, t in zip(found, truth)]))


def folder_mb(path: Path) -> float:
    """Disk space the folder takes (allocated blocks: Qdrant Edge preallocates sparse files)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file()) / 2**20


def bench_one(engine: str, x: np.ndarray, queries: np.ndarray, batch: int, root: Path) -> Row:
    path = root / f"{engine}-{len(x)}"
    store = open_engine(engine, path)
    create(store)
    rate = upsert_all(store, x, batch)
    exact_times, _ = run_queries(store, queries[: max(10, len(queries) // 4)], None)
    index_s = store.build_index(COLLECTION) if engine == "edge" else None
    times, found = run_queries(store, queries, None)
    mask = np.array([i % 10 == 3 for i in range(len(x))])
    f_times, f_found = run_queries(store, queries, "g3")
    store.close()
    t0 = time.perf_counter()
    store = open_engine(engine, path)
    counted = store.count(COLLECTION, exact=True).count == len(x)
    reopen_s = time.perf_counter() - t0
    store.close()
    return Row(
        engine=engine,
        points=len(x),
        upsert_per_s=rate,
        exact_p50_ms=float(np.percentile(exact_times, 50)),
        index_s=index_s,
        p50_ms=float(np.percentile(times, 50)),
        p99_ms=float(np.percentile(times, 99)),
        recall=recall(found, exact_top(x, queries, 10)),
        f_p50_ms=float(np.percentile(f_times, 50)),
        f_p99_ms=float(np.percentile(f_times, 99)),
        f_recall=recall(f_found, exact_top(x, queries, 10, mask)),
        reopen_s=reopen_s,
        size_mb=folder_mb(path),
        counted=counted,
    )


def table(rows: list[Row]) -> str:
    head = (
        "| store | points | upsert/s | exact query p50 ms (no index) | index build s | query p50 / p99 ms | "
        "recall@10 | filtered p50 / p99 ms | filtered recall@10 | reopen s | disk MB | every point counted |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    names = {"edge": "Qdrant Edge (`open_store(path)`)", "local": "qdrant-client local mode"}
    lines = [
        f"| {names[r.engine]} | {r.points:,} | {r.upsert_per_s:,.0f} | {r.exact_p50_ms:.1f} | "
        f"{'-' if r.index_s is None else f'{r.index_s:.1f}'} | {r.p50_ms:.1f} / {r.p99_ms:.1f} | {r.recall:.3f} | "
        f"{r.f_p50_ms:.1f} / {r.f_p99_ms:.1f} | {r.f_recall:.3f} | {r.reopen_s:.2f} | {r.size_mb:.0f} | "
        f"{'yes' if r.counted else 'NO'} |"
        for r in rows
    ]
    return "\n".join([head, *lines])


def done_when(rows: list[Row]) -> list[str]:
    """The issue's bar for the Edge store at 100k points: p50 <= 5 ms, recall >= 0.95, reopen <= 2 s, all counted."""
    out = []
    for r in rows:
        if r.engine != "edge" or r.points < 100_000:
            continue
        checks = {
            "query p50 <= 5 ms": r.p50_ms <= 5,
            "recall@10 >= 0.95": r.recall >= 0.95,
            "reopen <= 2 s": r.reopen_s <= 2,
            "every point counted": r.counted,
        }
        out.append(
            f"{r.points:,} points: " + ", ".join(f"{k}: {'met' if ok else 'MISSED'}" for k, ok in checks.items())
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated point counts (default 10000,100000)")
    ap.add_argument("--skip-local-at", type=int, default=100_000, help="skip local mode from this size on (0: never)")
    ap.add_argument("--queries", type=int, default=200, help="queries per measurement (default 200)")
    ap.add_argument("--local-queries", type=int, default=50, help="queries for local mode, which is slow (default 50)")
    ap.add_argument("--batch", type=int, default=1000, help="points per upsert (default 1000)")
    ap.add_argument("--intrinsic", type=int, default=16, help="intrinsic dimension of the data (default 16)")
    ap.add_argument("--noise", type=float, default=0.5, help="noise norm / subspace norm (default 0.5)")
    ap.add_argument("--dir", default=None, help="folder for the stores (default: a temporary folder, removed)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="posfair-store-bench-"))
    rows = []
    try:
        for n in sizes:
            x, queries = make_data(n, args.queries, 384, args.intrinsic, args.noise)
            engines = ["edge"] + ([] if args.skip_local_at and n >= args.skip_local_at else ["local"])
            for engine in engines:
                q = queries if engine == "edge" else queries[: args.local_queries]
                rows.append(bench_one(engine, x, q, args.batch, root))
                print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print(
        f"\n{os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f}); 384 dims, intrinsic dimension "
        f"{args.intrinsic}, noise {args.noise}; {args.queries} queries "
        f"({args.local_queries} for local mode); filter: keyword `group`, 10% of the points\n"
    )
    print(table(rows))
    for line in done_when(rows):
        print("\n" + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
