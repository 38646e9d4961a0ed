"""``posfair eval``: compare vanilla, calibrated and baseline retrieval per position group.

Default run (the shipped needle benchmark, bundled all-MiniLM-L6-v2)::

    posfair eval --out results/minilm

sweeps the calibration grid and the named calibration variants
(``eval/variants.py``) on the ``dev`` split, picks the grid point and the
variant with the best harmonic-mean nDCG@10 there (and the fusion weight α),
and reports on ``test``: vanilla / paper default / best grid point / best
variant / the ``posfair-minilm`` preset / score fusion / Segment Embed Average /
chunk-max (64/128/256-token chunks) / multivector MaxSim through Qdrant
(independent segments; contextual segments from the vanilla and calibrated
encoders) / vanilla+calibrated rerank.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from exc


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc


def _layers(text: str) -> tuple[Any, ...]:
    out: list[Any] = []
    for part in text.split(";" if ";" in text else ","):
        part = part.strip()
        if part in ("last", "last_half"):
            out.append(part)
        elif part:
            out.append(tuple(int(v) for v in part.split("+")))
    return tuple(out)


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--calib-option takes KEY=VALUE, got {text!r}; e.g. basket_layout=equal")
    if key == "isolate":
        return key, tuple(v for v in value.split(",") if v)
    if key == "isolated_policy":  # kind:policy,kind:policy
        pairs = []
        for item in value.split(","):
            kind, _, pol = item.partition(":")
            try:
                pairs.append((kind, float(pol)))
            except ValueError:
                pairs.append((kind, pol))
        return key, tuple(pairs)
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    return key, value


def _cfg_fields(cfg: Any) -> dict[str, Any]:
    """The fields of ``cfg`` that differ from ``CalibrationConfig()`` (so variants can override them)."""
    from llamaindex_posfair.calibration.config import CalibrationConfig

    ref = CalibrationConfig()
    return {k: getattr(cfg, k) for k in type(cfg).model_fields if getattr(cfg, k) != getattr(ref, k)}


def default_in_sel(results: list[Any], encoder: Any, cfg: Any) -> Any:
    """The selection-split result of ``cfg`` (the paper default), or ``None``."""
    from llamaindex_posfair.eval.systems import DenseSystem

    params = DenseSystem("x", encoder, cfg).params
    return next((r for r in results if r.params == params and r.kind == "calibrated"), None)


def _combine(best_cfg: Any, paper: Any, var_results: list[Any], variants: dict[str, Any]) -> Any:
    """The best grid point plus every variant option that beat the paper default on the selection split.

    Options are added in order of their gain; one that touches a field already set
    (``basket_size``, ``strength``, ``layers`` or an earlier variant's) is skipped.
    Returns ``(labels, CalibrationConfig)`` or ``None`` when no variant helped.
    """
    if paper is None or best_cfg is None:
        return None
    from llamaindex_posfair.eval.variants import VARIANTS

    helped = sorted(
        (r for r in var_results if r.name in VARIANTS and r.ndcg.harmonic > paper.ndcg.harmonic),
        key=lambda r: -r.ndcg.harmonic,
    )
    fields: dict[str, Any] = {}
    labels: list[str] = []
    taken = {"basket_size", "strength", "layers"}
    for r in helped:
        opts = VARIANTS[r.name]
        if taken & set(opts):
            continue
        fields.update(opts)
        taken |= set(opts)
        labels.append(r.name)
    if not labels:
        return None
    return labels, type(best_cfg)(**{**best_cfg.model_dump(), **fields})


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="position-fairness evaluation: per-group nDCG@10, harmonic mean, PSI, grid sweep, plots",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--format", default="needle", choices=("needle", "beir", "fineweb-posq", "squad-posq", "posir"))
    p.add_argument("--data", default=None, help="local path of the benchmark (default: the shipped needle-prose)")
    p.add_argument("--split", default="test", help="split that is reported (default: test)")
    p.add_argument(
        "--select-split",
        default="dev",
        help="split on which the grid runs and the best point is chosen; 'none' = the reported split (in-sample)",
    )
    p.add_argument("--model", default=None, help="model path or name (default: bundled all-MiniLM-L6-v2)")
    p.add_argument("--max-length", type=int, default=512, help="encoder window in tokens (MiniLM's card says 256)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--basket-sizes", type=_ints, default=(64, 128, 256))
    p.add_argument("--strengths", type=_floats, default=(0.3, 0.5, 0.7, 1.0))
    p.add_argument(
        "--layers",
        type=_layers,
        default=("last_half",),
        help="e.g. last,last_half or 4+5 (default last_half: on the 30/group benchmark no `last`-only point beat vanilla)",
    )
    p.add_argument("--no-variants", action="store_true", help="skip the named calibration variants (eval/variants.py)")
    p.add_argument(
        "--chunk-sizes", type=_ints, default=(64, 128, 256), help="chunk-max chunk sizes in tokens ('' = none)"
    )
    p.add_argument(
        "--multivector-tokens", type=int, default=128, help="segment size of the Qdrant MaxSim systems (0 = none)"
    )
    p.add_argument(
        "--fusion-alphas",
        type=_floats,
        default=tuple(i / 10 for i in range(11)),
        help="fusion weights α of the vanilla score tried on the selection split",
    )
    p.add_argument("--preset", default="posfair-minilm", help="calibration preset also reported ('none' = skip)")
    p.add_argument("--no-grid", action="store_true", help="skip the sweep (vanilla, default and baselines only)")
    p.add_argument("--default-basket-size", type=int, default=128)
    p.add_argument("--default-strength", type=float, default=0.5)
    p.add_argument("--default-layers", default="last_half")
    p.add_argument(
        "--calib-option",
        type=_option,
        action="append",
        default=[],
        help="extra CalibrationConfig field for every calibrated system, KEY=VALUE (repeatable), "
        "e.g. basket_layout=equal, isolate=cls,sep, isolated_policy=sep:equal",
    )
    p.add_argument("--segment-tokens", type=int, default=128, help="segment size of Segment Embed Average")
    p.add_argument(
        "--rerank-k",
        type=int,
        default=20,
        help="vanilla candidates re-scored by the calibrated encoder (default 20: must be well below the corpus "
        "size, or the rerank equals the calibrated system; use ~100 on real corpora)",
    )
    p.add_argument("--dump-model", default=None, help="also evaluate a DUMP-prefixed model from this path")
    p.add_argument(
        "--max-queries",
        type=int,
        default=None,
        help="quick runs: only the first N queries and their judged passages (not comparable to full runs)",
    )
    p.add_argument("--out", default="results/eval", help="output folder for tables and plots")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument(
        "--cache-dir",
        default=None,
        help="keep embeddings as .npy files here so an interrupted run resumes (default: ~/.cache/llamaindex_posfair/eval)",
    )
    p.add_argument("--no-cache", action="store_true", help="do not keep embeddings on disk")
    p.set_defaults(handler=run)


def _load(args: argparse.Namespace, split: str):
    from llamaindex_posfair.eval.loaders import load_benchmark

    bench = load_benchmark(args.format, args.data, split=split)
    if args.max_queries is not None:
        bench = bench.subset(list(bench.query_ids)[: args.max_queries], judged_corpus_only=True)
    return bench


def run(args: argparse.Namespace) -> int:
    """Handler of ``posfair eval``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t_start = time.perf_counter()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from llamaindex_posfair.calibration.config import CalibrationConfig
    from llamaindex_posfair.calibration.presets import preset
    from llamaindex_posfair.encoders.encoder import PosFairEncoder, bundled_model_path
    from llamaindex_posfair.eval.chunking_systems import ChunkMaxSystem
    from llamaindex_posfair.eval.fusion import FusionSystem
    from llamaindex_posfair.eval.multivector import QdrantMaxSimSystem
    from llamaindex_posfair.eval.report import (
        format_markdown,
        plot_groups,
        plot_tradeoff,
        write_csv,
        write_per_query,
    )
    from llamaindex_posfair.eval.runner import SweepGrid, run_eval
    from llamaindex_posfair.eval.systems import DenseSystem, EncodeCache, RerankSystem, SegmentAverageSystem
    from llamaindex_posfair.eval.variants import variant_configs

    options = dict(args.calib_option)
    progress = not args.no_progress
    bench = _load(args, args.split)
    select_split = None if args.select_split.lower() in ("none", args.split) else args.select_split
    select_bench = _load(args, select_split) if (select_split and not args.no_grid) else bench
    model = args.model or bundled_model_path()
    model_label = "all-MiniLM-L6-v2" if args.model is None else Path(str(model)).name
    encoder = PosFairEncoder(model, calibration=None, max_length=args.max_length, batch_size=args.batch_size)
    lengths = encoder.count_tokens([bench.corpus[d] for d in bench.doc_ids])
    truncated = sum(n > encoder.max_length for n in lengths)
    if truncated:
        logger.warning(
            "%d of %d passages exceed max_length=%d and are truncated", truncated, len(lengths), encoder.max_length
        )
    default_cfg = CalibrationConfig(
        basket_size=args.default_basket_size,
        strength=args.default_strength,
        layers=_layers(args.default_layers)[0],
        **options,
    )
    default_label = f"default B={default_cfg.basket_size} λ={default_cfg.strength:g} {args.default_layers}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache_dir = (
        None
        if args.no_cache
        else (
            args.cache_dir
            or str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "llamaindex_posfair" / "eval")
        )
    )
    group_order = bench.group_order

    best_cfg, best_label, grid_results = None, None, []
    var_cfg, var_label, alpha = None, None, None
    if not args.no_grid:
        grid = SweepGrid(tuple(args.basket_sizes), tuple(args.strengths), tuple(args.layers), options)
        vanilla_sel = DenseSystem("vanilla", encoder, None)
        grid_systems = [DenseSystem(label, encoder, cfg, kind="calibrated") for label, cfg in grid.points()]
        variants = {} if args.no_variants else variant_configs(base={**_cfg_fields(default_cfg)})
        variant_systems = [DenseSystem(label, encoder, cfg, kind="variant") for label, cfg in variants.items()]
        logger.info(
            "grid: %d points, %d variants on %s (%d passages)",
            len(grid_systems),
            len(variant_systems),
            select_bench.name,
            len(select_bench.corpus),
        )
        sel_cache = EncodeCache(
            [select_bench.corpus[d] for d in select_bench.doc_ids],
            [select_bench.queries[q] for q in select_bench.query_ids],
            batch_size=args.batch_size,
            show_progress_bar=progress,
            cache_dir=cache_dir,
        )
        sel_results = run_eval(
            select_bench,
            [vanilla_sel, *grid_systems, *variant_systems],
            batch_size=args.batch_size,
            show_progress_bar=progress,
            cache=sel_cache,
        )
        grid_results = sel_results[: 1 + len(grid_systems)]
        var_results = sel_results[1 + len(grid_systems) :]
        best = max(grid_results[1:], key=lambda r: r.ndcg.harmonic)
        best_label = best.name
        best_cfg = dict(grid.points())[best_label]
        combo_results: list[Any] = []
        if var_results:
            combo = _combine(best_cfg, default_in_sel(sel_results, encoder, default_cfg), var_results, variants)
            if combo is not None and combo[1] not in {best_cfg, *variants.values()}:
                combo_label = f"{best_label} + " + " + ".join(combo[0])
                variants[combo_label] = combo[1]
                combo_results = run_eval(
                    select_bench,
                    [DenseSystem(combo_label, encoder, combo[1], kind="variant")],
                    show_progress_bar=False,
                    cache=sel_cache,
                )
                sel_results = sel_results + combo_results
                var_results = var_results + combo_results
            vbest = max(var_results, key=lambda r: r.ndcg.harmonic)
            var_label, var_cfg = vbest.name, variants[vbest.name]
        # the calibrated side of fusion: the best calibrated setting on the selection split
        chosen = max(sel_results[1:], key=lambda r: r.ndcg.harmonic)
        fuse_cfg = dict(grid.points()).get(chosen.name) or variants[chosen.name]
        fusion_sel = [
            FusionSystem(f"fusion α={a:g}", vanilla_sel, DenseSystem("cal", encoder, fuse_cfg), alpha=a)
            for a in args.fusion_alphas
        ]
        fusion_results = run_eval(select_bench, fusion_sel, show_progress_bar=False, cache=sel_cache)
        alpha = max(fusion_results, key=lambda r: r.ndcg.harmonic).params["alpha"]
        write_csv(sel_results + fusion_results, select_bench.group_order, out / "grid.csv")
        where = f"`{select_bench.name}`" + (" (selection split)" if select_split else " (same split as reported)")
        (out / "grid.md").write_text(
            format_markdown(
                sorted(sel_results, key=lambda r: -r.ndcg.harmonic),
                select_bench.group_order,
                caption=f"Calibration grid and named variants (over the paper default) on {where}, sorted by "
                f"harmonic mean; nDCG@10 ×100; exact retrieval (numpy dot products over normalised vectors). "
                f"Fusion α (weight of the vanilla score) swept with `{chosen.name}` as the calibrated side: "
                + ", ".join(f"α={r.params['alpha']:g} H={100 * r.ndcg.harmonic:.1f}" for r in fusion_results)
                + ".",
                baseline=sel_results[0],
                groups=select_bench.groups,
            ),
            encoding="utf-8",
        )
        default_in_grid = next(
            (r for r in sel_results if r.params == DenseSystem("x", encoder, default_cfg).params), None
        )
        refs = [sel_results[0]] + ([replace(default_in_grid, name="default")] if default_in_grid else [])
        refs.append(replace(best, name=f"best: {best.name}"))
        plot_tradeoff(
            sel_results[1:],
            out / "psi_vs_harmonic.png",
            reference=refs,
            title=f"{model_label}: PSI vs harmonic nDCG@10 on {select_bench.name}",
        )

    vanilla = DenseSystem("vanilla", encoder, None)
    default_sys = DenseSystem(default_label, encoder, default_cfg, kind="calibrated")
    systems = [vanilla, default_sys]
    seen = {default_cfg}
    tag = "dev-selected" if select_split else "in-sample best"
    if best_cfg is not None and best_cfg not in seen:
        systems.append(DenseSystem(f"best grid ({tag}) {best_label}", encoder, best_cfg, kind="calibrated"))
        seen.add(best_cfg)
    if var_cfg is not None and var_cfg not in seen:
        systems.append(DenseSystem(f"best variant ({tag}): {var_label}", encoder, var_cfg, kind="variant"))
        seen.add(var_cfg)
    if args.preset.lower() != "none":
        pcfg = preset(args.preset)
        if pcfg not in seen:
            systems.append(DenseSystem(f"preset {args.preset}", encoder, pcfg, kind="preset"))
            seen.add(pcfg)
    if alpha is not None:
        systems.append(
            FusionSystem(
                f"fusion α={alpha:g}·vanilla + {1 - alpha:g}·({chosen.name})",
                vanilla,
                DenseSystem("cal", encoder, fuse_cfg),
                alpha=alpha,
            )
        )
    systems.append(
        SegmentAverageSystem(f"Segment Embed Average ({args.segment_tokens} tok)", encoder, args.segment_tokens)
    )
    for size in args.chunk_sizes:
        systems.append(ChunkMaxSystem(f"chunk-max {size} tok", encoder, size))
    if args.multivector_tokens:
        mt = args.multivector_tokens
        systems.append(QdrantMaxSimSystem(f"Qdrant MaxSim, independent {mt}-tok segments", encoder, mt, "independent"))
        systems.append(
            QdrantMaxSimSystem(f"Qdrant MaxSim, contextual {mt}-tok segments, vanilla", encoder, mt, "contextual")
        )
        systems.append(
            QdrantMaxSimSystem(
                f"Qdrant MaxSim, contextual {mt}-tok segments, paper default",
                encoder,
                mt,
                "contextual",
                calibration=default_cfg,
            )
        )
    systems.append(
        RerankSystem(
            f"rerank: vanilla top-{args.rerank_k} → default calib", vanilla, encoder, default_cfg, k=args.rerank_k
        )
    )
    if args.dump_model:
        dump_enc = PosFairEncoder(
            args.dump_model, calibration=None, max_length=args.max_length, batch_size=args.batch_size
        )
        systems.append(DenseSystem("DUMP-prefixed", dump_enc, None, kind="dump"))
    results = run_eval(bench, systems, batch_size=args.batch_size, show_progress_bar=progress, cache_dir=cache_dir)
    wall = time.perf_counter() - t_start

    command = (
        "posfair eval " + " ".join(shlex.quote(a) for a in sys.argv[2:])
        if sys.argv[1:2] == ["eval"]
        else "posfair eval"
    )
    caption = (
        f"`{bench.name}` ({len(bench.queries)} queries, {len(bench.corpus)} passages, groups "
        f"{', '.join(f'{g}={n}' for g, n in bench.group_counts().items())}); model `{model_label}`, "
        f"max_length {encoder.max_length}; nDCG@10 ×100, PSI = 1 − min/max; exact retrieval (numpy dot products "
        f"over normalised vectors). Rerank = vanilla top-{args.rerank_k} re-scored by the default calibrated "
        f"encoder (implemented directly on the encoder, like PositionFairRerank). Chunk-max = chunks embedded "
        f"alone, passage score = best chunk. Qdrant MaxSim = per-segment vectors in an embedded Qdrant multivector "
        f"collection (MaxSim comparator), scored through Qdrant's `query_points`; contextual segments are pooled from "
        f"one forward pass over the whole passage. Fusion = α·vanilla + (1−α)·calibrated cosine, α chosen on the "
        f"selection split. vectors/passage = vectors stored per passage (mean)."
    )
    if best_cfg is not None:
        caption += f" Best grid point chosen by harmonic mean on `{select_bench.name}`" + (
            "." if select_split else " — the same split, so it is optimistic."
        )
    write_csv(results, group_order, out / "summary.csv")
    write_per_query(results, bench.groups, out / "per_query.csv")
    table = format_markdown(results, group_order, caption=caption, baseline=results[0], groups=bench.groups)
    (out / "summary.md").write_text(table, encoding="utf-8")
    plot_groups(results, group_order, out / "ndcg_by_group.png", title=f"{model_label} on {bench.name}")
    meta = {
        "command": command,
        "wall_seconds": round(wall, 1),
        "torch_threads": torch.get_num_threads(),
        "model": str(model),
        "max_length": encoder.max_length,
        "benchmark": bench.name,
        "select_benchmark": select_bench.name if grid_results else None,
        "grid_points": len(grid_results) - 1 if grid_results else 0,
        "calib_options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in options.items()},
        "truncated_passages": truncated,
    }
    (out / "run.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table)
    print(
        f"wrote {out}/summary.md, summary.csv, ndcg_by_group.png"
        + (", grid.md, grid.csv, psi_vs_harmonic.png" if grid_results else "")
    )
    print(f"wall time {wall:.0f} s")
    return 0
