"""Evaluate selection methods over all cyclic shifts of labelled problems.

Every test problem is run through all ``N`` cyclic shifts so the right
image visits every slot equally often; each single-pass method is then
scored on all passes (accuracy, per-slot accuracy, RStd, consistency).
Self-consistency reuses the same ``N`` passes (it *costs* ``N`` passes per
problem, reported in ``passes_per_query``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .bias import restricted_log_probs
from .calibrator import METHODS, AttentionGuidedCalibrator
from .metrics import accuracy, consistency, per_slot_accuracy, rstd
from .types import Candidates, MultiImageScorer

__all__ = ["ALL_METHODS", "MethodReport", "evaluate_methods", "format_table", "plot_per_slot"]

ALL_METHODS = (*METHODS, "self_consistency")


@dataclass(frozen=True)
class MethodReport:
    """Metrics of one method (accuracies in percent; RStd in percentage points)."""

    method: str
    n: int
    accuracy: float
    per_slot: list[float]
    rstd_sample: float
    rstd_population: float
    consistency: float
    passes_per_query: int


def evaluate_methods(
    scorer: MultiImageScorer,
    calibrator: AttentionGuidedCalibrator | None,
    samples: Sequence[Candidates],
    methods: Sequence[str] = ALL_METHODS,
) -> dict[str, MethodReport]:
    """Score ``methods`` on ``samples`` (all of one size ``N``) over all cyclic shifts.

    Args:
        scorer: the model (adapter or simulator).
        calibrator: a fitted calibrator (``None`` allowed if only
            ``"vanilla"``/``"self_consistency"`` are requested).
        samples: labelled problems, all with the same ``N``.
        methods: subset of :data:`ALL_METHODS`.

    Returns:
        ``{method: MethodReport}``.

    Raises:
        ValueError: on mixed ``N``, unlabelled samples or an unknown method.
    """
    if not samples:
        raise ValueError("samples must not be empty")
    n = samples[0].n
    if any(s.n != n for s in samples):
        raise ValueError(f"all samples must have the same number of candidates; got {sorted({s.n for s in samples})}")
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; valid: {ALL_METHODS}")
    needs_cal = [m for m in methods if m in ("pride", "attention", "ours")]
    if needs_cal and calibrator is None:
        raise ValueError(f"methods {needs_cal} need a fitted calibrator")

    preds: dict[str, list[int]] = {m: [] for m in methods}
    chosen: dict[str, list[list[int]]] = {m: [] for m in methods}
    gold_slots: list[int] = []
    for s in samples:
        if s.answer is None:
            raise ValueError("evaluation samples must be labelled (answer is None)")
        results = []
        for shift in range(n):
            sh = s.shifted(shift)
            gold_slots.append(int(sh.answer))
            results.append(scorer.score(sh.query, sh.images))
        # slot k under shift t holds original candidate (k - t) % n
        for m in methods:
            row = []
            if m == "self_consistency":
                total = torch.zeros(n, dtype=torch.float64)
                for t, r in enumerate(results):
                    total += restricted_log_probs(r.logits)[(torch.arange(n) + t) % n]
                orig = int(total.argmax())
                for t in range(n):
                    preds[m].append((orig + t) % n)
                    row.append(orig)
            else:
                for t, r in enumerate(results):
                    k = int(calibrator.scores(r, m).argmax()) if m != "vanilla" else int(r.logits.argmax())
                    preds[m].append(k)
                    row.append((k - t) % n)
            chosen[m].append(row)
    out = {}
    for m in methods:
        slots = per_slot_accuracy(preds[m], gold_slots, n) * 100.0
        out[m] = MethodReport(
            method=m,
            n=n,
            accuracy=accuracy(preds[m], gold_slots) * 100.0,
            per_slot=[float(x) for x in slots],
            rstd_sample=rstd(slots, "sample"),
            rstd_population=rstd(slots, "population"),
            consistency=consistency(chosen[m]) * 100.0,
            passes_per_query=n if m == "self_consistency" else 1,
        )
    return out


def format_table(rows: Sequence[tuple[str, MethodReport]], rstd_kind: str = "sample") -> str:
    """A Markdown table: label | N | Acc % | RStd | Cons % | passes."""
    head = (
        f"| method | N | Acc (%) | RStd ({rstd_kind} std, pp) | Cons. (%) | passes/query |\n|---|---|---|---|---|---|"
    )
    lines = [head]
    for label, r in rows:
        sd = r.rstd_sample if rstd_kind == "sample" else r.rstd_population
        lines.append(f"| {label} | {r.n} | {r.accuracy:.2f} | {sd:.2f} | {r.consistency:.1f} | {r.passes_per_query} |")
    return "\n".join(lines)


def plot_per_slot(reports: dict[str, MethodReport], path: str | Path, title: str = "") -> Path:
    """Bar chart of per-slot accuracy, one bar group per slot, one colour per method (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    methods = list(reports)
    n = next(iter(reports.values())).n
    width = 0.8 / max(len(methods), 1)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * n + 2), 3.2))
    for i, m in enumerate(methods):
        xs = [k + i * width for k in range(n)]
        ax.bar(xs, reports[m].per_slot, width=width, label=f"{m} ({reports[m].accuracy:.1f}%)")
    ax.set_xticks([k + width * (len(methods) - 1) / 2 for k in range(n)])
    ax.set_xticklabels([str(k + 1) for k in range(n)])
    ax.set_xlabel("slot of the right image")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title(title or f"per-slot accuracy, N={n}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
