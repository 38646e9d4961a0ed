"""Run systems on a benchmark and score them per position group.

Example:
    >>> from research.eval.harness.runner import EvalConfig, run_eval
    >>> EvalConfig().k, EvalConfig().recall_ks
    (10, (10, 100))
    >>> # results = run_eval(load_shipped("needle-prose", "dev"), [DenseSystem("vanilla", encoder)])
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from llamaindex_posfair.eval import metrics

from ..benchmarks.data import PositionBenchmark
from .systems import EncodeCache

__all__ = ["EvalConfig", "SystemResult", "evaluate_scores", "run_eval"]


@dataclass(frozen=True)
class EvalConfig:
    """Scoring settings.

    Args:
        k: nDCG cut-off (10).
        recall_ks: Recall cut-offs reported besides nDCG.
    """

    k: int = 10
    recall_ks: tuple[int, ...] = (10, 100)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be a positive integer, got {self.k}")
        if any(r < 1 for r in self.recall_ks):
            raise ValueError(f"recall_ks must be positive integers, got {self.recall_ks}")


@dataclass(frozen=True)
class SystemResult:
    """Scores of one system on one benchmark split."""

    name: str
    kind: str
    params: dict[str, Any]
    benchmark: str
    ndcg: metrics.GroupSummary
    recall: dict[int, float]
    vectors_per_passage: float
    seconds: float
    per_query: dict[str, float] = field(default_factory=dict, repr=False)
    bucketed_psi: dict[str, float] = field(default_factory=dict)

    def row(self, group_order: Sequence[str]) -> dict[str, Any]:
        """Flat dict for CSV/markdown output (scores in [0, 1])."""
        r: dict[str, Any] = {
            "system": self.name,
            "kind": self.kind,
            "benchmark": self.benchmark,
            "B": self.params.get("B", ""),
            "lambda": self.params.get("lambda", ""),
            "layers": self.params.get("layers", ""),
        }
        for g in group_order:
            r[f"ndcg@10[{g}]"] = self.ndcg.groups.get(g, math.nan)
        r.update(
            {
                "harmonic": self.ndcg.harmonic,
                "arithmetic": self.ndcg.arithmetic,
                "psi": self.ndcg.psi,
                "overall": self.ndcg.overall,
            }
        )
        for k, v in sorted(self.recall.items()):
            r[f"recall@{k}"] = v
        r["vectors/passage"] = self.vectors_per_passage
        r["seconds"] = round(self.seconds, 1)
        return r


def evaluate_scores(
    scores: Any,
    bench: PositionBenchmark,
    config: EvalConfig = EvalConfig(),
) -> tuple[metrics.GroupSummary, dict[int, float], dict[str, float]]:
    """Score a ``[n_queries, n_docs]`` matrix: nDCG@k per group, recall@k, per-query nDCG."""
    depth = max((config.k, *config.recall_ks))
    qrels = [bench.qrels.get(q, {}) for q in bench.query_ids]  # for the tie rule (metrics.rank_scores)
    ranked = dict(zip(bench.query_ids, metrics.rank_scores(scores, bench.doc_ids, depth, qrels)))
    ndcg = metrics.per_query(ranked, bench.qrels, "ndcg", config.k)
    summary = metrics.summarize(ndcg, bench.groups, bench.group_order)
    recall = {}
    for rk in config.recall_ks:
        vals = metrics.per_query(ranked, bench.qrels, "recall", rk)
        recall[rk] = sum(vals.values()) / len(vals) if vals else math.nan
    return summary, recall, ndcg


def run_eval(
    bench: PositionBenchmark,
    systems: Iterable[Any],
    config: EvalConfig = EvalConfig(),
    batch_size: int = 16,
    show_progress_bar: bool = True,
    cache: EncodeCache | None = None,
    cache_dir: str | None = None,
) -> list[SystemResult]:
    """Score every system on ``bench`` (exact retrieval by numpy dot products).

    Args:
        bench: The benchmark split.
        systems: Objects following ``systems.RetrievalSystem``.
        config: Cut-offs.
        batch_size: Texts per forward pass.
        show_progress_bar: tqdm over systems and over passages being encoded.
        cache: Reuse embeddings from an earlier call on the same benchmark.
        cache_dir: Keep embeddings on disk there too (resumable runs).

    Returns:
        One ``SystemResult`` per system, in order.
    """
    systems = list(systems)
    cache = cache or EncodeCache(
        [bench.corpus[d] for d in bench.doc_ids],
        [bench.queries[q] for q in bench.query_ids],
        batch_size=batch_size,
        show_progress_bar=show_progress_bar,
        cache_dir=cache_dir,
        doc_ids=bench.doc_ids,
    )
    results = []
    bar = tqdm(systems, desc=f"systems on {bench.name}", unit="system", disable=not show_progress_bar)
    for system in bar:
        bar.set_postfix_str(system.name)
        t0 = time.perf_counter()
        scores = system.score(cache)
        seconds = time.perf_counter() - t0
        summary, recall, ndcg = evaluate_scores(scores, bench, config)
        bpsi = metrics.bucketed_psi(ndcg, bench.position_bins, bench.length_buckets) if bench.length_buckets else {}
        results.append(
            SystemResult(
                name=system.name,
                kind=system.kind,
                params=dict(system.params),
                benchmark=bench.name,
                ndcg=summary,
                recall=recall,
                vectors_per_passage=system.vectors_per_passage,
                seconds=seconds,
                per_query=ndcg,
                bucketed_psi=bpsi,
            )
        )
    return results
