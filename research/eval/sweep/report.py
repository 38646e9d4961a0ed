"""Tables (CSV + markdown) and PNG plots of evaluation results.

Example:
    >>> from research.eval.sweep.report import format_markdown
    >>> # md = format_markdown(results, group_order=("begin", "middle", "end"), caption="...")
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff

from ..harness.plots import plot_groups, pyplot, save_figure
from ..harness.runner import SystemResult

if TYPE_CHECKING:
    from ..benchmarks.data import PositionBenchmark
    from .protocol import ProtocolResult, SelectionRecord

__all__ = [
    "format_markdown",
    "plot_tradeoff",
    "write_csv",
    "write_outputs",
    "write_per_query",
    "write_selection",
    "write_summary",
]


def write_per_query(results: Sequence[SystemResult], groups: Mapping[str, str], path: str | Path) -> Path:
    """Per-query nDCG@10 of every system (long format: system, query, group, ndcg)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["system", "benchmark", "query", "group", "ndcg@10"])
        for r in results:
            for q, v in r.per_query.items():
                w.writerow([r.name, r.benchmark, q, groups.get(q, ""), f"{v:.6f}"])
    return path


def write_csv(results: Sequence[SystemResult], group_order: Sequence[str], path: str | Path) -> Path:
    """One row per system; scores in [0, 1]."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [r.row(group_order) for r in results]
    fields: list[str] = []
    for row in rows:
        for key in row:
            if key not in fields:
                fields.append(key)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()})
    return path


def _pct(v: Any) -> str:
    if isinstance(v, float):
        return "–" if math.isnan(v) else f"{100 * v:.1f}"
    return str(v)


def format_markdown(
    results: Sequence[SystemResult],
    group_order: Sequence[str],
    caption: str = "",
    recall_k: int | None = 10,
    baseline: SystemResult | None = None,
    groups: Mapping[str, str] | None = None,
) -> str:
    """A markdown table: per-group nDCG@10, harmonic/arithmetic mean, PSI (×100).

    With ``baseline`` and ``groups`` a column gives each system's harmonic-mean
    difference to the baseline with a 95% paired bootstrap interval (×100).
    """
    head = ["system", *[f"nDCG@10 {g}" for g in group_order], "harmonic", "arithmetic", "PSI"]
    with_ci = baseline is not None and groups is not None
    if with_ci:
        head.append(f"ΔH vs {baseline.name} [95% CI]")
    if recall_k is not None:
        head.append(f"R@{recall_k}")
    head.append("vectors/passage")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r.name, *[_pct(r.ndcg.groups.get(g, math.nan)) for g in group_order]]
        cells += [_pct(r.ndcg.harmonic), _pct(r.ndcg.arithmetic), f"{r.ndcg.psi:.3f}"]
        if with_ci:
            if r is baseline:
                cells.append("–")
            else:
                d, lo, hi = bootstrap_harmonic_diff(r.per_query, baseline.per_query, groups)
                cells.append(f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        if recall_k is not None:
            cells.append(_pct(r.recall.get(recall_k, math.nan)))
        cells.append(f"{r.vectors_per_passage:g}")
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    return f"{caption}\n\n{text}\n" if caption else text + "\n"


def plot_tradeoff(
    grid: Sequence[SystemResult],
    path: str | Path,
    reference: Sequence[SystemResult] = (),
    title: str = "",
) -> Path:
    """PSI (x, lower is fairer) vs harmonic-mean nDCG@10 (y) across the grid.

    Colour = λ, marker = layer set, size = B; ``reference`` systems are labelled.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=100)
    layer_markers = {"last": "o", "last_half": "s"}
    sizes = sorted({r.params.get("B") for r in grid if r.params.get("B") is not None})
    size_of = {b: 30 + 40 * i for i, b in enumerate(sizes)}
    sc = None
    for layers in sorted({str(r.params.get("layers")) for r in grid}):
        pts = [r for r in grid if str(r.params.get("layers")) == layers]
        sc = ax.scatter(
            [r.ndcg.psi for r in pts],
            [100 * r.ndcg.harmonic for r in pts],
            c=[float(r.params.get("lambda", 0)) for r in pts],
            s=[size_of.get(r.params.get("B"), 40) for r in pts],
            marker=layer_markers.get(layers, "^"),
            cmap="viridis",
            vmin=0.0,
            vmax=1.0,
            edgecolors="k",
            linewidths=0.4,
            label=f"layers={layers}",
        )
    for r in reference:
        ax.scatter([r.ndcg.psi], [100 * r.ndcg.harmonic], marker="x", color="red", s=60, zorder=5)
        ax.annotate(r.name, (r.ndcg.psi, 100 * r.ndcg.harmonic), fontsize=7, xytext=(4, 4), textcoords="offset points")
    if sc is not None:
        fig.colorbar(sc, ax=ax, label="λ (strength)")
    ax.set_xlabel("PSI = 1 − min/max over groups (lower is fairer)")
    ax.set_ylabel("harmonic mean nDCG@10 (%)")
    ax.set_title(title or "fairness vs quality across the calibration grid")
    ax.grid(alpha=0.3)
    if sizes:
        ax.legend(fontsize=7, loc="best", title=f"marker size: B = {', '.join(map(str, sizes))}", title_fontsize=7)
    return save_figure(fig, path)


