"""Plots of harness results both evaluations draw: nDCG@10 by position group, one line per system.

Needs matplotlib (the ``eval`` extra); it is imported on first use.

Example:
    >>> from research.eval.harness.plots import plot_groups
    >>> # plot_groups(run_eval(bench, systems), bench.group_order, "out/ndcg_by_group.png")
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .runner import SystemResult

__all__ = ["plot_groups", "pyplot", "save_figure"]


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (files only; the ``eval`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path) -> Path:
    """Lay out ``fig``, write it to ``path`` (folders made as needed) and close it; returns the path."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    pyplot().close(fig)
    return path


def plot_groups(results: Sequence[SystemResult], group_order: Sequence[str], path: str | Path, title: str = "") -> Path:
    """nDCG@10 by position group, one line per system."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    x = list(range(len(group_order)))
    markers = "osD^vP*X"
    for i, r in enumerate(results):
        ys = [100 * r.ndcg.groups.get(g, math.nan) for g in group_order]
        ax.plot(x, ys, marker=markers[i % len(markers)], label=f"{r.name} (H={100 * r.ndcg.harmonic:.1f})")
    ax.set_xticks(x, list(group_order))
    ax.set_xlabel("position of the evidence in the passage")
    ax.set_ylabel("nDCG@10 (%)")
    ax.set_title(title or "nDCG@10 by position group")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return save_figure(fig, path)
