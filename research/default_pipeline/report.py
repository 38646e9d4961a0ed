"""Files of ``python -m research.default_pipeline``: the sweep and the report as CSV + markdown, two plots, ``run.json``.

Example:
    >>> from research.default_pipeline.report import write_default_pipeline
    >>> # write_default_pipeline(outcome, test_bench, dev_bench, "research/results/default_pipeline", meta={...})
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff
from research.eval.benchmarks.data import PositionBenchmark
from research.eval.harness.plots import plot_groups, pyplot

from .protocol import DefaultPipelineOutcome, Scored

__all__ = ["captions", "plot_frontier", "row", "table_markdown", "write_default_pipeline"]

_COLUMNS = (
    "nDCG@10 ×100 per position group, file level (a passage scores its best node; passages without a "
    "returned node rank last); PSI = 1 − min/max; ΔH = harmonic-mean difference to the first row with a 95% "
    "paired bootstrap interval (queries resampled within groups). Prefetch R@10 = share of the exact top-10 "
    "nodes (numpy over every stored vector) the store returns in its top 10. bytes/node = vector bytes per "
    "node: float32 (4·dim per vector), and int8 = float32 node vector + 1 byte per sub-chunk dimension (the "
    "quantized copy; Qdrant keeps the float originals besides, on disk if asked); bytes/passage = float32 vector "
    "bytes of the whole corpus per passage (the storage unit the rule compares: node sizes differ). chunks/s = nodes ingested "
    "per second, memoised embeddings charged at their measured cold cost. p50/p99 = wall time of one "
    "`qdrant_tools.search.search` call (query embedding not included)."
)


def captions(
    outcome: DefaultPipelineOutcome, report: PositionBenchmark, select: PositionBenchmark, store: str
) -> tuple[str, str]:
    """Captions of ``summary.md`` (reported split) and ``sweep.md`` (selection split)."""
    chosen = outcome.chosen.setting.label()
    summary = (
        f"The default pipeline on `{report.name}` ({len(report.queries)} queries, {len(report.corpus)} passages): "
        f"passages ingested by `qdrant_tools.ingest.ingest_documents` into {store}, queries answered by "
        f"`qdrant_tools.search.search`. First row: the default pipeline as shipped. Chosen on `{select.name}` only: "
        f"{chosen}. `[exact]` = the same vectors scored by exact MaxSim (no prefetch bound); `int8` through the "
        f"store = int8 sub-chunk collection (scalar quantization as the store applies it; qdrant-client's "
        f"local mode ignores it); `[int8-simulated]` = the query in numpy (as the store runs it: two-stage, or exact in a small collection) with sub-chunk vectors rounded "
        f"through int8 scalar quantization (no rescoring); rows with a larger prefetch limit than the grid's "
        f"are references (the prefetch's recall curve), not candidates. " + _COLUMNS
    )
    sweep = (
        f"The sweep on `{select.name}` (selection split), sorted by harmonic mean: layout stage (every node size "
        f"× sub-chunk budget × sentence overlap at the shipped calibration, the largest prefetch limit, node "
        f"weight 0; single-vector layouts per calibration), then finalists (calibration × prefetch limit, and × "
        f"node weight at the largest prefetch), then reference rows of the choice (int8, larger prefetch limits, "
        f"exact MaxSim; not candidates). " + _COLUMNS
    )
    return summary, sweep


def row(s: Scored, group_order: Sequence[str]) -> dict[str, Any]:
    """One flat row (scores ×100) of a scored setting."""
    r = s.result
    out: dict[str, Any] = {"stage": s.stage, "system": s.setting.label(), **s.setting.to_dict()}
    for g in group_order:
        out[f"ndcg@10[{g}]"] = round(100 * r.ndcg.groups.get(g, math.nan), 2)
    out.update({"harmonic": round(100 * r.ndcg.harmonic, 2), "psi": round(r.ndcg.psi, 4)})
    out["recall@10"] = round(100 * r.recall.get(10, math.nan), 2)
    out.update(s.stats.to_dict())
    return out


def _write_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _num(v: Any, fmt: str) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def table_markdown(
    scored: Sequence[Scored],
    group_order: Sequence[str],
    baseline: Scored | None = None,
    groups: Mapping[str, str] | None = None,
    caption: str = "",
) -> str:
    """Markdown table: per-group nDCG@10, harmonic, PSI, prefetch recall, vectors and bytes per node,
    ingest chunks/s, query p50/p99; with ``baseline`` and ``groups`` (query -> position group) also
    ΔH vs the baseline with a 95% paired bootstrap interval (``metrics.bootstrap_harmonic_diff``)."""
    with_ci = baseline is not None and groups is not None
    head = ["system", *group_order, "harmonic", "PSI"]
    head += ["ΔH vs first row [95% CI]"] if with_ci else []
    head += ["prefetch R@10", "vectors/node", "bytes/node f32", "bytes/node int8", "bytes/passage f32"]
    head += ["chunks/s", "p50 ms", "p99 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scored:
        r, st = s.result, s.stats
        cells = [s.setting.label(), *[_num(100 * r.ndcg.groups.get(g, math.nan), ".1f") for g in group_order]]
        cells += [_num(100 * r.ndcg.harmonic, ".1f"), f"{r.ndcg.psi:.3f}"]
        if with_ci:
            if s is baseline:
                cells.append("–")
            else:
                d, lo, hi = bootstrap_harmonic_diff(r.per_query, baseline.result.per_query, groups)
                cells.append(f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        cells += [_num(100 * st.prefetch_recall, ".1f"), f"{st.storage.vectors_per_node:.1f}"]
        cells += [f"{st.storage.bytes_per_node:,.0f}", f"{st.storage.bytes_per_node_int8:,.0f}"]
        cells.append(f"{st.storage.bytes_per_passage:,.0f}")
        cells += [_num(st.ingest_chunks_per_second, ".2f"), _num(st.query_p50_ms, ".1f"), _num(st.query_p99_ms, ".1f")]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    return f"{caption}\n\n{text}" if caption else text


def plot_frontier(sweep: Sequence[Scored], chosen: Scored, path: Path, title: str = "") -> Path:
    """Harmonic nDCG@10 (y) against float32 vector bytes per passage (x, log) over the sweep; the Pareto
    frontier (no other setting both smaller and better) joined, the choice circled, single-vector layouts
    as squares."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, ax = plt.subplots(figsize=(6.6, 4.4), dpi=100)
    xs = [s.stats.storage.bytes_per_passage for s in sweep]
    ys = [100 * s.harmonic for s in sweep]
    single = [s.setting.subchunks is None for s in sweep]
    sc = ax.scatter(
        [x for x, m in zip(xs, single) if not m],
        [y for y, m in zip(ys, single) if not m],
        c=[s.result.ndcg.psi for s in sweep if s.setting.subchunks is not None],
        cmap="viridis_r",
        s=22,
        edgecolors="k",
        linewidths=0.3,
        label="sub-chunk layouts",
    )
    ax.scatter([x for x, m in zip(xs, single) if m], [y for y, m in zip(ys, single) if m], marker="s", c="grey",
               s=30, label="single vector")  # fmt: skip
    front, best = [], -1.0
    for x, y in sorted(zip(xs, ys), key=lambda p: (p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    ax.plot([p[0] for p in front], [p[1] for p in front], color="red", lw=1, label="frontier")
    cx, cy = chosen.stats.storage.bytes_per_passage, 100 * chosen.harmonic
    ax.scatter([cx], [cy], s=160, facecolors="none", edgecolors="red", linewidths=1.5, label="chosen")
    fig.colorbar(sc, ax=ax, label="PSI (lower is fairer)")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g} kB"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("vector bytes per passage (float32; whole corpus / passages)")
    ax.set_ylabel("harmonic mean nDCG@10 (%)")
    ax.set_title(title or "storage vs position-fair quality")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_default_pipeline(
    outcome: DefaultPipelineOutcome,
    report: PositionBenchmark,
    select: PositionBenchmark,
    out: str | Path,
    *,
    meta: Mapping[str, Any],
    model_label: str = "",
) -> tuple[str, list[Path]]:
    """``summary.md/csv`` (reported split), ``sweep.md/csv`` (selection split), ``ndcg_by_group.png``,
    ``frontier.png`` (harmonic vs bytes per passage) and ``run.json`` in ``out``. Returns the summary table and the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    shipped = outcome.reported[0]
    store = str(meta.get("store", "an embedded store"))
    caption, sweep_caption = captions(outcome, report, select, store)
    summary = table_markdown(outcome.reported, report.group_order, shipped, report.groups, caption)
    ranked = sorted(outcome.sweep, key=lambda s: -s.harmonic)
    sweep_md = table_markdown(ranked + outcome.references, select.group_order, caption=sweep_caption)
    paths = [
        _write_csv([row(s, report.group_order) for s in outcome.reported], out / "summary.csv"),
        _write_csv([row(s, select.group_order) for s in [*outcome.sweep, *outcome.references]], out / "sweep.csv"),
    ]
    for name, text in (("summary.md", summary), ("sweep.md", sweep_md)):
        (out / name).write_text(text, encoding="utf-8")
        paths.append(out / name)
    results = [replace(s.result, name=_short(s)) for s in outcome.reported if s.setting.scoring != "int8-simulated"]
    paths.append(
        plot_groups(results, report.group_order, out / "ndcg_by_group.png", title=f"default pipeline on {report.name}")
    )
    title = f"{model_label} default pipeline on {select.name}: storage vs harmonic"
    paths.append(plot_frontier(outcome.sweep, outcome.chosen, out / "frontier.png", title=title))
    (out / "run.json").write_text(json.dumps(dict(meta), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths.append(out / "run.json")
    return summary, paths


def _short(s: Scored) -> str:
    st = s.setting
    if st.subchunks is None:
        return f"{st.node_tokens} single, {st.calibration}"
    tag = {"store": "", "exact": " exact", "int8-simulated": " int8 sim"}[st.scoring]
    q = " int8" if st.subchunk_int8 else ""
    return f"{st.node_tokens}/sub{st.subchunks.max_tokens}+{st.subchunks.overlap_sentences}{q}{tag}"
