"""Query latency and concurrency of ``PosFairVectorStore`` on the embedded store (Qdrant Edge).

Builds a collection of N synthetic nodes in the shipped layout (node vectors, sub-chunk and fused
multivectors, BM25) with a hashing encoder of 384 dimensions (the bundled model's size: search cost
depends on sizes and counts, not on what the vectors mean), then, with the query embeddings computed
beforehand, interleaves for each repeat:

* sequential: 8 ``store.query`` calls one after another;
* concurrent: the same 8 queries as ``asyncio.gather`` of ``store.aquery`` (batched into one
  ``query_batch_points`` call by :class:`qdrant_tools.store.async_store.AsyncStore`);

and times single ``store.query`` calls for p50 / p99 (query embedding excluded). Prints a markdown table,
then a check of whether Qdrant Edge's query releases the interpreter lock: engine queries alone, a pure
Python loop alone, and both at once in two threads (if the lock is held, "both" takes their sum).

``--remote`` measures the other case: the query encoder on a ``posfair serve`` server (a local Ray
Serve deployment of the bundled model, in its own process). A ``VectorStoreIndex`` over the store
answers 8 questions with ``retriever.retrieve`` one after another, then with ``asyncio.gather`` of
``retriever.aretrieve``; query embedding included, through the async HTTP client.

Usage::

    python bench/async_queries.py --nodes 1000,10000 --repeats 20
    python bench/async_queries.py --remote --repeats 10
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


def lock_check(client, store, qs: list, repeats: int) -> dict[str, float]:
    """Medians (ms) of 8 engine queries alone, a Python loop alone, and both at once in two threads."""
    import threading

    from qdrant_tools import search

    vectors = store._current_vectors()
    requests = []
    for q in qs:
        _, args = store._plan_query(q)
        requests.append(
            search.query_request(
                args["query_vector"], args["settings"], vectors, query_filter=None, sparse_query=args["sparse_query"]
            )
        )

    def engine() -> None:
        for r in requests:
            client.query_points("bench", **r, with_payload=True)

    def python_loop() -> None:
        total = 0
        for i in range(200_000):
            total += i * i

    def both() -> None:
        thread = threading.Thread(target=engine)
        thread.start()
        python_loop()
        thread.join()

    times: dict[str, list[float]] = {"engine": [], "python": [], "both": []}
    for _ in range(repeats):
        for name, f in (("engine", engine), ("python", python_loop), ("both", both)):
            t0 = time.perf_counter()
            f()
            times[name].append(1000 * (time.perf_counter() - t0))
    return {k: float(np.median(v)) for k, v in times.items()}


def remote(repeats: int, concurrency: int, n_passages: int) -> None:
    """Sequential ``retrieve`` against concurrent ``aretrieve`` with the query encoder on ``posfair serve``."""
    from llama_index.core import Document, VectorStoreIndex

    from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
    from llamaindex_posfair.encoders.models import BUNDLED_MINILM
    from llamaindex_posfair.encoders.spec import EncoderSpec
    from llamaindex_posfair.serve import config as C
    from llamaindex_posfair.serve import runner
    from qdrant_tools.store import open_store
    from research.eval.benchmarks.loaders import load_shipped

    bench = load_shipped("natural-docs", "test")
    texts = list(bench.corpus.values())[:n_passages]
    questions = list(bench.queries.values())[: concurrency * (repeats + 1)]
    owns = runner.ensure_ray(None, os.cpu_count(), log_to_driver=False)
    port = runner.free_port()
    try:
        runner.deploy(C.ServeConfig(encoder=EncoderSpec(model=BUNDLED_MINILM).pinned()), "127.0.0.1", port)
        embed = PosFairEmbedding(endpoint=f"http://127.0.0.1:{port}")
        client = open_store(":memory:")
        store = PosFairVectorStore("bench", client=client, embed_model=embed)
        index = VectorStoreIndex.from_documents(
            [Document(text=t) for t in texts], vector_store=store, embed_model=embed
        )
        retriever = index.as_retriever(similarity_top_k=10)
        seq, conc = asyncio.run(_remote_rounds(retriever, questions, concurrency))
        client.close()
    finally:
        runner.stop(owns)
    print(
        f"\nQuery encoder on posfair serve (local Ray Serve, {BUNDLED_MINILM}, CPU), {len(texts)} natural-docs passages"
    )
    print(
        f"through VectorStoreIndex + PosFairVectorStore, top 10; medians of {repeats} interleaved repeats, query embedding included\n"
    )
    print(f"| {concurrency} sequential retrieve ms | {concurrency} concurrent aretrieve ms | ratio |")
    print("|---|---|---|")
    print(f"| {seq:.1f} | {conc:.1f} | {conc / seq:.2f} |")


async def _remote_rounds(retriever, questions: list[str], k: int) -> tuple[float, float]:
    retriever.retrieve(questions[0])
    await asyncio.gather(*(retriever.aretrieve(q) for q in questions[:k]))
    seq, conc = [], []
    for start in range(0, len(questions) - k + 1, k):
        group = questions[start : start + k]
        t0 = time.perf_counter()
        for q in group:
            retriever.retrieve(q)
        seq.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await asyncio.gather(*(retriever.aretrieve(q) for q in group))
        conc.append(time.perf_counter() - t0)
    return 1000 * float(np.median(seq)), 1000 * float(np.median(conc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1000,10000", help="collection sizes, comma-separated")
    parser.add_argument("--concurrency", type=int, default=8, help="queries sent together (default 8)")
    parser.add_argument("--repeats", type=int, default=20, help="interleaved repeats (default 20)")
    parser.add_argument("--remote", action="store_true", help="the query encoder on posfair serve (needs Ray Serve)")
    parser.add_argument("--passages", type=int, default=300, help="natural-docs passages indexed with --remote")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    if args.remote:
        remote(args.repeats, args.concurrency, args.passages)
        print(f"\nCPU cores {os.cpu_count()}; load averages at the end {os.getloadavg()}")
        return 0
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
    checks = []
    for n in (int(x) for x in args.nodes.split(",")):
        client, store, seconds = build(n, encoder)
        qs = queries(encoder, args.concurrency, rng)
        r = measure(store, qs, args.repeats)
        print(
            f"| {n:,} | {n / seconds:.0f} | {r['seq']:.1f} | {r['conc']:.1f} | {r['ratio']:.2f} | "
            f"{r['p50']:.2f} | {r['p99']:.2f} |"
        )
        checks.append((n, lock_check(client, store, qs, args.repeats)))
        client.close()
    print(f"\nDoes Qdrant Edge's query release the interpreter lock? ({args.concurrency} queries; medians, ms)\n")
    print("| nodes | engine queries alone | Python loop alone | both, two threads | sum of the two |")
    print("|---|---|---|---|---|")
    for n, c in checks:
        print(f"| {n:,} | {c['engine']:.1f} | {c['python']:.1f} | {c['both']:.1f} | {c['engine'] + c['python']:.1f} |")
    print(f"\nCPU cores {os.cpu_count()}; load averages at the end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
