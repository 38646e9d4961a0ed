"""Query latency and concurrency of ``PosFairVectorStore`` on the embedded store (Qdrant Edge).

Builds a collection of N synthetic nodes in the shipped layout (node vectors, sub-chunk and fused
multivectors, BM25) with a hashing encoder of 384 dimensions (the bundled model's size: search cost
depends on sizes and counts, not on what the vectors mean), then, with the query embeddings computed
beforehand, interleaves for each repeat:

* sequential: 8 ``store.query`` calls one after another;
* concurrent: the same 8 queries as ``asyncio.gather`` of ``store.aquery`` (batched into one
  ``query_batch_points`` call by :class:`qdrant_tools.store.async_store.AsyncStore`);

and times single ``store.query`` calls for p50 / p99 (query embedding excluded). Prints a markdown table.

Usage::

    python bench/async_queries.py --nodes 1000,10000 --repeats 20
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DIM = 384
WORDS = [f"w{i}" for i in range(5000)]


class HashEncoder:
    """Unit vectors from a hash of the text: the ingestion ``Encoder`` protocol without a model."""

    def __init__(self) -> None:
        from llamaindex_posfair import EncoderSpec

        self.spec = EncoderSpec(model="bench-hash", calibration=None, weights="bench-hash-384")
        self.calibration = None
        self.model_id = self.spec.model

    dimension = DIM
    max_length = 256

    def fingerprint(self, **kwargs: object) -> str:
        return self.spec.fingerprint()

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(t.split()) + 2 for t in texts]

    def _vec(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha1(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=DIM)
            out[i] = v / np.linalg.norm(v)
        return out

    def encode_documents(self, texts: list[str], **kwargs: object) -> np.ndarray:
        return self._vec(list(texts))

    def encode_queries(self, texts: list[str], **kwargs: object) -> np.ndarray:
        return self._vec(list(texts))


def build(n: int, encoder: HashEncoder):
    from llama_index.core.schema import TextNode

    from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
    from qdrant_tools.store import open_store

    rng = np.random.default_rng(0)
    embed = PosFairEmbedding(encoder=encoder, embed_batch_size=256)
    client = open_store(":memory:", auto_index=False)
    store = PosFairVectorStore("bench", client=client, embed_model=embed, batch_size=512)
    nodes = []
    for i in range(n):
        sentences = [" ".join(rng.choice(WORDS, 20)) + "." for _ in range(10)]
        node = TextNode(text=" ".join(sentences), id_=f"node-{i}", metadata={"group": int(i % 10)})
        nodes.append(node)
    vectors = encoder.encode_documents([x.text for x in nodes])
    for node, v in zip(nodes, vectors):
        node.embedding = v.tolist()
    t0 = time.perf_counter()
    store.add(nodes)
    seconds = time.perf_counter() - t0
    client.build_index("bench")
    return client, store, seconds


def queries(encoder: HashEncoder, k: int, rng: np.random.Generator) -> list:
    from llama_index.core.vector_stores.types import VectorStoreQuery

    texts = [" ".join(rng.choice(WORDS, 6)) for _ in range(k)]
    vectors = encoder.encode_queries(texts)
    return [
        VectorStoreQuery(query_embedding=v.tolist(), query_str=t, similarity_top_k=10) for t, v in zip(texts, vectors)
    ]


def measure(store, qs: list, repeats: int) -> dict[str, float]:
    """Interleaved sequential and concurrent rounds, all inside one event loop (one worker-thread pool)."""

    async def rounds() -> tuple[list[float], list[float], list[float]]:
        store.query(qs[0])
        await asyncio.gather(*(store.aquery(q) for q in qs))
        seq, conc, single = [], [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for q in qs:
                t1 = time.perf_counter()
                store.query(q)
                single.append(time.perf_counter() - t1)
            seq.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await asyncio.gather(*(store.aquery(q) for q in qs))
            conc.append(time.perf_counter() - t0)
        return seq, conc, single

    seq, conc, single = asyncio.run(rounds())
    seq_ms, conc_ms = 1000 * float(np.median(seq)), 1000 * float(np.median(conc))
    return {
        "seq": seq_ms,
        "conc": conc_ms,
        "ratio": conc_ms / seq_ms,
        "p50": 1000 * float(np.percentile(single, 50)),
        "p99": 1000 * float(np.percentile(single, 99)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1000,10000", help="collection sizes, comma-separated")
    parser.add_argument("--concurrency", type=int, default=8, help="queries sent together (default 8)")
    parser.add_argument("--repeats", type=int, default=20, help="interleaved repeats (default 20)")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    encoder = HashEncoder()
    rng = np.random.default_rng(1)
    print(
        f"PosFairVectorStore on the embedded store, shipped layout, {DIM}-d hashing encoder, top 10, "
        f"{args.concurrency} queries; medians of {args.repeats} interleaved repeats; query embedding excluded\n"
    )
    print(
        f"| nodes | add nodes/s | {args.concurrency} sequential ms | {args.concurrency} concurrent (aquery) ms | ratio | query p50 ms | query p99 ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.nodes.split(",")):
        client, store, seconds = build(n, encoder)
        r = measure(store, queries(encoder, args.concurrency, rng), args.repeats)
        print(
            f"| {n:,} | {n / seconds:.0f} | {r['seq']:.1f} | {r['conc']:.1f} | {r['ratio']:.2f} | "
            f"{r['p50']:.2f} | {r['p99']:.2f} |"
        )
        client.close()
    print(f"\nCPU cores {os.cpu_count()}; load averages at the end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
