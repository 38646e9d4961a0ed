"""The audit's report: per target, nDCG@10 and recall@k per position third, harmonic mean, PSI, and where it fails.

Scoring: the first node that holds the evidence (:func:`~llamaindex_posfair.audit.probes.evidence_in`) is a
probe's one relevant item; per third the mean over its probes, over thirds the harmonic mean and PSI, and two
targets are compared by a paired bootstrap (docs/audit.md, "The measure").

Outputs: :meth:`AuditReport.to_dict` (``--json``), :meth:`AuditReport.to_markdown`,
:meth:`AuditReport.to_html` (one self-contained page, the plot inlined) and :meth:`AuditReport.plot_png`.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff, ndcg_at_k, summarize

from .probes import GROUPS, Probe, ProbeSet
from .targets import Retrieved

__all__ = ["AuditReport", "ProbeOutcome", "TargetResult", "score_ranking"]

#: The cut-off of the headline metric.
NDCG_K = 10
#: Relative-position bins of the "where it fails" table and plot.
POSITION_BINS = 10
#: Characters of a text shown in an example.
SNIPPET = 160


def score_ranking(holds: Sequence[bool]) -> int | None:
    """The 1-based rank of the first node that holds the evidence, or ``None``.

    Example:
        >>> score_ranking([False, True, True]), score_ranking([False])
        (2, None)
    """
    return next((i + 1 for i, h in enumerate(holds) if h), None)


@dataclass(frozen=True)
class ProbeOutcome:
    """What a target returned for one probe: the evidence's rank and the first nodes (for examples)."""

    probe_id: str
    rank: int | None
    returned: int
    top: tuple[Retrieved, ...] = ()

    @property
    def ndcg(self) -> float:
        if self.rank is None:
            return 0.0
        return ndcg_at_k(["other"] * (self.rank - 1) + ["evidence"], {"evidence": 1.0}, NDCG_K)


@dataclass
class TargetResult:
    """One target's outcomes on every probe, and its wall time (indexing included)."""

    name: str
    outcomes: dict[str, ProbeOutcome]
    seconds: float = 0.0
    builds_index: bool = False

    def ndcg(self) -> dict[str, float]:
        return {q: o.ndcg for q, o in self.outcomes.items()}

    def recall(self, k: int) -> dict[str, float]:
        return {q: float(o.rank is not None and o.rank <= k) for q, o in self.outcomes.items()}


