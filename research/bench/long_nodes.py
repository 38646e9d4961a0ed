"""Node vectors of nodes longer than the model's window: ``node.embedding`` against the sub-chunk mean.

Runs, on the same split of natural-docs, needle-prose and needle-manuals, four rows through
``run_eval``: the default pipeline through the store (``PosFairNodeParser`` + ``PosFairVectorStore``) and
LlamaIndex's default pipeline with only its vector store swapped, each with candidate A (the node
vector is ``node.embedding``) and candidate B (a node whose text exceeds the encoder's window gets the
normalised mean of its sub-chunk vectors as its node vector, inside the fused rows too; what ships). The rule is
``research/results/long_nodes/rule.md``; it was written before the first run. Prints one markdown table
per benchmark, with B − A's paired bootstrap interval.

Usage::

    python research/bench/long_nodes.py --split dev --memo /tmp/w/memo
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

BENCHMARKS = ("natural-docs", "needle-prose", "needle-manuals")


@contextlib.contextmanager
def candidate(name: str) -> Iterator[None]:
    """While open, ingestion makes node vectors as candidate ``name`` does.

    B ships (:func:`qdrant_tools.encoding.whole_text_node_vectors`, called by ``ChunkEncoder.encode``);
    A replaces that function by one that keeps every given or encoded node vector. (The dev run
    predates B's landing and applied B by wrapping ``ChunkEncoder.encode``, with the same effect.)
    """
    from qdrant_tools import encoding

    shipped = encoding.whole_text_node_vectors
    if name == "A":
        encoding.whole_text_node_vectors = lambda node, subs, truncated: node
    try:
        yield
    finally:
        encoding.whole_text_node_vectors = shipped


def with_candidate(name: str, builder: Any) -> Any:
    """``builder`` (a peer recipe) run with :func:`candidate` ``name`` open."""

    def build(docs: list[Any], embed_model: Any, top_k: int) -> Any:
        with candidate(name):
            return builder(docs, embed_model, top_k)

    return build


def systems(pipeline: Any, hf_embed: Any, top_k: int) -> list[Any]:
    """A and B of the default pipeline through the store, then A and B of the swapped LlamaIndex default."""
    from llama_index.core.node_parser import SentenceSplitter

    from llamaindex_posfair import PosFairEmbedding
    from research.default_pipeline.peers import LlamaIndexPeer, posfair_store_recipe

    embed = PosFairEmbedding(encoder=pipeline.encoder, embed_batch_size=64)
    default = posfair_store_recipe()
    swapped = posfair_store_recipe(SentenceSplitter(), store_embed_model=embed)
    return [
        LlamaIndexPeer("default pipeline through the store, A", embed, with_candidate("A", default), top_k),
        LlamaIndexPeer("default pipeline through the store, B", embed, with_candidate("B", default), top_k),
        LlamaIndexPeer("LlamaIndex default, store swapped, A", hf_embed, with_candidate("A", swapped), top_k),
        LlamaIndexPeer("LlamaIndex default, store swapped, B", hf_embed, with_candidate("B", swapped), top_k),
    ]


def table(results: list[Any], bench: Any) -> str:
    """Rows with position groups, harmonic, PSI; B rows with B − A [95% paired bootstrap interval]."""
    from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff

    head = ["system", *bench.group_order, "harmonic", "PSI", "B − A ΔH [95% CI]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(results):
        cells = [r.name, *[f"{100 * r.ndcg.groups.get(g, math.nan):.1f}" for g in bench.group_order]]
        cells += [f"{100 * r.ndcg.harmonic:.1f}", f"{r.ndcg.psi:.3f}"]
        if i % 2:
            d, lo, hi = bootstrap_harmonic_diff(r.per_query, results[i - 1].per_query, bench.groups)
            cells.append(f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        else:
            cells.append("–")
        lines.append("| " + " | ".join(cells) + " |")
    d, lo, hi = bootstrap_harmonic_diff(results[1].per_query, results[3].per_query, bench.groups)
    lines.append(
        f"\ndefault pipeline through the store B − LlamaIndex default swapped B: ΔH {100 * d:+.1f} "
        f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "test"), default="dev", help="split (choose on dev, report test)")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS), help="comma-separated benchmark names")
    parser.add_argument("--top-k", type=int, default=100, help="nodes each row retrieves per query (default 100)")
    parser.add_argument("--memo", default=None, help="embedding memo folder of the default pipeline's encoder")
    args = parser.parse_args(argv)

    import logging

    from research.bench.natural_peers import default_pipeline_system
    from research.default_pipeline.peers import bundled_minilm_embedding
    from research.default_pipeline.system import cpu_load
    from research.eval.harness.runner import run_eval
    from research.identifiers import load

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    logging.getLogger("llamaindex_posfair").setLevel(logging.ERROR)
    hf_embed = bundled_minilm_embedding(device="cpu")
    pipeline = default_pipeline_system(args.memo)
    for name in args.benchmarks.split(","):
        t0 = time.perf_counter()
        bench = load(name, args.split)
        results = run_eval(bench, systems(pipeline, hf_embed, args.top_k))
        print(f"\n{bench.name}: {len(bench.queries)} queries, {len(bench.corpus)} passages; nDCG@10 ×100\n")
        print(table(results, bench))
        print(f"\nwall {time.perf_counter() - t0:.0f} s; load averages {cpu_load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
