"""The DUMP controls experiment: which arms to train, how each trained folder is scored, the table.

Arms share data, steps and seed and differ only in what trains:
``plain`` (no prefix: the plain fine-tune), ``full-kK`` (DUMP + model: the
paper), ``dump_only-kK``, ``random_prefix-kK`` (frozen random prefix) and
``soft_prompt-kK``. Each trained folder (and the base model) is scored on

* the shipped needle benchmark's ``test`` split as a **single vector** per
  passage (plain encoder, ``max_length`` 512: nothing truncated), and
* the **default pipeline's default layout**: the passages ingested by
  :func:`qdrant_tools.ingest.ingest_documents` exactly as ``posfair ingest
  --model M`` stores them (node vectors of the encoder's node size and
  sentence-aligned sub-chunk multivectors, uncalibrated as in the default
  layout) into an in-memory Qdrant Edge store, every query answered by
  :func:`qdrant_tools.search.search` (exact MaxSim at this size, as shipped); a
  passage scores its best node among the hits (``-inf`` if none);

with harmonic mean / PSI / per-third nDCG@10 and paired bootstrap intervals
(:func:`llamaindex_posfair.eval.metrics.bootstrap_harmonic_diff`) against the
base model and against the plain fine-tune. ``research/dump/run.py``
drives it.

Example:
    >>> [a.name for a in parse_arms("plain,full-k4")]
    ['plain', 'full-k4']
    >>> parse_arms("full-k2")[0].cli_args()
    ['--mode', 'full', '--num-tokens', '2']
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llamaindex_posfair.dump.config import DUMP_MODES
from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff

__all__ = ["Arm", "comparison_row", "layout_system", "nodes_per_passage", "parse_arms", "score_needle"]


@dataclass(frozen=True)
class Arm:
    """One trained variant: ``mode`` (a DUMP mode or ``"plain"``) and ``K`` (None for plain)."""

    name: str
    mode: str
    num_tokens: int | None

    def cli_args(self) -> list[str]:
        """The ``posfair train-dump`` flags of this arm."""
        args = ["--mode", self.mode]
        return args if self.num_tokens is None else [*args, "--num-tokens", str(self.num_tokens)]


def parse_arms(text: str) -> list[Arm]:
    """Arms from ``"plain,full-k4,random_prefix-k4"``.

    Raises:
        ValueError: an unknown mode or a missing/invalid ``-kK``.
    """
    arms = []
    for name in (t.strip() for t in text.split(",") if t.strip()):
        if name == "plain":
            arms.append(Arm(name, "plain", None))
            continue
        mode, _, k = name.rpartition("-k")
        if mode not in DUMP_MODES or not k.isdigit() or int(k) < 1:
            raise ValueError(f"arm {name!r} must be 'plain' or MODE-kK with MODE in {DUMP_MODES}, e.g. full-k4")
        arms.append(Arm(name, mode, int(k)))
    if not arms:
        raise ValueError("name at least one arm, e.g. plain,full-k4")
    return arms


def layout_system(name: str, encoder: Any) -> Any:
    """The default pipeline's default layout for ``encoder`` as a harness system (``score(cache)``).

    :class:`~research.default_pipeline.system.DefaultPipelineSystem` with the node size
    ``posfair ingest --model M`` picks for this encoder (its window), the shipped
    sub-chunks, and the shipped search (:func:`~research.default_pipeline.system.eval_search`).
    After ``score``, ``nodes_per_passage(system)`` gives the stored nodes per passage.
    """
    from qdrant_tools.encoding import resolve_chunking
    from qdrant_tools.layout import NodeLayout
    from qdrant_tools.subchunks import SubchunkConfig
    from research.default_pipeline.system import DefaultPipelineSystem, eval_search

    layout = NodeLayout(
        chunk_tokens=resolve_chunking(encoder).chunk_tokens,
        subchunks=SubchunkConfig(),
        fused_weight=None,
        node_quantization=None,
    )
    return DefaultPipelineSystem(name, encoder, layout, eval_search(layout))


def nodes_per_passage(system: Any) -> float:
    """Nodes stored per passage by a scored :func:`layout_system`."""
    storage = system.stats.storage
    return round(storage.nodes / max(storage.passages, 1), 2)


def score_needle(bench: Any, systems: Sequence[Any], batch_size: int = 16) -> list[Any]:
    """Score systems on a needle benchmark split with the harness (``run_eval``)."""
    from research.eval.harness.runner import run_eval

    return run_eval(bench, systems, batch_size=batch_size, show_progress_bar=False)


def _ci(a: Any, b: Any, groups: Mapping[str, str], seed: int) -> str:
    if b is None:
        return "–"
    d, lo, hi = bootstrap_harmonic_diff(a.per_query, b.per_query, groups, n_resamples=2000, seed=seed)
    return f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def comparison_row(
    label: str, result: Any, base: Any, plain: Any, groups: Mapping[str, str], order: Sequence[str], seed: int = 0
) -> dict[str, Any]:
    """One table row: per-third nDCG@10, harmonic, PSI (×100 except PSI) and ΔH vs base / vs plain with 95% CIs."""
    row: dict[str, Any] = {"model": label}
    for g in order:
        row[f"nDCG@10 {g}"] = round(100 * result.ndcg.groups.get(g, math.nan), 1)
    row["harmonic"] = round(100 * result.ndcg.harmonic, 1)
    row["PSI"] = round(result.ndcg.psi, 3)
    row["ΔH vs base [95% CI]"] = _ci(result, base if result is not base else None, groups, seed)
    row["ΔH vs plain [95% CI]"] = _ci(
        result, plain if plain is not None and result is not plain else None, groups, seed
    )
    return row


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows (same keys) as a markdown table."""
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(lines)
