"""Ingestion speed of the default pipeline against LlamaIndex's ``SentenceSplitter`` 128/20, in one run.

The shipped natural benchmark's passages (the first ``--passages`` of its corpus, 901 in all), the
bundled all-MiniLM-L6-v2, each path with its own default batch size, model loading excluded:

* ``llamaindex 128/20``: ``SentenceSplitter(chunk_size=128, chunk_overlap=20)`` nodes embedded by
  ``HuggingFaceEmbedding`` into an in-memory ``VectorStoreIndex`` (the peer of ``research/bench/natural_peers.py``;
  no store write: an advantage to it);
* ``posfair (default recipe)``: ``qdrant_tools.ingest.ingest_documents`` with ``Recipe.default()``'s
  layout (what ``posfair ingest`` runs after loading the model) into a fresh embedded Qdrant Edge store
  on disk: chunking, token counting, embedding, BM25, ``upsert(wait=True)``;
* ``posfair (encoded nodes)`` / ``(derived nodes)``: the same with the node vector encoded from the node
  text, or derived from the sub-chunk vectors (``node_source="subchunk-mean"``): whichever the default is not;
* ``posfair (float32)`` / ``(bfloat16)``: the default recipe with the encoder in the other precision
  (``--dtype``) than the default's automatic one (:func:`llamaindex_posfair.encoders.precision.default_dtype`);
* ``posfair (onnx)`` / ``(openvino)``: the default recipe with its (plain) encoder on ONNX Runtime / OpenVINO
  in float32 (``EncoderSpec(runtime=...)``, :mod:`llamaindex_posfair.encoders.runtime`; each runs where its
  extra, ``onnx`` or ``openvino``, is installed; the export is cached before the timing starts);
* ``llamaindex 128/20 (onnx)``: the peer with its embedding model on ONNX Runtime: ``PosFairEmbedding`` over
  the same exported float32 encoder as ``posfair (onnx)`` (what a speed-minded LlamaIndex user would run; LlamaIndex's
  fastembed and optimum integrations need a model hub or ``transformers<5``, so they do not install here);
* ``llamaindex 128/20 (bfloat16)``: the peer with its model in bfloat16 (``model_kwargs={"dtype": ...}``),
  for the same-precision ratio: posfair in bfloat16 against the peer in bfloat16;
* ``IngestionPipeline + PosFairVectorStore``: the same layout reached through LlamaIndex:
  ``IngestionPipeline([PosFairNodeParser, PosFairEmbedding], vector_store=PosFairVectorStore)`` into a
  fresh embedded store on disk (the store computes sub-chunks, fused rows and BM25).

``--only NAME,NAME`` runs a subset of the paths (the peer always runs: ratios are to it).

Derived node vectors are an opt-in: the hybrid sweep's rule did not choose them
(research/results/hybrid_sweep/sweep.md).

The paths take turns inside each repeat (the order rotates); the table gives each path's best
docs/s and, per repeat, its ratio to the peer's docs/s of the same repeat (paired, so a loaded
machine slows both). The load average is printed before and after, and last the model tokens each
path encodes (nearly all of ingestion is the model's forward pass, whose cost grows with them), and the
p50 latency of one short query's embedding on each runtime (``--query-calls`` calls each, taking turns).

Usage:
    python bench/ingest_vs_peer.py                      # 300 passages, 2 repeats
    python bench/ingest_vs_peer.py --passages 901 --repeats 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PEER = "llamaindex 128/20"
PEER_BF16 = "llamaindex 128/20 (bfloat16)"
PEER_ONNX = "llamaindex 128/20 (onnx)"
#: The exported runtimes the bench tries, with the package each needs.
EXPORTED = {"onnx": "onnxruntime", "openvino": "openvino"}
#: The short query of the query-embedding latency.
QUERY = "where did the mill stand?"


def passages(n: int) -> tuple[list[str], list[str]]:
    """``(doc_ids, texts)``: the first ``n`` passages of the natural benchmark's corpus."""
    from research.eval.benchmarks.loaders import load_shipped

    corpus = load_shipped("natural-docs", "test").corpus
    ids = list(corpus)[:n]
    return ids, [corpus[i] for i in ids]


