"""Probe (not shipped): a context-shifted multivector answers the main job's fused dense score in one arm.

With a unit query ``q``, unit sub-chunk vectors ``s_j`` and a unit node vector, the MaxSim of ``q`` against the
rows ``(1 - w) * s_j + w * node`` under DOT is ``(1 - w) * max_j cos(q, s_j) + w * cos(q, node)``: the dense score
that ``qdrant_tools.search`` computes today with a formula over two prefetches, each re-scoring the candidates
(so the node-vector HNSW search runs twice). This script builds a collection like ``bench/scale.py`` (the
benchmarks' ``test`` nodes among distractors made of real vectors) with that extra multivector (``ctx``,
``w`` = the recipe's node weight) and times the shipped two-arm search against a one-arm query over the same
candidates (node-vector HNSW and BM25), printing the top-10 overlap between the two. Each is run twice,
interleaved, because the machine's load moves.

Usage::

    nice -n 5 python bench/context_multivector_probe.py --nodes 100000 --prefetch 1000,2000
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import scale as S
from qdrant_client import models

CTX = "ctx"


def ctx_rows(node: Any, subs: Any, w: float) -> list[list[float]]:
    """The context-shifted rows ``(1 - w) * s_j + w * node`` of one node."""
    node, subs = np.asarray(node, dtype=np.float32), np.asarray(subs, dtype=np.float32)
    return ((1 - w) * subs + w * node[None, :]).tolist()


def build(n: int, w: float, args: argparse.Namespace, real: Any, pool: Any) -> tuple[Any, str]:
    """A ``bench/scale.py`` collection of ``n`` nodes with the extra ``ctx`` multivector (DOT, no graph)."""
    from qdrant_tools.store import open_store

    node_name = next(k for k in real.vectors[0] if k not in ("subchunks", "bm25"))
    store = open_store(Path(tempfile.mkdtemp(prefix="posfair-ctx-")) / f"n{n}", auto_index=False)
    vectors = dict(real.config["vectors_config"])
    multi = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
    vectors[CTX] = models.VectorParams(
        size=len(real.vectors[0][node_name]), distance=models.Distance.DOT, multivector_config=multi,
        hnsw_config=models.HnswConfigDiff(m=0),
    )  # fmt: skip
    store.create_collection(
        S.COLLECTION, vectors_config=vectors, sparse_vectors_config=real.config["sparse_vectors_config"]
    )
    rng = np.random.default_rng(args.seed)
    ids = rng.permutation(n)
    batches = [list(zip(real.vectors[s : s + 256], real.payloads[s : s + 256])) for s in range(0, len(real.docs), 256)]
    row = 0
    for batch in itertools.chain(batches, S.distractors(pool, n - len(real.docs), rng, args, node_name)):
        points = []
        for i, (v, p) in enumerate(batch):
            v = {**v, CTX: ctx_rows(v[node_name], v["subchunks"], w)}
            points.append(models.PointStruct(id=int(ids[row + i]), vector=v, payload=p))
        store.upsert(S.COLLECTION, points)
        row += len(batch)
    store.build_index(S.COLLECTION)
    return store, node_name


def two_arm(store: Any, settings: Any, p: int) -> Any:
    """The shipped search with ``p`` node-vector candidates (``qdrant_tools.search.search``)."""
    from qdrant_tools.search import collection_layout, search

    layout = collection_layout(store, S.COLLECTION)
    fixed = replace(settings, exact_up_to=0, prefetch_limit=p, prefetch_max=None)
    return lambda q, sq: [int(h.id) for h in search(store, S.COLLECTION, q, fixed, layout=layout, sparse_query=sq)]


def one_arm(store: Any, settings: Any, p: int, node_name: str) -> Any:
    """The same candidates re-scored once, by MaxSim over ``ctx``, then fused with BM25 as the shipped search."""

    def ask(q: np.ndarray, sq: Any) -> list[int]:
        ql = (q / np.linalg.norm(q)).tolist()
        cands = [
            models.Prefetch(query=ql, using=node_name, limit=p),
            models.Prefetch(query=sq, using="bm25", limit=settings.fusion_limit),
        ]
        dense = models.Prefetch(prefetch=cands, query=[ql], using=CTX, limit=settings.limit)
        arms = [dense, models.Prefetch(query=sq, using="bm25", limit=settings.limit)]
        hits = store.query_points(S.COLLECTION, prefetch=arms, query=settings.fusion_query(), limit=settings.limit)
        return [int(h.id) for h in hits.points]

    return ask


def main(argv: list[str] | None = None) -> None:
    from llamaindex_posfair.encoders.spec import EncoderSpec
    from llamaindex_posfair.eval.memo import MemoEncoder, VectorMemo
    from llamaindex_posfair.integrations.recipe import MAIN_JOB_SEARCH

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--prefetch", default="1000,2000", help="node-vector candidates, comma-separated")
    ap.add_argument("--cache", default="~/.cache/llamaindex_posfair/scale", help="bench/scale.py's embedding memo")
    args = ap.parse_args(argv)
    scale_args = S.parse_args(["--sizes", str(args.nodes), "--cache", args.cache])
    encoder = MemoEncoder(EncoderSpec(calibration=None).load(device="cpu"), VectorMemo(Path(args.cache).expanduser()))
    real, pool, queries = S.real_nodes(encoder), S.pool(encoder), S.load_queries(encoder)
    settings = MAIN_JOB_SEARCH.settings(limit=100)
    store, node_name = build(args.nodes, settings.node_weight, scale_args, real, pool)
    print(f"{args.nodes:,} nodes, w = {settings.node_weight}; load {os.getloadavg()[0]:.1f}", flush=True)
    print("| search | p50 ms | p99 ms | top-10 overlap with the first two-arm run | load |\n|---|---|---|---|---|")
    for p in (int(x) for x in args.prefetch.split(",")):
        ref = None
        for label in ("two-arm", "one-arm", "two-arm again", "one-arm again"):
            ask = two_arm(store, settings, p) if label.startswith("two") else one_arm(store, settings, p, node_name)
            got, ms = S.answer(queries, ask)
            ref = ref or got
            same = np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(got, ref)])
            p50, p99 = np.percentile(ms, 50), np.percentile(ms, 99)
            print(f"| {label}, {p} candidates | {p50:.1f} | {p99:.1f} | {same:.3f} | {os.getloadavg()[0]:.1f} |")
    store.close()


if __name__ == "__main__":
    main()
