"""Two rows of the hybrid sweep compared query by query: a paired bootstrap interval, and where each ranks.

For each benchmark and split, the harmonic nDCG@10 (x100) of rows ``--a`` and ``--b`` of
``research/bench/hybrid_sweep.py``'s grid (the sweep's own harness and encoder memo), the difference ``a - b``
with its 95% paired bootstrap interval (resampled within position groups,
``llamaindex_posfair.eval.metrics.bootstrap_harmonic_diff``), and per row the share of queries whose
passage is ranked first, the share with it outside the top 10, and the mean nDCG@10 of an oracle that
takes the better of the two rows per query (how much any choice between them could gain).

Defaults: the shipped default against its bfloat16 twin (issue 22: is bfloat16 ingestion a quality
change?). ``--a "dense, node weight 0.3"`` compares the dense ranking alone with the hybrid default
(issue 21: what is left for fusion to gain?).

Usage:
    python research/bench/paired_intervals.py --memo ~/.cache/posfair/memo
    python research/bench/paired_intervals.py --memo ~/.cache/posfair/memo --a "dense, node weight 0.3" --splits dev
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hybrid_sweep as H  # the sweep's harness, grid and encoders

DEFAULT = "node weight 0.5 + BM25 x1.5, weighted RRF k=60"
BF16 = DEFAULT + ", bfloat16"


def shares(per_query: dict[str, float]) -> str:
    """``ranked first / outside the top 10`` as percentages of the queries."""
    values = list(per_query.values())
    first = 100 * sum(v >= 0.999 for v in values) / len(values)
    missed = 100 * sum(v == 0.0 for v in values) / len(values)
    return f"{first:.0f}% / {missed:.0f}%"


def compare(a: str, b: str, split: str, encoders: dict) -> list[str]:
    """Table rows of ``a`` against ``b`` on ``split`` of both benchmarks."""
    from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff
    from research.eval.benchmarks.loaders import load_shipped

    lines = []
    for bench in H.BENCHMARKS:
        rows = H.score(bench, split, encoders, [a, b])
        ra, rb = rows[a][0], rows[b][0]
        d, lo, hi = bootstrap_harmonic_diff(ra.per_query, rb.per_query, load_shipped(bench, split).groups)
        oracle = statistics.mean(max(ra.per_query[q], rb.per_query[q]) for q in ra.per_query)
        cells = [f"{bench} {split}", f"{100 * ra.ndcg.harmonic:.1f}", f"{100 * rb.ndcg.harmonic:.1f}"]
        cells += [f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]", shares(ra.per_query), shares(rb.per_query)]
        cells.append(f"{100 * oracle:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", default=BF16, help=f"a row label of the sweep's grid (default: {BF16!r})")
    parser.add_argument("--b", default=DEFAULT, help=f"the row compared with (default: {DEFAULT!r})")
    parser.add_argument("--splits", default="dev,test", help="comma-separated splits (default dev,test)")
    parser.add_argument("--memo", default=None, help="folder of the embedding memo (research/bench/hybrid_sweep.py's)")
    args = parser.parse_args(argv)
    import logging

    from llamaindex_posfair.encoders.spec import EncoderSpec
    from research.default_pipeline.system import cpu_load
    from research.eval.memo import MemoEncoder, VectorMemo

    labels = {g.label for g in H.GRID}
    for label in (args.a, args.b):
        if label not in labels:
            parser.error(f"{label!r} is not a row of research/bench/hybrid_sweep.py's GRID")
        if next(g for g in H.GRID if g.label == label).calibrated:
            parser.error(f"{label!r} has calibrated node vectors; this script compares uncalibrated rows only")
    H.GRID = tuple(g for g in H.GRID if g.label in (args.a, args.b))  # build only these two systems
    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    memo = VectorMemo(args.memo) if args.memo else VectorMemo()
    encoders = {
        (False, dtype): MemoEncoder(EncoderSpec(calibration=None, dtype=dtype).load(), memo)
        for dtype in {g.dtype for g in H.GRID}
    }
    print(f"a = {args.a}\nb = {args.b}\n")
    print(
        "| benchmark | H(a) | H(b) | a - b [95% paired bootstrap] | a: first / not in top 10 | b: same | oracle (mean nDCG) |"
    )
    print("|---|---|---|---|---|---|---|")
    for split in args.splits.split(","):
        print("\n".join(compare(args.a, args.b, split, encoders)), flush=True)
    print(f"\nload averages at the end {cpu_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