def time_peer(ids: list[str], texts: list[str], embed: Any) -> tuple[float, int]:
    from llama_index.core import Document

    from research.default_pipeline.peers import splitter_recipe

    docs = [Document(text=t, id_=i) for i, t in zip(ids, texts)]
    t0 = time.perf_counter()
    index = splitter_recipe(128, 20)(docs, embed, 10)
    return time.perf_counter() - t0, len(index.nodes)


def peer_tokens(texts: list[str], encoder: Any) -> int:
    """The model tokens (special tokens included, cut at the window) of the peer's 128/20 nodes."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    nodes = SentenceSplitter(chunk_size=128, chunk_overlap=20).get_nodes_from_documents(
        [Document(text=t) for t in texts]
    )
    return sum(min(n, encoder.max_length) for n in encoder.count_tokens([x.get_content() for x in nodes]))


def posfair_tokens(ids: list[str], texts: list[str], encoder: Any, recipe: Any) -> tuple[int, int]:
    """``(node pass, sub-chunk pass)``: the model tokens the recipe's ingestion encodes (as :func:`peer_tokens`)."""
    from qdrant_tools import payload as P
    from qdrant_tools.chunking import SourceDocument, content_hash
    from qdrant_tools.encoding import ChunkEncoder

    name = next(iter(recipe.vectors))
    encoding = recipe.layout.point_encoding({name: encoder})
    chunks = [
        c
        for i, t in zip(ids, texts)
        for c in ChunkEncoder({name: encoder}, encoding).chunks(SourceDocument(i, t, i, content_hash(t)))
    ]
    nodes = (
        0
        if encoding.layout.node_source == "subchunk-mean"
        else sum(min(int(P.posfair_fields(c.payload)[P.N_TOKENS]), encoder.max_length) for c in chunks)
    )
    fields = [P.posfair_fields(c.payload) for c in chunks]
    subs = [
        c.text[a - f[P.START_CHAR] : b - f[P.START_CHAR]]
        for c, f in zip(chunks, fields)
        for a, b in f[P.SUBCHUNK_SPANS]
    ]
    return nodes, sum(min(n, encoder.max_length) for n in encoder.count_tokens(subs))


def time_posfair(ids: list[str], texts: list[str], encoder: Any, recipe: Any, work: Path) -> tuple[float, int]:
    from qdrant_tools.chunking import SourceDocument, content_hash
    from qdrant_tools.ingest import IngestConfig, ingest_documents
    from qdrant_tools.store import open_store

    docs = [SourceDocument(i, t, i, content_hash(t)) for i, t in zip(ids, texts)]
    folder = Path(tempfile.mkdtemp(dir=work))
    client = open_store(folder / "qdrant")
    config = recipe.ingest_settings(IngestConfig, show_progress=False)
    name = next(iter(recipe.vectors))
    t0 = time.perf_counter()
    report = ingest_documents(client, "bench", docs, {name: encoder}, config)
    seconds = time.perf_counter() - t0
    client.close()
    shutil.rmtree(folder, ignore_errors=True)
    return seconds, report.chunks_written


def time_pipeline(ids: list[str], texts: list[str], encoder: Any, recipe: Any, work: Path) -> tuple[float, int]:
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline

    from llamaindex_posfair import PosFairEmbedding, PosFairNodeParser, PosFairVectorStore
    from qdrant_tools.store import open_store

    docs = [Document(text=t, id_=i) for i, t in zip(ids, texts)]
    folder = Path(tempfile.mkdtemp(dir=work))
    client = open_store(folder / "qdrant")
    embed = PosFairEmbedding(encoder=encoder, warn_on_truncation=False)
    t0 = time.perf_counter()
    store = PosFairVectorStore("bench", client=client, embed_model=embed, layout=recipe)
    parser = PosFairNodeParser.from_embed_model(embed, recipe)
    nodes = IngestionPipeline(transformations=[parser, embed], vector_store=store).run(documents=docs)
    seconds = time.perf_counter() - t0
    client.close()
    shutil.rmtree(folder, ignore_errors=True)
    return seconds, len(nodes)


