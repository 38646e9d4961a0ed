"""The DUMP controls experiment: which arms to train, how each trained folder is scored, the table.

Arms share data, steps and seed and differ only in what trains:
``plain`` (no prefix: the plain fine-tune), ``full-kK`` (DUMP + model: the
paper), ``dump_only-kK``, ``random_prefix-kK`` (frozen random prefix) and
``soft_prompt-kK``. Each trained folder (and the base model) is scored on

* the shipped needle benchmark's ``test`` split as a **single vector** per
  passage (plain encoder, ``max_length`` 512: nothing truncated), and
* the **main job's default layout**: the passages ingested by
  :func:`qdrant_tools.ingest.ingest_documents` exactly as ``posfair ingest
  --model M`` stores them (node vectors of the encoder's node size and
  sentence-aligned sub-chunk multivectors, uncalibrated as in the default
  layout) into an in-memory Qdrant Edge store, every query answered by
  :func:`qdrant_tools.search.search` (exact MaxSim at this size, as shipped); a
  passage scores its best node among the hits (``-inf`` if none);

with harmonic mean / PSI / per-third nDCG@10 and paired bootstrap intervals
(:func:`llamaindex_posfair.eval.metrics.bootstrap_harmonic_diff`) against the
base model and against the plain fine-tune. ``scripts/dump_experiment.py``
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llamaindex_posfair.dump.config import DUMP_MODES
from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff

__all__ = ["Arm", "StoreLayoutSystem", "comparison_row", "parse_arms", "score_needle"]


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


@dataclass
class StoreLayoutSystem:
    """The main job's stored layout as a system of the eval harness (``score(cache)``).

    Interim: ``llamaindex_posfair.eval.main_job`` (in progress elsewhere) is the
    harness's home for this; replace this class by it once it lands.

    Args:
        name: Row label.
        encoder: A loaded ``PosFairEncoder`` (as ``posfair ingest --model M`` builds it).
        subchunks: Sub-chunk layout (default: what ``posfair ingest`` ships); ``None`` = single vector per node.
        prefetch_limit: Candidates found through the node vector and re-scored by MaxSim.
    """

    name: str
    encoder: Any
    subchunks: Any = "default"
    prefetch_limit: int = 100
    kind: str = "main-job"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = float("nan")

    def score(self, cache: Any) -> np.ndarray:
        from qdrant_tools import payload as P
        from qdrant_tools.chunking import SourceDocument, content_hash
        from qdrant_tools.ingest import IngestConfig, ingest_documents
        from qdrant_tools.search import SearchSettings, search
        from qdrant_tools.store import open_store
        from qdrant_tools.subchunks import DEFAULT_SUBCHUNKS

        subchunks = DEFAULT_SUBCHUNKS if self.subchunks == "default" else self.subchunks
        ids = [f"p{i}" for i in range(cache.n_docs)]
        docs = [SourceDocument(d, t, d, content_hash(t)) for d, t in zip(ids, cache.docs)]
        name = "vanilla" if self.encoder.calibration is None else "calibrated"
        client = open_store(":memory:")  # the shipped embedded store (Qdrant Edge)
        try:
            report = ingest_documents(
                client, "dump_eval", docs, {name: self.encoder}, IngestConfig(subchunks=subchunks, show_progress=False)
            )
            self.params = {"nodes/passage": round(report.chunks_written / max(len(docs), 1), 2)}
            queries = self.encoder.encode_queries(list(cache.queries))
            settings = SearchSettings(limit=self.prefetch_limit, prefetch_limit=self.prefetch_limit)
            column = {d: j for j, d in enumerate(ids)}
            out = np.full((cache.n_queries, cache.n_docs), -np.inf)
            for i, q in enumerate(queries):
                for hit in search(client, "dump_eval", q, settings):
                    j = column[hit.payload[P.DOC_ID]]
                    out[i, j] = max(out[i, j], hit.score)
        finally:
            client.close()
        return out


def score_needle(bench: Any, systems: Sequence[Any], batch_size: int = 16) -> list[Any]:
    """Score systems on a needle benchmark split with the harness (``run_eval``)."""
    from llamaindex_posfair.eval.runner import run_eval

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
