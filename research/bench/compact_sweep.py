"""A compact layout: which vectors can leave RAM, chosen on the dev splits of all three shipped benchmarks.

The rule, fixed before the sweep (it is printed with the results):

    an arm is eligible when, on each of the three dev splits (natural-docs, needle-prose,
    needle-manuals), its harmonic nDCG@10 is within 0.5 points of the shipped arm's in the
    same run and its PSI is <= 0.05. Among the eligible arms whose recall@10 against the
    exhaustive top 10 is >= 0.95 in `bench/scale.py --sizes 100000 --storage LABEL` (the
    default search, first pass after reopening), choose the least RAM per node there; an arm
    earlier in ARMS wins when its RAM per node is within 5% of the least.

The shipped arm of the rule is ``ARMS[0]``, the float layout that was the default when the rule was written; the
rule chose ``ARMS[3]`` (``research.storage_arms.SHIPPED``), the default since. Every arm is a copy of the float
layout, so the sweep reruns as it ran.

This script runs the first half (dev quality) and prints the eligible arms; ``bench/scale.py --storage`` runs
the second on each of them.

Every arm holds the shipped layout's vectors (``Recipe.default()``: 254-token nodes, sentence-aligned sub-chunks
of <= 32 tokens, the fused multivector at node weight 0.5, the node vector with an int8 copy, BM25; uncalibrated
all-MiniLM-L6-v2), written by ``posfair ingest``'s code into the embedded store and then copied, vectors as
stored, into a collection kept as the arm says (:mod:`research.storage_arms`), with every segment indexed and
quantized as a large collection's are. Queries go through ``qdrant_tools.search.search`` with the recipe's
default search; a quantized vector's ranking is re-scored from its originals
(:func:`qdrant_tools.search.ranking_params`). The dev collections are small enough to be scored exactly (one
MaxSim scan of the fused multivector), so quality here measures what the quantized copy of the fused
multivector changes; the node vector's copy only matters for the candidates of large collections, which
``bench/scale.py`` measures.

Usage:
    python research/bench/compact_sweep.py --memo ~/.cache/posfair/memo                # the dev stage
    python research/bench/compact_sweep.py --memo ~/.cache/posfair/memo --split test   # every arm on test
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from research.storage_arms import ARMS, Arm, copy_as

BENCHMARKS = ("natural-docs", "needle-prose", "needle-manuals")
PSI_MAX = 0.05
WITHIN = 0.005  # 0.5 points of harmonic nDCG@10


@dataclass
class ArmSystem:
    """The float layout kept as ``arm``, as a harness ``RetrievalSystem`` (one ingestion shared by every arm)."""

    name: str
    encoder: Any
    layout: Any
    search: Any
    arm: Arm
    pool: Any
    kind: str = "compact-arm"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = float("nan")
    stats: Any = None

    def score(self, cache: Any) -> np.ndarray:
        from llamaindex_posfair.scoring import max_over_owners
        from research.default_pipeline.system import COLLECTION

        index = self.pool.get(self.encoder, cache.docs, cache.doc_ids, self.layout, bm25=True)
        target = f"arm{ARMS.index(self.arm)}"
        if not index.client.collection_exists(target):
            copy_as(index.client, COLLECTION, target, self.arm, index_all=True)
        queries = np.asarray(self.encoder.encode_queries(list(cache.queries)), dtype=np.float32)
        nodes, seconds = index.answer(queries, self.search, list(cache.queries), collection=target)
        self.stats = argparse.Namespace(query_p50_ms=float(np.percentile(1000 * seconds, 50)))
        self.vectors_per_passage = index.storage.vectors_per_passage
        return max_over_owners(nodes, index.vectors.doc_col, cache.n_docs)


def systems(encoder: Any, pool: Any) -> list[ArmSystem]:
    """One system per arm over the float layout, with the shipped search."""
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.encoding import resolve_chunking
    from research.default_pipeline.system import ranked_as

    recipe = Recipe.default()
    chunk_tokens = recipe.layout.chunk_tokens or resolve_chunking(encoder).chunk_tokens
    # the float layout the arms are copies of (ARMS[0])
    layout = recipe.layout.replace(chunk_tokens=chunk_tokens, fused_quantization=None, node_on_disk=False)
    search = ranked_as(layout, recipe.search)
    return [ArmSystem(a.label, encoder, layout, search, a, pool) for a in ARMS]


def score(name: str, split: str, encoder: Any) -> list[Any]:
    """``[(harness result, query p50 ms)]`` of every arm on one split."""
    from research.default_pipeline.system import IndexPool
    from research.eval.harness.runner import run_eval
    from research.identifiers import load

    with IndexPool(max_open=1) as pool:
        arms = systems(encoder, pool)
        results = run_eval(load(name, split), arms)
    return [(r, s.stats.query_p50_ms) for r, s in zip(results, arms)]


def eligible(dev: dict[str, list[Any]]) -> list[str]:
    """The arms the first half of the rule admits."""
    out = []
    for i, arm in enumerate(ARMS):
        rows = [dev[b][i][0].ndcg for b in BENCHMARKS]
        shipped = [dev[b][0][0].ndcg.harmonic for b in BENCHMARKS]
        close = all(r.harmonic >= s - WITHIN for r, s in zip(rows, shipped))
        if close and all(r.psi <= PSI_MAX for r in rows):
            out.append(arm.label)
    return out


def table(title: str, results: list[Any], bench: Any) -> str:
    """Markdown rows with the paired interval of each arm's harmonic mean against the shipped arm's."""
    from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff

    head = ["arm", "begin", "middle", "end", "harmonic", "PSI", "query p50 ms", "Δ vs shipped [95% CI]"]
    lines = [f"\n{title}", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    shipped = results[0][0]
    for r, p50 in results:
        g = r.ndcg.groups
        d, lo, hi = bootstrap_harmonic_diff(r.per_query, shipped.per_query, bench.groups)
        delta = "–" if r is shipped else f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        cells = [r.name, *(f"{100 * g[k]:.1f}" for k in ("begin", "middle", "end"))]
        cells += [f"{100 * r.ndcg.harmonic:.1f}", f"{r.ndcg.psi:.3f}", f"{p50:.1f}", delta]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memo", default=None, help="folder of the embedding memo (reused between runs)")
    parser.add_argument(
        "--split", choices=("dev", "test"), default="dev", help="dev: the sweep; test: every arm reported on test"
    )
    args = parser.parse_args(argv)
    import logging

    from llamaindex_posfair.integrations.recipe import Recipe
    from research.default_pipeline.system import cpu_load
    from research.eval.memo import MemoEncoder, VectorMemo
    from research.identifiers import load

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    t0 = time.perf_counter()
    spec = Recipe.default().encoder_spec()
    encoder = MemoEncoder(spec.load(), VectorMemo(args.memo) if args.memo else VectorMemo())
    print("The rule" + __doc__.split("This script")[0].split("The rule", 1)[1].rstrip())
    print(f"\nencoder: {spec.model_dump(exclude_defaults=True)}")
    dev = {}
    for b in BENCHMARKS:
        dev[b] = score(b, args.split, encoder)
        print(table(f"{b} {args.split}", dev[b], load(b, args.split)), flush=True)
    if args.split == "dev":
        print("\neligible for the RAM stage (bench/scale.py --sizes 100000 --storage LABEL):")
        for label in eligible(dev):
            print(f"- {label}")
    print(f"\nwall {time.perf_counter() - t0:.0f} s; load averages at the end {cpu_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