def paired_ratios(seconds: list[float], base: list[float]) -> str:
    """Table cells: each repeat's docs/s ratio to ``base``'s in the same repeat, then their median."""
    ratios = [b / s for s, b in zip(seconds, base)]
    return ", ".join(f"{x:.2f}x" for x in ratios) + f" | {statistics.median(ratios):.2f}x"


def print_same_precision(seconds: dict[str, list[float]], default_dtype: str) -> None:
    """posfair's ingestion against the peer in the same precision, paired per repeat."""
    paths = {"float32": (PEER, "posfair (float32)"), "bfloat16": (PEER_BF16, "posfair (bfloat16)")}
    paths[default_dtype] = (paths[default_dtype][0], "posfair (default recipe)")
    rows = []
    for dtype, (peer, ours) in paths.items():
        if peer in seconds and ours in seconds:
            rows.append(f"| {dtype} | {paired_ratios(seconds[ours], seconds[peer])} |")
    if rows:  # --only may leave out the paths of one precision or both
        print("\n| precision (both sides) | posfair vs peer, per repeat (paired) | median ratio |")
        print("|---|---|---|")
        print("\n".join(rows))


def exported_recipe(default: Any, runtime: str) -> Any:
    """``default`` with its encoder on an exported ``runtime`` in float32 (those runtimes' only precision)."""
    name = next(iter(default.vectors))
    spec = default.vectors[name].model_copy(update={"runtime": runtime, "dtype": "float32"})
    return default.model_copy(update={"vectors": {name: spec}})


def exported_encoders(default: Any) -> dict[str, tuple[Any, Any]]:
    """Runtime -> (recipe, loaded encoder) for each exported runtime whose package is installed (exported
    once into the cache here, before any timing)."""
    import importlib.util

    out = {}
    for runtime, package in EXPORTED.items():
        if importlib.util.find_spec(package) is None:
            print(f"posfair ({runtime}) skipped: {package} is not installed")
            continue
        recipe = exported_recipe(default, runtime)
        encoder = recipe.encoder_spec().load()
        encoder.encode_documents(["warm up"] * 8)
        out[runtime] = (recipe, encoder)
    return out