def _snip(text: str, width: int = SNIPPET) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@dataclass
class AuditReport:
    """Every target's outcomes on one probe set, and how the run was made.

    Attributes:
        probes: the probes (all targets answered the same ones).
        results: one per target, in the order given.
        top_k: nodes taken from each target per probe (recall@k uses this k).
        command: the command (or call) that made the report, shown on every page.
        meta: run facts (documents, wall seconds, load averages, date).
        warnings: what the reader should know (e.g. a target that never found any evidence).
    """

    probes: ProbeSet
    results: list[TargetResult]
    top_k: int
    command: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ numbers
    def _groups(self, kind: str | None = None) -> dict[str, str]:
        return {p.id: p.group for p in self.probes.probes if kind is None or p.kind == kind}

    def summary(self, result: TargetResult, kind: str | None = None) -> dict[str, Any]:
        """nDCG@10 and recall@k per group, harmonic mean, PSI and counts, over the probes of ``kind`` (or all)."""
        groups = self._groups(kind)
        order = [g for g in GROUPS if g in set(groups.values())]
        ndcg = summarize(result.ndcg(), groups, order)
        recall = summarize(result.recall(self.top_k), groups, order)
        return {
            "target": result.name,
            "kind": kind or "all",
            "probes": sum(ndcg.counts.values()),
            "counts": ndcg.counts,
            "ndcg@10": {g: round(v, 4) for g, v in ndcg.groups.items()},
            f"recall@{self.top_k}": {g: round(v, 4) for g, v in recall.groups.items()},
            "harmonic": round(ndcg.harmonic, 4),
            "psi": round(ndcg.psi, 4),
            "overall": round(ndcg.overall, 4),
            "seconds": round(result.seconds, 1),
        }

    def summaries(self) -> list[dict[str, Any]]:
        """One row per target over all probes, then per kind when there are several kinds."""
        kinds = self.probes.kinds()
        rows = [self.summary(r) for r in self.results]
        if len(kinds) > 1:
            rows += [self.summary(r, k) for k in kinds for r in self.results]
        return rows

    def comparisons(self) -> list[dict[str, Any]]:
        """Every later target against the first: harmonic-mean difference with a 95% paired bootstrap interval."""
        if len(self.results) < 2:
            return []
        base, groups = self.results[0], self._groups()
        out = []
        for other in self.results[1:]:
            d, lo, hi = bootstrap_harmonic_diff(other.ndcg(), base.ndcg(), groups)
            psi_other, psi_base = self.summary(other)["psi"], self.summary(base)["psi"]
            out.append(
                {
                    "a": other.name,
                    "b": base.name,
                    "harmonic_diff": round(d, 4),
                    "ci95": [round(lo, 4), round(hi, 4)],
                    "psi_diff": round(psi_other - psi_base, 4),
                }
            )
        return out

    def by_position(self, result: TargetResult) -> list[float | None]:
        """Mean nDCG@10 per tenth of the passage (``None`` where no probe falls)."""
        sums: dict[int, list[float]] = defaultdict(list)
        scores = result.ndcg()
        for p in self.probes.probes:
            if p.id in scores:
                sums[min(int(p.rel_position * POSITION_BINS), POSITION_BINS - 1)].append(scores[p.id])
        return [round(sum(v) / len(v), 4) if (v := sums.get(i)) else None for i in range(POSITION_BINS)]

    def examples(self, result: TargetResult, n: int = 3) -> list[dict[str, Any]]:
        """Up to ``n`` probes of the target's worst group that it ranks lowest: the query, where the evidence
        was, and what came first instead."""
        summary = self.summary(result)
        worst = min(summary["ndcg@10"], key=summary["ndcg@10"].get)
        probes = [p for p in self.probes.probes if p.group == worst and p.id in result.outcomes]
        probes.sort(key=lambda p: (result.outcomes[p.id].ndcg, -p.rel_position, p.id))
        return [self._example(p, result.outcomes[p.id]) for p in probes[:n] if result.outcomes[p.id].ndcg < 1.0]

    def _example(self, probe: Probe, outcome: ProbeOutcome) -> dict[str, Any]:
        first = outcome.top[0] if outcome.top else None
        return {
            "probe": probe.id,
            "kind": probe.kind,
            "query": _snip(probe.query),
            "evidence": {
                "doc": probe.doc_id,
                "passage": probe.passage,
                "position": f"{100 * probe.rel_position:.0f}% of the passage ({probe.group} third)",
                "text": _snip(probe.evidence),
            },
            "evidence_rank": outcome.rank,
            "returned_first": None if first is None else {"doc": first.doc_id, "text": _snip(first.text)},
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready values (the ``--json`` output)."""
        return {
            "command": self.command,
            "meta": self.meta,
            "probes": {
                "total": len(self.probes.probes),
                "kinds": {k: self.probes.group_counts(k) for k in self.probes.kinds()},
                "config": self.probes.config.to_dict(),
                "corpus_digest": self.probes.digest,
                "questions_skipped": len(self.probes.skipped),
            },
            "top_k": self.top_k,
            "targets": self.summaries(),
            "comparisons": self.comparisons(),
            "by_position": {r.name: self.by_position(r) for r in self.results},
            "worst_examples": {r.name: self.examples(r) for r in self.results},
            "ranks": {r.name: {q: o.rank for q, o in r.outcomes.items()} for r in self.results},
            "warnings": self.warnings,
        }

    # ------------------------------------------------------------------ pages
    def _table(self) -> tuple[list[str], list[list[str]]]:
        rk = f"recall@{self.top_k}"
        head = [
            "target",
            "probes",
            *(f"nDCG@10 {g}" for g in GROUPS),
            "harmonic",
            "PSI",
            *(f"{rk} {g}" for g in GROUPS),
        ]
        rows = []
        for s in self.summaries():
            label = s["target"] if s["kind"] == "all" else f"{s['target']} — {s['kind']} only"
            cells = [label, str(s["probes"])]
            cells += [_pct(s["ndcg@10"].get(g)) for g in GROUPS]
            cells += [_pct(s["harmonic"]), f"{s['psi']:.3f}"]
            cells += [_pct(s[rk].get(g)) for g in GROUPS]
            rows.append(cells)
        return head, rows

    def _comparison_lines(self) -> list[str]:
        return [
            f"{c['a']} − {c['b']}: harmonic nDCG@10 {100 * c['harmonic_diff']:+.1f} "
            f"[95% paired bootstrap {100 * c['ci95'][0]:+.1f}, {100 * c['ci95'][1]:+.1f}], PSI {c['psi_diff']:+.3f}"
            for c in self.comparisons()
        ]

    def _probe_line(self) -> str:
        kinds = ", ".join(
            f"{k} {sum(self.probes.group_counts(k).values())} ({'/'.join(map(str, self.probes.group_counts(k).values()))})"
            for k in self.probes.kinds()
        )
        c = self.probes.config
        return (
            f"{len(self.probes.probes)} probes — {kinds} begin/middle/end; seed {c.seed}; passages: SentenceSplitter "
            f"{c.passage_tokens}/{c.passage_overlap} tokens; {self.meta.get('documents', '?')} documents; "
            f"top {self.top_k} nodes per probe"
        )

    def to_markdown(self, image: str | None = "audit.png") -> str:
        """A Markdown page; ``image``: the PNG's path relative to the page (``None``: no image)."""
        head, rows = self._table()
        lines = ["# Position audit", "", f"Command: `{self.command}`", "", self._probe_line(), ""]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines += ["", "nDCG@10 and recall ×100 per third of the passage; PSI = 1 − min/max over the thirds."]
        if comp := self._comparison_lines():
            lines += ["", "## Paired comparison (same probes)", "", *[f"- {c}" for c in comp]]
        if image:
            lines += ["", f"![nDCG@10 by position]({image})"]
        lines += ["", "## Where each target fails", ""]
        for r in self.results:
            lines += [f"### {r.name}", "", "nDCG@10 ×100 by tenth of the passage: " + _tenths(self.by_position(r)), ""]
            for ex in self.examples(r):
                lines += [f"- {_example_text(ex, self.top_k)}"]
            lines.append("")
        if self.warnings:
            lines += ["## Warnings", "", *[f"- {w}" for w in self.warnings], ""]
        lines.append(_meta_line(self.meta))
        return "\n".join(lines) + "\n"

    def plot_png(self) -> bytes:
        """The figure as PNG bytes: nDCG@10 per third (bars) and per tenth of the passage (lines)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        width = 0.8 / max(len(self.results), 1)
        for i, r in enumerate(self.results):
            s = self.summary(r)
            xs = [j + i * width for j in range(len(GROUPS))]
            left.bar(
                xs, [100 * s["ndcg@10"].get(g, 0.0) for g in GROUPS], width, label=f"{r.name} (PSI {s['psi']:.2f})"
            )
            tenths = self.by_position(r)
            pts = [(10 * j + 5, 100 * v) for j, v in enumerate(tenths) if v is not None]
            right.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=r.name)
        left.set_xticks([j + width * (len(self.results) - 1) / 2 for j in range(len(GROUPS))], list(GROUPS))
        left.set_ylabel("nDCG@10 ×100")
        left.set_ylim(0, 125)
        left.set_yticks(range(0, 101, 20))
        left.set_title("by third of the passage")
        left.legend(fontsize=7, loc="upper center")
        for edge in (100 / 3, 200 / 3):
            right.axvline(edge, color="grey", linestyle=":", linewidth=1)
        right.set_xlabel("evidence position in the passage (%)")
        right.set_ylim(0, 105)
        right.set_xlim(0, 100)
        right.set_title("by tenth of the passage")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        plt.close(fig)
        return buf.getvalue()

    def to_html(self, png: bytes | None = None) -> str:
        """One self-contained HTML page (the plot inlined as a data URI; ``png`` default :meth:`plot_png`)."""
        e = html.escape
        head, rows = self._table()
        image = base64.b64encode(png if png is not None else self.plot_png()).decode("ascii")
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8"><title>Position audit</title>',
            "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #bbb;padding:.2em .5em;text-align:right}td:first-child{text-align:left}"
            "code{background:#f4f4f4}</style></head><body>",
            "<h1>Position audit</h1>",
            f'<p>Command: <code id="command">{e(self.command)}</code></p>',
            f"<p>{e(self._probe_line())}</p>",
            '<table id="summary"><thead><tr>' + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr></thead><tbody>",
            *["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows],
            "</tbody></table>",
            "<p>nDCG@10 and recall ×100 per third of the passage; PSI = 1 − min/max over the thirds.</p>",
        ]
        if comp := self._comparison_lines():
            parts += ["<h2>Paired comparison (same probes)</h2><ul>", *[f"<li>{e(c)}</li>" for c in comp], "</ul>"]
        parts.append(f'<img id="plot" alt="nDCG@10 by position" src="data:image/png;base64,{image}">')
        parts.append("<h2>Where each target fails</h2>")
        for r in self.results:
            parts += [
                f"<h3>{e(r.name)}</h3>",
                f"<p>nDCG@10 ×100 by tenth of the passage: {e(_tenths(self.by_position(r)))}</p>",
            ]
            parts += ["<ul>", *[f"<li>{e(_example_text(ex, self.top_k))}</li>" for ex in self.examples(r)], "</ul>"]
        if self.warnings:
            parts += ["<h2>Warnings</h2><ul>", *[f"<li>{e(w)}</li>" for w in self.warnings], "</ul>"]
        parts += [f"<p>{e(_meta_line(self.meta))}</p>", "</body></html>"]
        return "\n".join(parts) + "\n"


def _pct(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}"


def _tenths(values: Sequence[float | None]) -> str:
    return " ".join(_pct(v) for v in values)


def _example_text(ex: dict[str, Any], top_k: int) -> str:
    ev = ex["evidence"]
    rank = f"rank {ex['evidence_rank']}" if ex["evidence_rank"] else f"not in the top {top_k}"
    first = ex["returned_first"]
    instead = f"{first['doc']}: “{first['text']}”" if first else "nothing"
    return (
        f"[{ex['kind']}] “{ex['query']}” — evidence in {ev['doc']} passage {ev['passage']} at {ev['position']}, "
        f"{rank}; returned first instead: {instead}"
    )


def _meta_line(meta: dict[str, Any]) -> str:
    return "; ".join(f"{k}: {v}" for k, v in meta.items())
