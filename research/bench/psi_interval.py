"""How far a row's PSI moves when the questions are drawn again: a bootstrap interval of PSI per row.

PSI (``1 - min/max`` of the position groups' mean nDCG@10) is read off three group means of 40 to 60
questions each. This script runs the default pipeline, ``VectorStoreIndex + PosFairVectorStore`` and
LlamaIndex's default pipeline with only its vector store swapped (the rows of
``research/bench/natural_peers.py --no-peers --vector-store``) on one split, and prints each row's PSI
with a 95% percentile interval from resampling questions within their position group (2,000 resamples),
and the share of resamples whose PSI is at most ``--bound``.

Usage::

    python research/bench/psi_interval.py --benchmark natural-docs --split test --memo /tmp/memo --bound 0.10
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from research.bench.natural_peers import BENCHMARKS, default_pipeline_system, store_systems


def psi_interval(
    per_query: Mapping[str, float], groups: Mapping[str, str], n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float, np.ndarray]:
    """``(psi, low, high, resampled)``: PSI of the group means and its 95% percentile interval, questions
    resampled with replacement inside their position group."""
    by_group: dict[str, list[float]] = defaultdict(list)
    for q, value in per_query.items():
        if q in groups:
            by_group[groups[q]].append(value)
    from llamaindex_posfair.eval.metrics import psi

    values = [np.asarray(v, dtype=float) for v in by_group.values()]
    rng = np.random.default_rng(seed)
    resampled = np.array(
        [psi([float(v[rng.integers(0, len(v), len(v))].mean()) for v in values]) for _ in range(n_resamples)]
    )
    lo, hi = np.percentile(resampled, [2.5, 97.5])
    return psi([float(v.mean()) for v in values]), float(lo), float(hi), resampled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", choices=BENCHMARKS, default="natural-docs")
    parser.add_argument("--split", choices=("dev", "test"), default="test")
    parser.add_argument("--top-k", type=int, default=100, help="nodes each LlamaIndex row retrieves per query")
    parser.add_argument("--memo", default=None, help="embedding memo folder of the default pipeline")
    parser.add_argument("--bound", type=float, default=0.10, help="PSI bound whose share of resamples is printed")
    args = parser.parse_args(argv)

    import logging

    from research.default_pipeline.peers import bundled_minilm_embedding
    from research.eval.harness.runner import run_eval
    from research.identifiers import load

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    bench = load(args.benchmark, args.split)
    pipeline = default_pipeline_system(args.memo)
    systems = [pipeline, *store_systems(pipeline, bundled_minilm_embedding(device="cpu"), args.top_k)]
    results = run_eval(bench, systems)
    print(f"{bench.name}: {bench.group_counts()}; nDCG@10 ×100 per group, PSI with its 95% interval\n")
    print(f"| row | groups | PSI | 95% interval | share of resamples with PSI ≤ {args.bound} |")
    print("|---|---|---|---|---|")
    for r in results:
        value, lo, hi, resampled = psi_interval(r.per_query, bench.groups)
        groups = " / ".join(f"{100 * v:.1f}" for v in r.ndcg.groups.values())
        share = float((resampled <= args.bound).mean())
        print(f"| {r.name} | {groups} | {value:.3f} | [{lo:.3f}, {hi:.3f}] | {share:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