def print_query_latency(encoders: dict[str, Any], calls: int) -> None:
    """p50 and p90 of one short query's embedding per encoder, the encoders taking turns call by call."""
    times: dict[str, list[float]] = {k: [] for k in encoders}
    for enc in encoders.values():
        enc.encode_query(QUERY)
    for _ in range(calls):
        for name, enc in encoders.items():
            t0 = time.perf_counter()
            enc.encode_query(QUERY)
            times[name].append((time.perf_counter() - t0) * 1000)
    print(f"\n| runtime (one short query, {calls} calls each, taking turns) | p50 ms | p90 ms |")
    print("|---|---|---|")
    for name, ms in times.items():
        ms.sort()
        print(f"| {name} | {statistics.median(ms):.1f} | {ms[int(0.9 * (len(ms) - 1))]:.1f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=300, help="passages ingested per path (default 300 of 901)")
    ap.add_argument("--repeats", type=int, default=2, help="turns per path (default 2)")
    ap.add_argument("--only", default=None, help="comma-separated paths to run beside the peer (default: all)")
    ap.add_argument("--query-calls", type=int, default=50, help="calls per runtime for the query latency (default 50)")
    args = ap.parse_args(argv)
    import logging

    import torch

    from llamaindex_posfair.integrations.recipe import Recipe
    from research.default_pipeline.peers import bundled_minilm_embedding
    from research.default_pipeline.system import cpu_load

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    ids, texts = passages(args.passages)
    default = Recipe.default()
    flipped = "encoded" if default.layout.node_source == "subchunk-mean" else "subchunk-mean"
    other = default.model_copy(update={"layout": default.layout.replace(node_source=flipped)})
    encoder = default.encoder_spec().load()
    embed = bundled_minilm_embedding()
    runs: dict[str, Any] = {
        PEER: lambda: time_peer(ids, texts, embed),
        "posfair (default recipe)": lambda: time_posfair(ids, texts, encoder, default, work),
        f"posfair ({'derived' if flipped else 'encoded'} nodes)": lambda: time_posfair(
            ids, texts, encoder, other, work
        ),
    }
    other_dtype = "float32" if default.encoder_spec().dtype == "bfloat16" else "bfloat16"
    name = next(iter(default.vectors))
    spec = default.vectors[name].model_copy(update={"dtype": other_dtype})
    flipped_dtype = default.model_copy(update={"vectors": {name: spec}})
    flipped_encoder = flipped_dtype.encoder_spec().load()
    flipped_encoder.encode_documents(["warm up"] * 8)
    runs[f"posfair ({other_dtype})"] = lambda: time_posfair(ids, texts, flipped_encoder, flipped_dtype, work)
    exported = exported_encoders(default)
    for runtime, (recipe, enc) in exported.items():
        runs[f"posfair ({runtime})"] = lambda recipe=recipe, enc=enc: time_posfair(ids, texts, enc, recipe, work)
    if "onnx" in exported:
        from llamaindex_posfair import PosFairEmbedding

        peer_onnx = PosFairEmbedding(encoder=exported["onnx"][1], warn_on_truncation=False)
        runs[PEER_ONNX] = lambda: time_peer(ids, texts, peer_onnx)
    peer_bf16 = bundled_minilm_embedding(model_kwargs={"dtype": torch.bfloat16})
    peer_bf16.get_text_embedding_batch(["warm up"] * 8)
    runs[PEER_BF16] = lambda: time_peer(ids, texts, peer_bf16)
    runs["IngestionPipeline + PosFairVectorStore"] = lambda: time_pipeline(ids, texts, encoder, default, work)
    if args.only:
        keep = {PEER, *(x.strip() for x in args.only.split(","))}
        unknown = sorted(keep - set(runs))
        if unknown:
            ap.error(f"--only: unknown paths {unknown}; choose from {sorted(runs)}")
        runs = {k: v for k, v in runs.items() if k in keep}
    encoder.encode_documents(["warm up"] * 8)
    embed.get_text_embedding_batch(["warm up"] * 8)
    print(f"{len(texts)} natural-docs passages; load average before {cpu_load()}", flush=True)
    seconds: dict[str, list[float]] = {k: [] for k in runs}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for r in range(args.repeats):
            names = list(runs)
            names = names[r % len(names) :] + names[: r % len(names)]
            for name in names:
                dt, nodes = runs[name]()
                seconds[name].append(dt)
                print(f"  repeat {r + 1}: {name}: {dt:.1f} s ({len(texts) / dt:.2f} docs/s, {nodes} nodes)", flush=True)
    print(f"\nload average after {cpu_load()}\n")
    print(f"| path | best docs/s | docs/s vs {PEER}, per repeat (paired) | median ratio |")
    print("|---|---|---|---|")
    for name, secs in seconds.items():
        print(f"| {name} | {len(texts) / min(secs):.2f} | {paired_ratios(secs, seconds[PEER])} |")
    print_same_precision(seconds, default.encoder_spec().dtype or "float32")
    if PEER_ONNX in seconds:
        print(f"\n| path | docs/s vs {PEER_ONNX}, per repeat (paired) | median ratio |")
        print("|---|---|---|")
        for name, secs in seconds.items():
            print(f"| {name} | {paired_ratios(secs, seconds[PEER_ONNX])} |")
    by_dtype = {default.encoder_spec().dtype or "float32": encoder, other_dtype: flipped_encoder}
    latency = {f"torch ({dtype}){' default' if enc is encoder else ''}": enc for dtype, enc in by_dtype.items()}
    latency.update({f"{runtime} (float32)": enc for runtime, (_, enc) in exported.items()})
    print_query_latency(latency, args.query_calls)
    peer, (nodes, subs) = peer_tokens(texts, encoder), posfair_tokens(ids, texts, encoder, default)
    print(
        f"\nModel tokens encoded (special tokens included): {PEER} {peer:,}; posfair's default {nodes + subs:,} "
        f"(node pass {nodes:,} + sub-chunk pass {subs:,}), {(nodes + subs) / peer:.2f}x the peer's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