# ------------------------------------------------------------------ the files of `python -m research.eval`
def write_selection(record: SelectionRecord, bench: PositionBenchmark, out: Path, model_label: str) -> list[Path]:
    """``grid.csv``, ``grid.md`` and ``psi_vs_harmonic.png`` of a selection record on ``bench``."""
    from .protocol import grid_caption

    scored = record.results
    paths = [write_csv(scored + list(record.mix), bench.group_order, out / "grid.csv")]
    table = format_markdown(
        sorted(scored, key=lambda r: -r.ndcg.harmonic),
        bench.group_order,
        caption=grid_caption(record),
        baseline=record.vanilla,
        groups=bench.groups,
    )
    (out / "grid.md").write_text(table, encoding="utf-8")
    paths.append(out / "grid.md")
    refs = [record.vanilla] + ([replace(record.default, name="default")] if record.default else [])
    refs.append(replace(record.best_grid, name=f"best: {record.best_grid.name}"))
    title = f"{model_label}: PSI vs harmonic nDCG@10 on {bench.name}"
    paths.append(plot_tradeoff(scored[1:], out / "psi_vs_harmonic.png", reference=refs, title=title))
    return paths


def write_summary(
    results: Sequence[SystemResult], bench: PositionBenchmark, out: Path, caption: str, model_label: str
) -> tuple[str, list[Path]]:
    """``summary.csv``, ``per_query.csv``, ``summary.md`` and ``ndcg_by_group.png``; returns the markdown too."""
    paths = [
        write_csv(results, bench.group_order, out / "summary.csv"),
        write_per_query(results, bench.groups, out / "per_query.csv"),
    ]
    table = format_markdown(results, bench.group_order, caption=caption, baseline=results[0], groups=bench.groups)
    (out / "summary.md").write_text(table, encoding="utf-8")
    paths.append(out / "summary.md")
    title = f"{model_label} on {bench.name}"
    paths.append(plot_groups(results, bench.group_order, out / "ndcg_by_group.png", title=title))
    return table, paths


def write_outputs(
    outcome: ProtocolResult,
    report: PositionBenchmark,
    select: PositionBenchmark | None,
    out: str | Path,
    *,
    caption: str,
    model_label: str,
    meta: Mapping[str, Any],
) -> tuple[str, list[Path]]:
    """Every file of one ``python -m research.eval`` run in ``out`` (``run.json`` holds ``meta``).

    Args:
        outcome: What ``Protocol.run`` returned.
        report: The reported benchmark.
        select: The selection benchmark (``None`` without selection).
        out: Output folder (created).
        caption: Caption of ``summary.md`` (``protocol.summary_caption``).
        model_label: Model name in plot titles.
        meta: Provenance written to ``run.json``.

    Returns:
        The ``summary.md`` table and the paths written.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    if outcome.selection is not None and select is not None:
        paths += write_selection(outcome.selection, select, out, model_label)
    table, written = write_summary(outcome.results, report, out, caption, model_label)
    paths += written
    (out / "run.json").write_text(json.dumps(dict(meta), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths.append(out / "run.json")
    return table, paths
