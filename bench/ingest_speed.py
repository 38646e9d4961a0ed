"""Ingestion throughput: ``posfair ingest`` vs LlamaIndex's HuggingFaceEmbedding + QdrantVectorStore.

Same folder, same model, same chunks, same embedded Qdrant (the Qdrant Edge
store of ``open_store`` on disk), same encoder batch size; model loading is
excluded from every timing.

* ``llamaindex``: the chunk texts produced by posfair's chunker become
  ``TextNode``s, then ``IngestionPipeline([HuggingFaceEmbedding], vector_store=QdrantVectorStore)``.
  Chunking is *not* timed for this path (an advantage to it).
* ``posfair (calibration off|on)``: ``qdrant_tools.ingest.ingest_path`` from
  the files (discovery, reading, chunking, token counting, diff, embed,
  ``upsert(wait=True)``), i.e. what ``posfair ingest`` runs after loading the model.

Each path runs ``--repeats`` times into a fresh store, the paths taking turns
(rotating order) inside each repeat; the best time counts for chunks/s, and the
calibration cost is the median over repeats of the paired ratio
(calibration on / off within the same repeat). The load average is printed:
on a shared machine, rerun when it exceeds the number of torch threads.
Needs ``llama-index-embeddings-huggingface`` (optional dependency); without it
a SentenceTransformer-based stand-in with the same batching is used and the
table says so.

Usage:
    HF_HUB_OFFLINE=1 python bench/ingest_speed.py                 # examples/data x 8
    HF_HUB_OFFLINE=1 python bench/ingest_speed.py --data DIR --copies 1 --repeats 3
    HF_HUB_OFFLINE=1 python bench/ingest_speed.py --skip-llamaindex --chunk-tokens 510 --repeats 5
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_folder(data: Path, copies: int, root: Path) -> Path:
    out = root / "data"
    for i in range(copies):
        shutil.copytree(data, out / f"copy{i:02d}")
    return out


def time_llamaindex(texts: list[str], model_path: str, batch_size: int, store: Path) -> tuple[float, int, str]:
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from qdrant_tools.store import open_store

    try:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        embed = HuggingFaceEmbedding(model_name=model_path, embed_batch_size=batch_size, device="cpu")
        label = "HuggingFaceEmbedding"
    except ImportError:  # optional dependency missing: same batching through SentenceTransformer
        from llamaindex_posfair.integrations.embedding import PosFairEmbedding

        embed = PosFairEmbedding(model_name=model_path, calibration=None, embed_batch_size=batch_size)
        label = "SentenceTransformer stand-in"
    nodes = [TextNode(text=t) for t in texts]
    client = open_store(store)
    vs = QdrantVectorStore(client=client, collection_name="bench")
    embed.get_text_embedding_batch(texts[:batch_size])  # warm-up, not timed
    t0 = time.perf_counter()
    IngestionPipeline(transformations=[embed], vector_store=vs).run(nodes=nodes)
    dt = time.perf_counter() - t0
    n = client.count("bench").count
    client.close()
    return dt, n, label


def time_posfair(
    folder: Path, encoder, vectors: dict, batch_size: int, store: Path, chunk_tokens: int | None, subchunks: bool = True
) -> tuple[float, int]:
    from qdrant_tools.ingest import IngestConfig, ingest_path
    from qdrant_tools.layout import NodeLayout
    from qdrant_tools.store import open_store

    client = open_store(store)
    encoder.encode_documents(["warm up"] * batch_size)  # warm-up, not timed
    t0 = time.perf_counter()
    extra = {} if subchunks else {"subchunks": None}  # default: the shipped sub-chunk layout
    config = IngestConfig(show_progress=False, layout=NodeLayout(chunk_tokens=chunk_tokens, **extra))
    report = ingest_path(client, "bench", folder, vectors, config)
    dt = time.perf_counter() - t0
    client.close()
    return dt, report.chunks_written


def report(runs: dict, texts: list, docs: list, chunking, label: str, args, load_before: float) -> None:
    import statistics

    import torch

    print(
        f"folder: {args.data} x {args.copies} = {len(docs)} files, {len(texts)} chunks "
        f"({chunking.chunk_tokens}-token chunks), model all-MiniLM-L6-v2, batch {args.batch_size}, "
        f"torch threads {torch.get_num_threads()}, best of {args.repeats}, "
        f"load average {load_before:.2f} before / {os.getloadavg()[0]:.2f} after; posfair layout: "
        f"{'single vector' if args.no_subchunks else 'node + sub-chunks (shipped)'}"
    )
    names = [
        ("llamaindex", f"LlamaIndex {label} + QdrantVectorStore"),
        ("off", "posfair ingest, calibration off"),
        ("on", "posfair ingest, calibration on (B=128, 0.5)"),
    ]
    base_key = "off" if args.skip_llamaindex else "llamaindex"
    base = len(texts) / min(d for d, _ in runs[base_key])
    print(f"{'path':<52} {'chunks':>6} {'best s':>7} {'chunks/s':>9} {'vs ' + base_key:>13} {'on/off paired':>13}")
    paired = statistics.median(off / on for (on, _), (off, _) in zip(runs["on"], runs["off"]))
    for key, name in names:
        if not runs[key]:
            continue
        best, n = min(runs[key])
        cps = n / best
        extra = f"{paired:>12.3f}x" if key == "on" else ""
        print(f"{name:<52} {n:>6} {best:>7.2f} {cps:>9.1f} {cps / base:>12.2f}x {extra}")
    print(
        "# per-repeat on/off chunks/s ratios: "
        + " ".join(f"{off / on:.3f}" for (on, _), (off, _) in zip(runs["on"], runs["off"]))
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / "examples" / "data"))
    ap.add_argument("--copies", type=int, default=8, help="copies of the folder to ingest (default 8)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per path; the best counts (default 2)")
    ap.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default 32)")
    ap.add_argument("--chunk-tokens", type=int, default=None, help="as posfair ingest --chunk-tokens (default: auto)")
    ap.add_argument(
        "--no-subchunks",
        action="store_true",
        help="posfair: the single-vector layout (default: the shipped sub-chunks)",
    )
    ap.add_argument("--skip-llamaindex", action="store_true", help="time only posfair ingest, calibration off/on")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()

    from llamaindex_posfair import BUNDLED_MINILM, CalibrationConfig, PosFairEncoder, bundled_model_path
    from qdrant_tools.chunking import load_folder
    from qdrant_tools.encoding import ChunkEncoder
    from qdrant_tools.layout import NodeLayout

    tmp = Path(tempfile.mkdtemp(prefix="posfair-bench-"))
    try:
        folder = make_folder(Path(args.data), args.copies, tmp)
        enc = PosFairEncoder(BUNDLED_MINILM, calibration=CalibrationConfig(), batch_size=args.batch_size)
        plain = PosFairEncoder(BUNDLED_MINILM, calibration=None, batch_size=args.batch_size)
        docs, _, _ = load_folder(folder)
        encoding = NodeLayout(chunk_tokens=args.chunk_tokens, subchunks=None).point_encoding({"calibrated": enc})
        chunking = encoding.chunking
        chunker = ChunkEncoder({"calibrated": enc}, encoding)
        texts = [c.text for d in docs for c in chunker.chunks(d)]
        runs: dict[str, list[tuple[float, int]]] = {"llamaindex": [], "off": [], "on": []}
        label = ""
        load_before = os.getloadavg()[0]
        for r in range(args.repeats):
            paths = ["off", "on"] if args.skip_llamaindex else ["llamaindex", "off", "on"]
            for key in paths[r % len(paths) :] + paths[: r % len(paths)]:
                store = tmp / f"{key}{r}"
                if key == "llamaindex":
                    dt, n, label = time_llamaindex(texts, bundled_model_path(), args.batch_size, store)
                    runs[key].append((dt, n))
                else:
                    encoder, name = (plain, "vanilla") if key == "off" else (enc, "calibrated")
                    runs[key].append(
                        time_posfair(
                            folder,
                            encoder,
                            {name: encoder},
                            args.batch_size,
                            store,
                            args.chunk_tokens,
                            not args.no_subchunks,
                        )
                    )
        report(runs, texts, docs, chunking, label, args, load_before)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
