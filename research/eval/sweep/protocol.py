"""The evaluation protocol of ``python -m research.eval``: select on a held-apart split, report on another.

Pure orchestration over ``runner``/``systems``: no argparse, no printing, no
files (``report.write_outputs`` writes). One run

1. scores the calibration grid and the named variants on the *selection*
   benchmark (``dev``), picks the best grid point and the best variant by
   harmonic-mean nDCG@10, tries one combination (the best grid point plus every
   variant option that beat the paper default there) and the mix weight α;
2. reports vanilla, the paper default, the selected settings, fixed configs
   (e.g. a preset), the score mix and any baseline systems on the *reported*
   benchmark (``test``).

The selection benchmark must be held apart: ``benchmarks.splits.check_held_apart`` refuses one
that shares a query (same question text and same relevant passages) with the
reported benchmark, so no table is "dev-selected" on its own test data.

Example:
    >>> from llamaindex_posfair.calibration.config import CalibrationConfig
    >>> from research.eval.sweep.protocol import Protocol, SelectionSpace
    >>> from research.eval.sweep.grid import SweepGrid
    >>> space = SelectionSpace(SweepGrid((128,), (0.5, 1.0), ("last_half",)))
    >>> protocol = Protocol(default=CalibrationConfig(), selection=space)
    >>> # outcome = protocol.run(encoder, load_shipped(split="test"), load_shipped(split="dev"))
    >>> # outcome.selection.best_grid.name, [r.name for r in outcome.results]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..benchmarks.data import PositionBenchmark
from ..benchmarks.splits import check_held_apart
from ..harness.mix import ScoreMixSystem
from ..harness.runner import SystemResult, run_eval
from ..harness.systems import DenseSystem, EncodeCache, RerankSystem, SegmentAverageSystem
from .grid import SweepGrid

__all__ = [
    "Protocol",
    "ProtocolResult",
    "SelectionRecord",
    "SelectionSpace",
    "baseline_systems",
    "combine_variants",
    "config_changes",
    "grid_caption",
    "summary_caption",
    "truncated_passages",
]

logger = logging.getLogger(__name__)

#: Fields a variant may not add to the best grid point in the combination (the grid chose them).
GRID_FIELDS = frozenset({"basket_size", "strength", "layers"})


# ------------------------------------------------------------------------ settings
@dataclass(frozen=True)
class SelectionSpace:
    """What is tuned on the selection benchmark.

    Args:
        grid: The (B, λ, layers) grid.
        variants: ``{label: CalibrationConfig}`` of named variants
            (``variants.variant_configs``); empty = none.
        mix_alphas: Weights α of the vanilla score tried in the score mix, in ``[0, 1]``.

    Raises:
        ValueError: no mix weight, or one outside ``[0, 1]``.
    """

    grid: SweepGrid
    variants: Mapping[str, Any] = field(default_factory=dict)
    mix_alphas: tuple[float, ...] = tuple(i / 10 for i in range(11))

    def __post_init__(self) -> None:
        if not self.mix_alphas:
            raise ValueError("mix_alphas must name at least one weight, e.g. 0,0.5,1")
        bad = [a for a in self.mix_alphas if not 0.0 <= float(a) <= 1.0]
        if bad:
            raise ValueError(f"mix_alphas must lie in [0, 1], got {bad[0]!r}; 1 = vanilla only, 0 = calibrated only")


@dataclass(frozen=True)
class SelectionRecord:
    """What was scored and chosen on the selection benchmark.

    Attributes:
        benchmark: Name of the selection benchmark (e.g. ``"needle-prose/dev"``).
        split: Its split (``None`` if the loader read data whole).
        vanilla: The vanilla encoder on it.
        grid: One result per grid point, in grid order.
        variants: One result per variant, then the combination if it was tried.
        mix: One result per mix weight.
        configs: Label -> ``CalibrationConfig`` of every grid point, variant and combination.
        best_grid: Best grid point (harmonic mean; the first on ties).
        best_variant: Best variant or combination, ``None`` without variants.
        combination: Variant labels combined with the best grid point (empty if none was tried).
        mixed: The calibrated side of the mix: the best of grid and variants.
        alpha: The chosen mix weight of the vanilla score.
        default: The paper default's result if the grid or a variant scored it.
    """

    benchmark: str
    split: str | None
    vanilla: SystemResult
    grid: tuple[SystemResult, ...]
    variants: tuple[SystemResult, ...]
    mix: tuple[SystemResult, ...]
    configs: Mapping[str, Any]
    best_grid: SystemResult
    best_variant: SystemResult | None
    combination: tuple[str, ...]
    mixed: SystemResult
    alpha: float
    default: SystemResult | None

    @property
    def results(self) -> list[SystemResult]:
        """Vanilla, grid points and variants (mix weights excluded), in scoring order."""
        return [self.vanilla, *self.grid, *self.variants]

    def to_dict(self) -> dict[str, Any]:
        """The choices, JSON-ready (for ``run.json``)."""
        return {
            "benchmark": self.benchmark,
            "best_grid": self.best_grid.name,
            "best_variant": None if self.best_variant is None else self.best_variant.name,
            "combination": list(self.combination),
            "mix_calibrated": self.mixed.name,
            "mix_alpha": self.alpha,
        }


@dataclass(frozen=True)
class ProtocolResult:
    """Results on the reported benchmark plus the selection record (``None`` without selection)."""

    results: list[SystemResult]
    selection: SelectionRecord | None
    benchmark: str


# ------------------------------------------------------------------------ selection
def config_changes(cfg: Any, reference: Any = None) -> dict[str, Any]:
    """The fields of ``cfg`` that differ from ``reference`` (default: ``CalibrationConfig()``).

    Example:
        >>> from llamaindex_posfair.calibration.config import CalibrationConfig
        >>> config_changes(CalibrationConfig(basket_size=64))
        {'basket_size': 64}
    """
    if reference is None:
        reference = type(cfg)()
    return {k: getattr(cfg, k) for k in type(cfg).model_fields if getattr(cfg, k) != getattr(reference, k)}


def _best(results: Sequence[SystemResult]) -> SystemResult:
    return max(results, key=lambda r: r.ndcg.harmonic)


def combine_variants(
    best_cfg: Any,
    paper: SystemResult | None,
    variant_results: Sequence[SystemResult],
    variants: Mapping[str, Any],
    default: Any,
) -> tuple[list[str], Any] | None:
    """The best grid point plus every variant option that beat the paper default.

    Options are added in order of their gain; a variant that touches a field
    already set (``basket_size``, ``strength``, ``layers`` or an earlier
    variant's) is skipped. A variant's options are the fields where its config
    differs from ``default``.

    Args:
        best_cfg: The best grid point's ``CalibrationConfig``.
        paper: The paper default's result on the selection benchmark (``None``: no combination).
        variant_results: Results of the variants on the selection benchmark.
        variants: Label -> ``CalibrationConfig`` of the variants.
        default: The paper default's ``CalibrationConfig``.

    Returns:
        ``(labels, CalibrationConfig)``, or ``None`` when no variant helped.
    """
    if paper is None:
        return None
    helped = sorted(
        (r for r in variant_results if r.name in variants and r.ndcg.harmonic > paper.ndcg.harmonic),
        key=lambda r: -r.ndcg.harmonic,
    )
    fields: dict[str, Any] = {}
    labels: list[str] = []
    taken = set(GRID_FIELDS)
    for r in helped:
        opts = config_changes(variants[r.name], default)
        if taken & set(opts):
            continue
        fields.update(opts)
        taken |= set(opts)
        labels.append(r.name)
    if not labels:
        return None
    return labels, type(best_cfg)(**{**best_cfg.model_dump(), **fields})


# ------------------------------------------------------------------------ systems
def baseline_systems(
    encoder: Any,
    calibration: Any,
    *,
    segment_tokens: int = 128,
    chunk_sizes: Sequence[int] = (64, 128, 256),
    multivector_tokens: int = 128,
    rerank_k: int = 20,
) -> list[Any]:
    """The systems reported next to calibration: Segment Embed Average, chunk-max, Qdrant MaxSim, rerank.

    Args:
        encoder: The encoder every baseline uses.
        calibration: The calibrated side of the contextual MaxSim and of the rerank (the paper default).
        segment_tokens: Segment size of Segment Embed Average.
        chunk_sizes: Chunk sizes of chunk-max (empty: none).
        multivector_tokens: Segment size of the Qdrant MaxSim systems (0: none).
        rerank_k: Vanilla candidates re-scored by the calibrated encoder.
    """
    from ..harness.chunking_systems import ChunkMaxSystem
    from ..harness.multivector import QdrantMaxSimSystem

    systems: list[Any] = [
        SegmentAverageSystem(f"Segment Embed Average ({segment_tokens} tok)", encoder, segment_tokens)
    ]
    systems += [ChunkMaxSystem(f"chunk-max {size} tok", encoder, size) for size in chunk_sizes]
    mt = multivector_tokens
    if mt:
        systems += [
            QdrantMaxSimSystem(f"Qdrant MaxSim, independent {mt}-tok segments", encoder, mt, "independent"),
            QdrantMaxSimSystem(f"Qdrant MaxSim, contextual {mt}-tok segments, vanilla", encoder, mt, "contextual"),
            QdrantMaxSimSystem(
                f"Qdrant MaxSim, contextual {mt}-tok segments, paper default",
                encoder,
                mt,
                "contextual",
                calibration=calibration,
            ),
        ]
    vanilla = DenseSystem("vanilla", encoder, None)
    label = f"rerank: vanilla top-{rerank_k} → default calib"
    systems.append(RerankSystem(label, vanilla, encoder, calibration, k=rerank_k))
    return systems


def truncated_passages(encoder: Any, bench: PositionBenchmark) -> int:
    """Passages of ``bench`` longer than the encoder's window (they are truncated)."""
    lengths = encoder.count_tokens([bench.corpus[d] for d in bench.doc_ids])
    return sum(n > encoder.max_length for n in lengths)


# ------------------------------------------------------------------------ the protocol
@dataclass(frozen=True)
class Protocol:
    """Select on a held-apart benchmark, report on another.

    Args:
        default: The paper default ``CalibrationConfig`` (always reported).
        default_label: Its row label.
        selection: What to tune; ``None`` reports fixed settings only.
        fixed: Label -> ``CalibrationConfig`` reported as they are (e.g. a preset);
            a config already in the table is not repeated.
        encode_batch_size: Texts per forward pass.
        show_progress: tqdm bars.
        cache_dir: Keep embeddings on disk there (resumable runs); ``None`` = memory only.

    Example:
        >>> # Protocol(default=CalibrationConfig(), selection=SelectionSpace(SweepGrid())).run(enc, test, dev)
    """

    default: Any
    default_label: str = "paper default"
    selection: SelectionSpace | None = None
    fixed: Mapping[str, Any] = field(default_factory=dict)
    encode_batch_size: int = 16
    show_progress: bool = False
    cache_dir: str | None = None

    def run(
        self,
        encoder: Any,
        report: PositionBenchmark,
        select: PositionBenchmark | None = None,
        baselines: Sequence[Any] = (),
    ) -> ProtocolResult:
        """Select on ``select`` (if there is a selection space), then score every system on ``report``.

        Raises:
            HeldApartError: ``select`` shares queries with ``report``.
            ValueError: a selection space without a selection benchmark, or the reverse.
        """
        if (self.selection is None) != (select is None):
            raise ValueError(
                "pass a selection benchmark exactly when the protocol has a selection space "
                f"(selection: {self.selection is not None}, benchmark: {select is not None})"
            )
        record = None
        if select is not None:
            check_held_apart(select, report)
            record = self.select(encoder, select)
        systems = [*self.reported_systems(encoder, record), *baselines]
        results = run_eval(
            report,
            systems,
            batch_size=self.encode_batch_size,
            show_progress_bar=self.show_progress,
            cache_dir=self.cache_dir,
        )
        return ProtocolResult(results=results, selection=record, benchmark=report.name)

    def select(self, encoder: Any, bench: PositionBenchmark) -> SelectionRecord:
        """Score the selection space on ``bench`` and choose (call ``run``, which checks it is held apart)."""
        space = self.selection
        if space is None:
            raise ValueError("this protocol has no selection space; pass selection=SelectionSpace(...)")
        cache = EncodeCache(
            [bench.corpus[d] for d in bench.doc_ids],
            [bench.queries[q] for q in bench.query_ids],
            batch_size=self.encode_batch_size,
            show_progress_bar=self.show_progress,
            cache_dir=self.cache_dir,
            doc_ids=bench.doc_ids,
        )
        points = dict(space.grid.points())
        configs = {**points, **space.variants}
        logger.info("grid: %d points, %d variants on %s", len(points), len(space.variants), bench.name)
        vanilla, grid, variants = self._score_candidates(encoder, bench, cache, points, space.variants)
        best = _best(grid)
        paper = next((r for r in grid if points[r.name] == self.default), None)
        combo = combine_variants(points[best.name], paper, variants, space.variants, self.default)
        labels: tuple[str, ...] = ()
        if combo is not None and combo[1] not in {points[best.name], *space.variants.values()}:
            labels, label = tuple(combo[0]), f"{best.name} + " + " + ".join(combo[0])
            configs[label] = combo[1]
            variants += run_eval(
                bench, [DenseSystem(label, encoder, combo[1], kind="variant")], show_progress_bar=False, cache=cache
            )
        mixed = _best([*grid, *variants])
        mix = self._score_mix(encoder, bench, cache, configs[mixed.name], space.mix_alphas)
        return SelectionRecord(
            benchmark=bench.name,
            split=bench.meta.get("split"),  # type: ignore[arg-type]
            vanilla=vanilla,
            grid=tuple(grid),
            variants=tuple(variants),
            mix=tuple(mix),
            configs=configs,
            best_grid=best,
            best_variant=_best(variants) if variants else None,
            combination=labels,
            mixed=mixed,
            alpha=float(_best(mix).params["alpha"]),
            default=paper,
        )

    def _score_candidates(
        self,
        encoder: Any,
        bench: PositionBenchmark,
        cache: EncodeCache,
        points: Mapping[str, Any],
        variants: Mapping[str, Any],
    ) -> tuple[SystemResult, list[SystemResult], list[SystemResult]]:
        systems = [
            DenseSystem("vanilla", encoder, None),
            *[DenseSystem(label, encoder, cfg, kind="calibrated") for label, cfg in points.items()],
            *[DenseSystem(label, encoder, cfg, kind="variant") for label, cfg in variants.items()],
        ]
        scored = run_eval(
            bench, systems, batch_size=self.encode_batch_size, show_progress_bar=self.show_progress, cache=cache
        )
        return scored[0], scored[1 : 1 + len(points)], scored[1 + len(points) :]

    def _score_mix(
        self,
        encoder: Any,
        bench: PositionBenchmark,
        cache: EncodeCache,
        calibration: Any,
        alphas: Sequence[float],
    ) -> list[SystemResult]:
        vanilla = DenseSystem("vanilla", encoder, None)
        calibrated = DenseSystem("cal", encoder, calibration)
        systems = [ScoreMixSystem(f"mix α={a:g}", vanilla, calibrated, alpha=a) for a in alphas]
        return run_eval(bench, systems, show_progress_bar=False, cache=cache)

    def reported_systems(self, encoder: Any, record: SelectionRecord | None) -> list[Any]:
        """Vanilla, the paper default, the selected settings, the fixed configs and the score mix (no repeats)."""
        vanilla = DenseSystem("vanilla", encoder, None)
        systems: list[Any] = [vanilla, DenseSystem(self.default_label, encoder, self.default, kind="calibrated")]
        seen = {self.default}

        def add(label: str, cfg: Any, kind: str) -> None:
            if cfg not in seen:
                systems.append(DenseSystem(label, encoder, cfg, kind=kind))
                seen.add(cfg)

        if record is not None:
            tag = f"{record.split or record.benchmark}-selected"
            add(f"best grid ({tag}) {record.best_grid.name}", record.configs[record.best_grid.name], "calibrated")
            if record.best_variant is not None:
                name = record.best_variant.name
                add(f"best variant ({tag}): {name}", record.configs[name], "variant")
        for label, cfg in self.fixed.items():
            add(label, cfg, "preset")
        if record is not None:
            a, side = record.alpha, record.mixed.name
            calibrated = DenseSystem("cal", encoder, record.configs[side])
            systems.append(ScoreMixSystem(f"mix α={a:g}·vanilla + {1 - a:g}·({side})", vanilla, calibrated, alpha=a))
        return systems


# ------------------------------------------------------------------------ captions
def grid_caption(record: SelectionRecord) -> str:
    """Caption of ``grid.md``: where the grid ran and the mix weights tried."""
    mix = ", ".join(f"α={r.params['alpha']:g} H={100 * r.ndcg.harmonic:.1f}" for r in record.mix)
    return (
        f"Calibration grid and named variants (over the paper default) on `{record.benchmark}` (selection split), "
        f"sorted by harmonic mean; nDCG@10 ×100; exact retrieval (numpy dot products over normalised vectors). "
        f"Mix α (weight of the vanilla score) swept with `{record.mixed.name}` as the calibrated side: {mix}."
    )


def summary_caption(
    bench: PositionBenchmark,
    model_label: str,
    max_length: int,
    rerank_k: int,
    record: SelectionRecord | None,
) -> str:
    """Caption of ``summary.md``: the benchmark, the model and what each system is."""
    groups = ", ".join(f"{g}={n}" for g, n in bench.group_counts().items())
    caption = (
        f"`{bench.name}` ({len(bench.queries)} queries, {len(bench.corpus)} passages, groups {groups}); model "
        f"`{model_label}`, max_length {max_length}; nDCG@10 ×100, PSI = 1 − min/max; exact retrieval (numpy dot "
        f"products over normalised vectors). Rerank = vanilla top-{rerank_k} re-scored by the default calibrated "
        f"encoder (implemented directly on the encoder, like PosFairRerank). Chunk-max = chunks embedded "
        f"alone, passage score = best chunk. Qdrant MaxSim = per-segment vectors in an embedded Qdrant multivector "
        f"collection (MaxSim comparator), scored through Qdrant's `query_points`; contextual segments are pooled "
        f"from one forward pass over the whole passage. Mix = α·vanilla + (1−α)·calibrated cosine, α chosen on "
        f"the selection split. vectors/passage = vectors stored per passage (mean)."
    )
    if record is not None:
        caption += f" Best grid point chosen by harmonic mean on `{record.benchmark}`."
    return caption
