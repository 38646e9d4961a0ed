"""Evidence for the default pipeline's defaults: sweep on a held-apart split, choose there, report on another.

Pure orchestration over :mod:`research.default_pipeline.system` and the runner
(no argparse, no files; ``report`` writes). One run

1. **layouts** (selection split, e.g. ``dev``): every node size × sub-chunk
   budget × sentence overlap, ingested with the shipped calibration and queried
   with the largest prefetch limit and node weight 0; the single-vector layout at
   every node size and calibration beside them;
2. **finalists**: the best ``finalists`` sub-chunk layouts again with every
   calibration, the prefetch limits (node weight 0) and the node weights (at the
   largest prefetch limit);
3. **choice** (:func:`choose`, the rule is stated there and in ``run.json``);
4. **report** (reported split, e.g. ``test``): the shipped single-vector default pipeline
   (the baseline of every interval), the single-vector layouts, the choice, the
   choice with int8 sub-chunks, and the choice scored by exact MaxSim (the
   prefetch's cost), and with larger prefetch limits (the prefetch's recall curve).

Example:
    >>> from research.default_pipeline.protocol import DefaultPipelineGrid
    >>> DefaultPipelineGrid(node_tokens=(510,), subchunk_tokens=(48,), subchunk_overlaps=(1,)).layout_count()
    1
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from qdrant_tools.layout import NodeLayout
from qdrant_tools.subchunks import SubchunkConfig
from research.eval.benchmarks.data import PositionBenchmark
from research.eval.benchmarks.splits import check_held_apart
from research.eval.harness.runner import SystemResult, run_eval

from .system import (
    HARNESS_SEARCH,
    DefaultPipelineStats,
    DefaultPipelineSystem,
    IndexPool,
    Scoring,
    cpu_load,
    eval_search,
    layout_label,
)

__all__ = [
    "SELECTION_RULE",
    "DefaultPipelineGrid",
    "DefaultPipelineOutcome",
    "DefaultPipelineProtocol",
    "Scored",
    "Setting",
    "choose",
]

logger = logging.getLogger(__name__)

#: The rule :func:`choose` applies, in words (written to ``run.json``).
SELECTION_RULE = (
    "on the selection split only: take the best harmonic-mean nDCG@10 H*; among settings with H >= H* - "
    "tolerance, keep those whose float32 vector bytes per passage (corpus storage; node sizes differ) are within "
    "{slack:.0%} of the fewest; among them the lowest PSI, then the highest H, then calibration off (equal "
    "results for less ingest time), then the larger prefetch limit (safer recall on a larger corpus)"
)

#: An encoder for a node size and a calibration name (``"off"`` or a preset name).
EncoderFor = Callable[[int, str], Any]


@dataclass(frozen=True)
class Setting:
    """One default-pipeline configuration: how it is stored and how it is queried.

    Args:
        node_tokens: node size (``chunk_tokens``).
        subchunks: sub-chunk layout, ``None`` = single vector.
        calibration: ``"off"`` or a calibration preset name.
        prefetch_limit: candidates re-scored by MaxSim.
        node_weight: weight of the node cosine in the node-weighted score.
        subchunk_int8: int8 sub-chunk vectors.
        scoring: ``"store"``, ``"exact"`` or ``"int8-simulated"`` (see ``DefaultPipelineSystem``).
    """

    node_tokens: int
    subchunks: SubchunkConfig | None
    calibration: str
    prefetch_limit: int = 100
    node_weight: float = 0.0
    subchunk_int8: bool = False
    scoring: Scoring = "store"

    @property
    def layout(self) -> NodeLayout:
        return NodeLayout(
            chunk_tokens=self.node_tokens,
            subchunks=self.subchunks,
            subchunk_quantization="int8" if self.subchunk_int8 else None,
            fused_weight=None,
            node_quantization=None,
        )

    def label(self) -> str:
        text = f"{layout_label(self.layout)}, calib {self.calibration}"
        if self.subchunks is not None:
            text += f", prefetch {self.prefetch_limit}, w={self.node_weight:g}"
        if self.scoring != "store":
            text += f" [{self.scoring}]"
        return text

    def to_dict(self) -> dict[str, Any]:
        s = self.subchunks
        return {
            "chunk_tokens": self.node_tokens,
            "subchunk_max_tokens": None if s is None else s.max_tokens,
            "subchunk_overlap_sentences": None if s is None else s.overlap_sentences,
            "calibration": self.calibration,
            "prefetch_limit": self.prefetch_limit if s is not None else None,
            "node_weight": self.node_weight if s is not None else None,
            "quantization": "int8" if self.subchunk_int8 else None,
            "scoring": self.scoring,
        }


@dataclass(frozen=True)
class Scored:
    """A setting with its quality (``result``) and its costs (``stats``) on one benchmark; ``stage`` says why."""

    setting: Setting
    result: SystemResult
    stats: DefaultPipelineStats
    stage: str = ""

    @property
    def harmonic(self) -> float:
        return self.result.ndcg.harmonic


@dataclass(frozen=True)
class DefaultPipelineGrid:
    """What the sweep tries.

    Args:
        node_tokens: node sizes (the model window in general; 254/510 for MiniLM).
        subchunk_tokens: sub-chunk budgets.
        subchunk_overlaps: sentence overlaps.
        calibrations: ``"off"`` and preset names tried on the finalists.
        layout_calibration: the calibration of the layout stage (the shipped one).
        prefetch_limits: tried on the finalists; the largest is used in the layout stage.
        node_weights: node weights tried on the finalists (at the largest prefetch limit).
        finalists: sub-chunk layouts carried to the finalist stage (the best overlap of each of the
            best node size × budget pairs).
        reference_prefetch_limits: larger prefetch limits reported for the choice (not candidates: on a
            small benchmark they approach exact MaxSim over the whole corpus, which does not carry over
            to a large one).
        tolerance: harmonic-mean margin of the rule (0.01 = one point of nDCG@10 ×100).
        bytes_slack: relative storage difference the rule treats as equal.
        depth: nodes asked per query of the single-vector layout.
        exact_up_to: collections of at most this many nodes are scored by exact MaxSim (the shipped
            search, :class:`qdrant_tools.search.SearchSettings`); 0 = always the node-vector prefetch
            (the regime of large collections, where prefetch limits matter).

    Raises:
        ValueError: an empty list or a value out of range.
    """

    node_tokens: tuple[int, ...] = (254, 510)
    subchunk_tokens: tuple[int, ...] = (32, 48, 64, 96, 128)
    subchunk_overlaps: tuple[int, ...] = (0, 1, 2)
    calibrations: tuple[str, ...] = ("off", "paper", "posfair-minilm")
    layout_calibration: str = "paper"
    prefetch_limits: tuple[int, ...] = (20, 50, 100)
    node_weights: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5)
    finalists: int = 3
    reference_prefetch_limits: tuple[int, ...] = (200, 500)
    tolerance: float = 0.01
    bytes_slack: float = 0.05
    depth: int = 100
    exact_up_to: int = HARNESS_SEARCH.exact_up_to

    def __post_init__(self) -> None:
        for name in ("node_tokens", "subchunk_tokens", "subchunk_overlaps", "calibrations", "prefetch_limits"):
            if not getattr(self, name):
                raise ValueError(f"{name} must name at least one value")
        if not self.node_weights or any(not 0.0 <= w <= 1.0 for w in self.node_weights):
            raise ValueError(f"node_weights must be values in [0, 1], got {self.node_weights!r}; e.g. 0,0.1,0.3")
        if self.finalists < 1:
            raise ValueError(f"finalists must be a positive integer, got {self.finalists}")
        if not 0.0 <= self.tolerance < 1.0:
            raise ValueError(f"tolerance must lie in [0, 1), got {self.tolerance}; 0.01 = one nDCG point")

    def layout_count(self) -> int:
        return len(self.node_tokens) * len(self.subchunk_tokens) * len(self.subchunk_overlaps)

    def layout_settings(self) -> list[Setting]:
        """The layout stage: single vector per node size and calibration, then every sub-chunk layout."""
        out = [Setting(n, None, c) for n in self.node_tokens for c in self.calibrations]
        p = max(self.prefetch_limits)
        for n in self.node_tokens:
            for b in self.subchunk_tokens:
                for o in self.subchunk_overlaps:
                    out.append(Setting(n, SubchunkConfig(b, o), self.layout_calibration, p, 0.0))
        return out

    def finalist_settings(self, layout: Setting) -> list[Setting]:
        """Every calibration × prefetch limit (node weight 0), and × node weight at the largest prefetch."""
        out: list[Setting] = []
        top = max(self.prefetch_limits)
        for c in self.calibrations:
            base = replace(layout, calibration=c)
            out += [replace(base, prefetch_limit=p, node_weight=0.0) for p in sorted(self.prefetch_limits)]
            out += [replace(base, prefetch_limit=top, node_weight=w) for w in self.node_weights if w > 0]
        return out


def choose(scored: Sequence[Scored], tolerance: float = 0.01, bytes_slack: float = 0.05) -> Scored:
    """The setting to ship, by :data:`SELECTION_RULE` (apply it to selection-split results only).

    Raises:
        ValueError: nothing to choose from.

    Example:
        >>> # choose(outcome.sweep).setting.to_dict()
    """
    if not scored:
        raise ValueError("nothing to choose from: score at least one setting on the selection split")
    best = max(s.harmonic for s in scored)
    near = [s for s in scored if s.harmonic >= best - tolerance - 1e-12]
    fewest = min(s.stats.storage.bytes_per_passage for s in near)
    cheap = [s for s in near if s.stats.storage.bytes_per_passage <= fewest * (1 + bytes_slack)]
    return min(
        cheap,
        key=lambda s: (
            round(s.result.ndcg.psi, 9),
            -round(s.harmonic, 9),
            s.setting.calibration != "off",
            -s.setting.prefetch_limit,
        ),
    )


@dataclass(frozen=True)
class DefaultPipelineOutcome:
    """Everything one run measured.

    Attributes:
        sweep: every setting scored on the selection split (layout stage, then finalists).
        chosen: the choice (scored on the selection split).
        reported: the reported systems on the reported split; the first is the shipped default pipeline.
        references: exact-MaxSim and int8 rows of the finalists on the selection split (not candidates).
        notes: timing context (load averages, wall seconds, builds).
    """

    sweep: list[Scored]
    chosen: Scored
    reported: list[Scored]
    references: list[Scored] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class DefaultPipelineProtocol:
    """Sweep on ``select``, choose there, report on ``report``.

    Args:
        encoder_for: ``(node_tokens, calibration name) -> encoder`` (e.g. ``encoders.SpecEncoders``).
        grid: what to try.
        shipped: the default pipeline as shipped today (the baseline of the report).
        client_factory: how a store is opened (default: ``pipeline.DEFAULT_CLIENT_FACTORY``).
        show_progress: tqdm over systems.
    """

    encoder_for: EncoderFor
    grid: DefaultPipelineGrid = field(default_factory=DefaultPipelineGrid)
    shipped: Setting = field(default_factory=lambda: Setting(254, None, "paper"))
    client_factory: Callable[[str], Any] | None = None
    show_progress: bool = False

    def run(self, select: PositionBenchmark, report: PositionBenchmark) -> DefaultPipelineOutcome:
        """Raises: HeldApartError: ``select`` shares queries with ``report``."""
        check_held_apart(select, report)
        t0, load0 = time.perf_counter(), cpu_load()
        layouts = self.score(select, self.grid.layout_settings(), "layout")
        finalists = self.finalist_layouts(layouts)
        seen = {s.setting for s in layouts}
        extra = [s for f in finalists for s in self.grid.finalist_settings(f) if s not in seen]
        sweep = layouts + self.score(select, list(dict.fromkeys(extra)), "finalist")
        chosen = choose(sweep, self.grid.tolerance, self.grid.bytes_slack)
        t1 = time.perf_counter()
        refs = self.score(select, self.reference_settings(chosen.setting), "reference")
        reported = self.score(report, self.reported_settings(chosen.setting), "report")
        notes = {
            "load_average_start": load0,
            "load_average_end": cpu_load(),
            "sweep_seconds": round(t1 - t0, 1),
            "report_seconds": round(time.perf_counter() - t1, 1),
            "finalist_layouts": [f.label() for f in finalists],
        }
        return DefaultPipelineOutcome(sweep, chosen, reported, refs, notes)

    def finalist_layouts(self, layouts: Sequence[Scored]) -> list[Setting]:
        """The rule's pick among the sub-chunk layouts of the layout stage, then the rule's pick of each
        further node size × budget pair, best first, up to ``grid.finalists`` layouts."""
        sub = [s for s in layouts if s.setting.subchunks is not None]
        pairs: dict[tuple[int, int], list[Scored]] = {}
        for s in sub:
            pairs.setdefault((s.setting.node_tokens, s.setting.subchunks.max_tokens), []).append(s)  # type: ignore[union-attr]
        picks = [choose(group, self.grid.tolerance, self.grid.bytes_slack) for group in pairs.values()]
        first = choose(sub, self.grid.tolerance, self.grid.bytes_slack)
        ranked = [first, *sorted((p for p in picks if p is not first), key=lambda s: -s.harmonic)]
        return [s.setting for s in ranked[: self.grid.finalists]]

    def reference_settings(self, chosen: Setting) -> list[Setting]:
        """The choice with int8 sub-chunks (through the store and simulated), with the larger reference
        prefetch limits, and by exact MaxSim."""
        if chosen.subchunks is None:
            return []
        larger = [p for p in self.grid.reference_prefetch_limits if p > chosen.prefetch_limit]
        return [
            replace(chosen, subchunk_int8=True),
            replace(chosen, scoring="int8-simulated"),
            *[replace(chosen, prefetch_limit=p) for p in larger],
            replace(chosen, scoring="exact"),
        ]

    def reported_settings(self, chosen: Setting) -> list[Setting]:
        """Shipped first, then the single-vector layouts, the choice and its references (no repeats)."""
        singles = [Setting(n, None, c) for n in self.grid.node_tokens for c in ("off", self.shipped.calibration)]
        out = [self.shipped, *singles, chosen, *self.reference_settings(chosen)]
        return list(dict.fromkeys(out))

    def score(self, bench: PositionBenchmark, settings: Sequence[Setting], stage: str) -> list[Scored]:
        """Run ``settings`` on ``bench`` (settings sharing a store are built once)."""
        order = sorted(settings, key=lambda s: (s.node_tokens, s.calibration, repr(s.subchunks), s.subchunk_int8))
        kwargs = {} if self.client_factory is None else {"client_factory": self.client_factory}
        with IndexPool(**kwargs) as pool:
            systems = [self._system(s, pool) for s in order]
            logger.info("%s stage on %s: %d settings", stage, bench.name, len(systems))
            results = run_eval(bench, systems, show_progress_bar=self.show_progress)
        by_setting = {s: Scored(s, r, m.stats, stage) for s, r, m in zip(order, results, systems)}
        return [by_setting[s] for s in settings]

    def _system(self, s: Setting, pool: IndexPool) -> DefaultPipelineSystem:
        encoder = self.encoder_for(s.node_tokens, s.calibration)
        search = eval_search(s.layout, s.prefetch_limit, s.node_weight, self.grid.depth, self.grid.exact_up_to)
        return DefaultPipelineSystem(s.label(), encoder, s.layout, search, scoring=s.scoring, pool=pool)
