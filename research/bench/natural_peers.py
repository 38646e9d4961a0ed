"""What LlamaIndex users run today, next to the default pipeline: one harness, one benchmark, one model.

Runs the LlamaIndex peers of :mod:`research.default_pipeline.peers` (defaults, SentenceSplitter
256/20 and 128/20, sentence window, the dense + BM25 fusion recipe) with the bundled
all-MiniLM-L6-v2 loaded as a LlamaIndex user loads it (``HuggingFaceEmbedding(model_name=FOLDER)``,
mean pooling, ``max_seq_length`` 256), and — unless ``--no-default-pipeline`` — the default pipeline as
``posfair ingest`` ships it (254-token nodes, ≤32-token sub-chunks, calibration off, the
embedded Qdrant Edge store, exact MaxSim up to 10,000 nodes), all through ``run_eval`` on
one shipped benchmark split, scored at passage level by nDCG@10. Prints a markdown table:

* begin / middle / end / harmonic: nDCG@10 ×100 per position group and their harmonic mean;
  PSI = 1 − min/max over the groups;
* vectors/passage: dense vectors stored per passage (the default pipeline: node vectors and
  sub-chunk vectors; the hybrid's BM25 postings are not counted); every vector is 384
  float32 (1,536 bytes);
* ingest docs/s: passages per second of index building, splitting and embedding included
  (the default pipeline: ``ingest_documents`` into the store);
* query p50: one retrieval in ms, query embedding excluded (peers: the LlamaIndex retriever
  and postprocessors; the default pipeline: one ``search`` call through the store).

Usage::

    nice -n 5 python research/bench/natural_peers.py --benchmark natural-docs --split test
    nice -n 5 python research/bench/natural_peers.py --benchmark needle-prose --split test --no-default-pipeline

Choose on ``dev``, report ``test``. Timings depend on the machine and its load (the
caption prints the load averages).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

BENCHMARKS = ("natural-docs", "needle-prose", "needle-manuals", "docs-identifiers")


def default_pipeline_system(memo: str | None = None) -> Any:
    """The shipped default pipeline (``posfair ingest`` without flags: ``Recipe.default()``) as a harness system."""
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.encoding import resolve_chunking
    from research.default_pipeline.system import DefaultPipelineSystem, ranked_as
    from research.eval.memo import MemoEncoder, VectorMemo

    recipe = Recipe.default()
    encoder = MemoEncoder(recipe.encoder_spec().load(), VectorMemo(memo) if memo else None)
    layout = recipe.layout.replace(chunk_tokens=recipe.layout.chunk_tokens or resolve_chunking(encoder).chunk_tokens)
    search = ranked_as(layout, recipe.search)
    return DefaultPipelineSystem(
        "default pipeline (shipped default)", encoder, layout, search, bm25=recipe.bm25 is not None
    )


def store_systems(pipeline: Any, hf_embed: Any, top_k: int) -> list[Any]:
    """The default search reached through LlamaIndex: ``VectorStoreIndex`` + ``PosFairVectorStore`` with
    ``PosFairNodeParser`` nodes, and LlamaIndex's default pipeline (``SentenceSplitter()``, the bundled model as
    ``HuggingFaceEmbedding``) with only its vector store swapped. Both share the default pipeline's encoder (and memo),
    so equal texts get equal vectors and the rows differ by the path alone."""
    from llama_index.core.node_parser import SentenceSplitter

    from llamaindex_posfair import PosFairEmbedding
    from research.default_pipeline.peers import LlamaIndexPeer, posfair_store_recipe

    embed = PosFairEmbedding(encoder=pipeline.encoder, embed_batch_size=64)
    return [
        LlamaIndexPeer("VectorStoreIndex + PosFairVectorStore", embed, posfair_store_recipe(), top_k),
        LlamaIndexPeer(
            "llamaindex-default, vector store swapped for PosFairVectorStore",
            hf_embed,
            posfair_store_recipe(SentenceSplitter(), store_embed_model=embed),
            top_k,
        ),
    ]


def costs(system: Any) -> tuple[float, float, float]:
    """``(vectors/passage, ingest docs/s, query p50 ms)`` of a scored peer or default-pipeline system."""
    stats = system.stats
    if hasattr(stats, "ingest_docs_per_second"):  # a LlamaIndex peer
        return stats.vectors_per_passage, stats.ingest_docs_per_second, stats.query_p50_ms
    storage = stats.storage  # the default pipeline: chunks/s -> passages/s
    docs_per_second = stats.ingest_chunks_per_second * storage.passages / max(storage.nodes, 1)
    return storage.vectors_per_passage, docs_per_second, stats.query_p50_ms


def _num(value: float, spec: str) -> str:
    return "n/a" if value is None or math.isnan(value) else format(value, spec)


def table(results: list[Any], systems: list[Any], bench: Any) -> str:
    """The comparison; with the default pipeline in the run, each peer row also gives the default pipeline's harmonic-mean gain
    over it with a 95% paired bootstrap interval (resampled within position groups)."""
    from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff

    main = next((r for r in results if r.name.startswith("default pipeline")), None)
    head = ["system", *bench.group_order, "harmonic", "PSI", "vectors/passage", "ingest docs/s", "query p50 ms"]
    head += ["default pipeline ΔH [95% CI]"] if main is not None else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for result, system in zip(results, systems):
        vectors, docs_per_second, p50 = costs(system)
        cells = [result.name, *[_num(100 * result.ndcg.groups.get(g, math.nan), ".1f") for g in bench.group_order]]
        cells += [_num(100 * result.ndcg.harmonic, ".1f"), _num(result.ndcg.psi, ".3f")]
        cells += [_num(vectors, ".2f"), _num(docs_per_second, ".1f"), _num(p50, ".1f")]
        if main is not None:
            if result is main:
                cells.append("–")
            else:
                d, lo, hi = bootstrap_harmonic_diff(main.per_query, result.per_query, bench.groups)
                cells.append(f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--benchmark",
        choices=BENCHMARKS,
        default="natural-docs",
        help="shipped benchmark (docs-identifiers: research/identifiers.py)",
    )
    parser.add_argument("--split", choices=("dev", "test"), default="test", help="split (choose on dev, report test)")
    parser.add_argument("--top-k", type=int, default=100, help="nodes each peer retrieves per query (default 100)")
    parser.add_argument("--no-default-pipeline", action="store_true", help="run the LlamaIndex peers only")
    parser.add_argument(
        "--no-peers", action="store_true", help="run the default pipeline (and --vector-store rows) only"
    )
    parser.add_argument(
        "--vector-store",
        action="store_true",
        help="also the default pipeline through VectorStoreIndex + PosFairVectorStore, and LlamaIndex's default pipeline "
        "with only its vector store swapped for PosFairVectorStore",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    parser.add_argument(
        "--memo", default=None, help="embedding memo folder of the default pipeline (research/bench/hybrid_sweep.py's)"
    )
    args = parser.parse_args(argv)

    import logging

    import torch

    from research.default_pipeline.peers import bundled_minilm_embedding, llamaindex_peers
    from research.default_pipeline.system import cpu_load
    from research.eval.harness.runner import run_eval
    from research.identifiers import load

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    bench = load(args.benchmark, args.split)
    hf_embed = bundled_minilm_embedding(device="cpu")
    systems: list[Any] = [] if args.no_peers else llamaindex_peers(hf_embed, top_k=args.top_k)
    if not args.no_default_pipeline:
        pipeline = default_pipeline_system(args.memo)
        systems.append(pipeline)
        if args.vector_store:
            systems.extend(store_systems(pipeline, hf_embed, args.top_k))
    results = run_eval(bench, systems, show_progress_bar=args.progress)
    wall = time.perf_counter() - t0
    print(
        f"{bench.name}: {len(bench.queries)} queries ({bench.group_counts()}), {len(bench.corpus)} passages; "
        f"all-MiniLM-L6-v2 (max_seq_length 256), file-level nDCG@10 ×100, peers retrieve {args.top_k} nodes/query\n"
    )
    print(table(results, systems, bench))
    seconds = ", ".join(f"{r.name}: {r.seconds:.0f} s" for r in results)
    print(
        f"\nwall {wall:.0f} s; torch threads {torch.get_num_threads()}; load averages at the end {cpu_load()}\n"
        f"per system (index + queries): {seconds}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
