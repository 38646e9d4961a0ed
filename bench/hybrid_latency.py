"""Latency of one search call at N nodes, the default pipeline's layouts (dense best sub-chunk, node-weighted, + BM25).

The shipped natural-docs passages are ingested with the default pipeline's layout (a BM25 sparse vector too) into
the embedded Qdrant Edge store; the collection is then filled up to ``--nodes`` with distractor nodes built
from real vectors: each distractor holds ``k`` (about the real mean) sub-chunk vectors drawn at random from
the pool of real sub-chunk vectors, its node vector is their normalised mean, and its BM25 vector is that
of the drawn sub-chunks' texts joined (the layout's BM25 of a node's text). Encoding a large real corpus is
out of reach on a CPU; these nodes are real text and real vectors, rearranged.

Timed: one ``qdrant_tools.search.search`` call per query (``query_points``; query embedding excluded), over
the natural-docs ``test`` questions, after ``build_index``. Printed: p50 / p99 ms per setting.

Usage:
    python bench/hybrid_latency.py --nodes 10000 --memo ~/.cache/posfair/memo
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COLLECTION = "latency"


def ingest_real(client, encoder, bench) -> None:
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.chunking import SourceDocument, content_hash
    from qdrant_tools.ingest import IngestConfig, ingest_documents

    recipe = Recipe.default()  # the shipped layout: sub-chunks, BM25 and the fused multivector
    docs = [SourceDocument(d, t, d, content_hash(t)) for d, t in bench.corpus.items()]
    config = IngestConfig(show_progress=False, sparse=recipe.sparse_encoder(), layout=recipe.layout)
    ingest_documents(client, COLLECTION, docs, {"vanilla": encoder}, config)


def pool(client) -> tuple[list[np.ndarray], list[str], float]:
    """Every real sub-chunk vector with its text, and the mean sub-chunks per node."""
    from qdrant_tools.payload import posfair_fields
    from qdrant_tools.scroll import scroll_pages

    vecs, texts, counts = [], [], []
    for points in scroll_pages(client, COLLECTION, with_vectors=["subchunks"]):
        for p in points:
            fields = posfair_fields(p.payload)
            base, text = fields["start_char"], fields["text"]
            for (a, b), v in zip(fields["subchunk_spans"], p.vector["subchunks"]):
                vecs.append(np.asarray(v, dtype=np.float32))
                texts.append(text[a - base : b - base])
            counts.append(len(fields["subchunk_spans"]))
    return vecs, texts, float(np.mean(counts))


def add_distractors(client, n: int, vecs, texts, k: float, seed: int = 0) -> None:
    """``n`` distractors (see the module docstring), with the fused multivector when the collection has one."""
    from qdrant_client import models

    from qdrant_tools.encoding import fused_rows, subchunk_mean
    from qdrant_tools.search import collection_vectors
    from qdrant_tools.sparse import SPARSE_VECTOR, Bm25Sparse

    vectors = collection_vectors(client, COLLECTION)

    bm25, rng = Bm25Sparse(), np.random.default_rng(seed)
    for start in range(0, n, 256):
        points = []
        for i in range(start, min(n, start + 256)):
            pick = rng.choice(len(vecs), size=max(1, int(rng.poisson(k))), replace=False)
            sub = np.stack([vecs[j] for j in pick])
            node = subchunk_mean(sub)
            text = " ".join(texts[j] for j in pick)
            vector = {"vanilla": node.tolist(), "subchunks": sub.tolist(), SPARSE_VECTOR: bm25.embed_document(text)}
            if vectors.fused is not None:
                vector[vectors.fused] = fused_rows(node, sub, vectors.fused_weight).tolist()
            points.append(models.PointStruct(id=str(uuid.UUID(int=i + 1)), vector=vector, payload={"text": text}))
        client.upsert(COLLECTION, points=points, wait=True)


def settings_grid(limit: int = 10):
    """The shipped default (``Recipe.default()``'s search: exact scoring up to its ``exact_up_to``, candidates
    above) and its parts switched off one by one, each returning ``limit`` hits."""
    from llamaindex_posfair.integrations.recipe import Recipe

    shipped = Recipe.default().search.overridden(limit=limit)
    return {
        "dense, best sub-chunk": replace(shipped, sparse=False, node_weight=0.0),
        f"dense, node weight {shipped.node_weight}": replace(shipped, sparse=False),
        "best sub-chunk + BM25": replace(shipped, node_weight=0.0),
        f"shipped: node weight {shipped.node_weight} + BM25 ({shipped.fusion}, {shipped.fusion_limit} deep)": shipped,
    }


def time_queries(client, queries, sparse, settings) -> tuple[float, float]:
    from qdrant_tools.search import collection_vectors, search

    vectors = collection_vectors(client, COLLECTION)
    for q, s in zip(queries[:5], sparse[:5]):  # warm-up
        search(client, COLLECTION, q, settings, vectors=vectors, sparse_query=s)
    ms = []
    for q, s in zip(queries, sparse):
        t0 = time.perf_counter()
        search(client, COLLECTION, q, settings, vectors=vectors, sparse_query=s)
        ms.append(1000 * (time.perf_counter() - t0))
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000, help="nodes in the collection (default 10000)")
    parser.add_argument("--memo", default=None, help="folder of the embedding memo (reused between runs)")
    parser.add_argument("--limit", type=int, default=10, help="hits per query (default 10; the harness ranks 100)")
    args = parser.parse_args(argv)

    from llamaindex_posfair.encoders.spec import EncoderSpec
    from qdrant_tools.sparse import Bm25Sparse
    from qdrant_tools.store import open_store
    from research.default_pipeline.system import cpu_load
    from research.eval.benchmarks.loaders import load_shipped
    from research.eval.memo import MemoEncoder, VectorMemo

    bench = load_shipped("natural-docs", "test")
    encoder = MemoEncoder(EncoderSpec(calibration=None).load(), VectorMemo(args.memo) if args.memo else None)
    client = open_store(tempfile.mkdtemp(prefix="posfair-latency-"))
    try:
        ingest_real(client, encoder, bench)
        real = client.count(COLLECTION).count
        vecs, texts, k = pool(client)
        t0 = time.perf_counter()
        add_distractors(client, max(0, args.nodes - real), vecs, texts, k)
        index_s = client.build_index(COLLECTION)
        print(f"{client.count(COLLECTION).count} nodes ({real} real, {k:.1f} sub-chunks per node); "
              f"distractors written and indexed in {time.perf_counter() - t0:.0f} s (index {index_s:.0f} s)")  # fmt: skip
        texts_q = list(bench.queries.values())
        queries = np.asarray(encoder.encode_queries(texts_q), dtype=np.float32)
        sparse = Bm25Sparse().embed_queries(texts_q)
        print("| setting | p50 ms | p99 ms |\n|---|---|---|")
        for label, settings in settings_grid(args.limit).items():
            p50, p99 = time_queries(client, queries, sparse, settings)
            print(f"| {label} | {p50:.1f} | {p99:.1f} |")
        print(
            f"\n{len(texts_q)} queries, {args.limit} hits each, one search call each; load averages at the end {cpu_load()}"
        )
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
