"""``python -m research.eval``: compare vanilla, calibrated and baseline retrieval per position group.

Default run (the shipped needle benchmark, bundled all-MiniLM-L6-v2)::

    python -m research.eval --out-dir research/results/minilm

sweeps the calibration grid and the named calibration variants
(``research/eval/sweep/variants.py``) on the ``dev`` split, picks the grid point and the
variant with the best harmonic-mean nDCG@10 there (and the mix weight α),
and reports on ``test``: vanilla / paper default / best grid point / best
variant / the ``posfair-minilm`` preset / score mix / Segment Embed Average /
chunk-max (64/128/256-token chunks) / multivector MaxSim through Qdrant
(independent segments; contextual segments from the vanilla and calibrated
encoders) / vanilla+calibrated rerank. The selection split must be held apart
from the reported one (``--no-grid`` skips selection).

This module only handles arguments; the protocol is ``research/eval/sweep/protocol.py`` and
the files are written by ``research/eval/sweep/report.py``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamaindex_posfair.cli.options import (
    CliError,
    comma_list,
    error_message,
    int_at_least,
    parse_layers,
)
from research import _cli

logger = logging.getLogger(__name__)

PROG = "python -m research.eval"


# ------------------------------------------------------------------ value parsers
#: Comma-separated lists (``""`` is the empty list: e.g. ``--chunk-sizes ''`` = no chunk-max systems).
int_list = comma_list(int_at_least(1), allow_empty=True)
float_list = comma_list(float, allow_empty=True)


def layer_set_type(text: str) -> Any:
    """:func:`~llamaindex_posfair.cli.options.parse_layers` as an argparse ``type`` (argparse names the flag in its
    error)."""
    try:
        return parse_layers(text, "a layer set")
    except CliError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _one_layer_set(text: str) -> Any:
    try:
        return parse_layers(text, "a layer set")
    except CliError:
        raise argparse.ArgumentTypeError(
            f'a layer set in --layer-sets must be "last", "last_half" or layer indices joined by "+" such as 3+4+5; '
            f"got {text.strip()!r}"
        ) from None


def _layer_sets(text: str) -> tuple[Any, ...]:
    """Several layer sets, comma-separated: ``last,last_half,3+4`` (the indices of one set joined by ``+``)."""
    return tuple(_one_layer_set(part) for part in text.split(",") if part.strip())


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--calib-option takes KEY=VALUE, got {text!r}; e.g. basket_layout=equal")
    if key == "isolate":
        return key, tuple(v for v in value.split(",") if v)
    if key == "isolated_policy":  # kind:policy,kind:policy
        pairs: list[tuple[str, Any]] = []
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


# ------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    """The command's flags: the data, the grid, the systems, the run."""
    p = _cli.parser(PROG, __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(p)
    _add_grid_args(p)
    _add_system_args(p)
    _add_run_args(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's arguments) and run; a user error prints one line
    ``python -m research.eval: error: ...`` and returns 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return _cli.run(build_parser(), lambda args: run(args, argv), argv)


def add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default="needle", choices=("needle", "beir", "fineweb-posq", "squad-posq", "posir"))
    p.add_argument("--data", default=None, help="local path of the benchmark (default: the shipped needle-prose)")
    p.add_argument("--split", default="test", help="split that is reported (default: test; 'none' = a file read whole)")
    p.add_argument(
        "--select-split",
        default="dev",
        help="held-apart split on which the grid runs and the best point is chosen (default: dev); must differ "
        "from --split (--no-grid skips selection)",
    )
    p.add_argument(
        "--max-queries",
        type=int_at_least(1),
        default=None,
        help="quick runs: only the first N queries and their judged passages (not comparable to full runs)",
    )


def _add_grid_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--basket-sizes", type=int_list, default=(64, 128, 256), help="basket sizes of the grid (default 64,128,256)"
    )
    p.add_argument(
        "--strengths",
        type=float_list,
        default=(0.3, 0.5, 0.7, 1.0),
        help="strengths of the grid (default 0.3,0.5,0.7,1)",
    )
    p.add_argument(
        "--layer-sets",
        type=_layer_sets,
        default=("last_half",),
        help='layer sets of the grid, comma-separated, the indices of one set joined by "+": e.g. '
        '"last,last_half,3+4" (default last_half: on the 30/group benchmark no `last`-only point beat vanilla)',
    )
    p.add_argument(
        "--no-variants",
        action="store_true",
        help="skip the named calibration variants (research/eval/sweep/variants.py)",
    )
    p.add_argument(
        "--mix-alphas",
        type=float_list,
        default=tuple(i / 10 for i in range(11)),
        help="mix weights α of the vanilla score tried on the selection split, comma-separated (default 0,0.1,...,1)",
    )
    p.add_argument("--no-grid", action="store_true", help="skip selection (vanilla, default and baselines only)")
    p.add_argument("--default-basket-size", type=int_at_least(1), default=128)
    p.add_argument("--default-strength", type=float, default=0.5)
    p.add_argument(
        "--default-layers", type=layer_set_type, default="last_half", help="the paper default's layer set (one set)"
    )
    p.add_argument(
        "--calib-option",
        type=_option,
        action="append",
        default=[],
        help="extra CalibrationConfig field for every calibrated system, KEY=VALUE (repeatable), "
        "e.g. basket_layout=equal, isolate=cls,sep, isolated_policy=sep:equal",
    )


def _add_system_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="model path or name (default: bundled all-MiniLM-L6-v2)")
    p.add_argument("--max-length", type=int_at_least(1), default=512, help="encoder window (MiniLM's card says 256)")
    p.add_argument("--preset", default="posfair-minilm", help="calibration preset also reported ('none' = skip)")
    p.add_argument(
        "--chunk-sizes",
        type=int_list,
        default=(64, 128, 256),
        help="chunk-max chunk sizes in tokens, comma-separated ('' = none)",
    )
    p.add_argument(
        "--multivector-tokens",
        type=int_at_least(0),
        default=128,
        help="segment size of the Qdrant MaxSim systems (0 = none)",
    )
    p.add_argument("--segment-tokens", type=int_at_least(1), default=128, help="segment size of Segment Embed Average")
    p.add_argument(
        "--rerank-k",
        type=int_at_least(1),
        default=20,
        help="vanilla candidates re-scored by the calibrated encoder (default 20: must be well below the corpus "
        "size, or the rerank equals the calibrated system; use ~100 on real corpora)",
    )
    p.add_argument("--dump-model", default=None, help="also evaluate a DUMP-prefixed model from this path")


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--encode-batch-size", type=int_at_least(1), default=16, help="texts per forward pass (default 16)")
    p.add_argument("--threads", type=int_at_least(1), default=None, help="torch CPU threads (default: torch's)")
    p.add_argument(
        "--out-dir", default="results/eval", help="output folder for tables and plots (default results/eval)"
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument(
        "--cache-dir",
        default=None,
        help="keep embeddings here (one memo: fingerprint, role, text) so an interrupted run resumes (default: ~/.cache/llamaindex_posfair/eval)",
    )
    p.add_argument("--no-cache", action="store_true", help="do not keep embeddings on disk")


# ------------------------------------------------------------------ from flags to a protocol
@dataclass
class _Setup:
    """Everything one run needs, built from the flags before any encoding."""

    encoder: Any
    model: str
    model_label: str
    report: Any
    select: Any
    protocol: Any
    baselines: list[Any]
    truncated: int


def splits(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(reported split, selection split); the selection split is never the reported one."""
    report = None if args.split.lower() == "none" else args.split
    if args.no_grid:
        return report, None
    select = args.select_split
    if select.lower() == "none":
        raise CliError(
            "--select-split none (selecting on the reported split) is not supported: the harness never selects "
            "on the data it reports. Fix: pass --no-grid to skip selection, or a held-apart split (--select-split dev)"
        )
    if select == args.split:
        raise CliError(
            f"--select-split {select!r} is the reported --split {args.split!r}: the harness never selects on the "
            f"data it reports. Fix: pick a held-apart split (e.g. --split test --select-split dev) or pass --no-grid"
        )
    return report, select


def load_split(args: argparse.Namespace, split: str | None) -> Any:
    from research.eval.benchmarks.loaders import load_benchmark

    bench = load_benchmark(args.format, args.data, split=split)
    if args.max_queries is not None:
        bench = bench.subset(list(bench.query_ids)[: args.max_queries], judged_corpus_only=True)
    return bench


def cache_dir_from_args(args: argparse.Namespace, name: str = "eval") -> str | None:
    """``--cache-dir``, or ``$XDG_CACHE_HOME/llamaindex_posfair/NAME``; ``None`` with ``--no-cache``."""
    if args.no_cache:
        return None
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "llamaindex_posfair" / name
    return args.cache_dir or str(default)


def _protocol(args: argparse.Namespace, encoder: Any, selecting: bool) -> Any:
    from llamaindex_posfair.calibration.config import CalibrationConfig
    from llamaindex_posfair.calibration.presets import preset
    from research.eval.sweep.grid import SweepGrid, layers_label
    from research.eval.sweep.protocol import Protocol, SelectionSpace, config_changes
    from research.eval.sweep.variants import variant_configs

    options = dict(args.calib_option)
    default = CalibrationConfig(
        basket_size=args.default_basket_size, strength=args.default_strength, layers=args.default_layers, **options
    )
    space = None
    if selecting:
        grid = SweepGrid(tuple(args.basket_sizes), tuple(args.strengths), tuple(args.layer_sets), options)
        variants = {} if args.no_variants else variant_configs(encoder.num_layers, base=config_changes(default))
        space = SelectionSpace(grid, variants, tuple(args.mix_alphas))
    fixed = {}
    if args.preset.lower() != "none":
        try:
            fixed[f"preset {args.preset}"] = preset(args.preset)
        except KeyError as exc:
            raise CliError(f"--preset: {exc.args[0]}") from None
    return Protocol(
        default=default,
        default_label=f"default B={default.basket_size} λ={default.strength:g} {layers_label(default.layers)}",
        selection=space,
        fixed=fixed,
        encode_batch_size=args.encode_batch_size,
        show_progress=not args.no_progress,
        cache_dir=cache_dir_from_args(args),
    )


def _setup(args: argparse.Namespace) -> _Setup:
    """Check the flags, load the benchmarks and the encoder, build the protocol (user errors raise here)."""
    from llamaindex_posfair.encoders.encoder import PosFairEncoder
    from llamaindex_posfair.encoders.models import BUNDLED_MINILM
    from research.eval.benchmarks.splits import check_held_apart
    from research.eval.harness.systems import DenseSystem
    from research.eval.sweep.protocol import baseline_systems, truncated_passages

    report_split, select_split = splits(args)
    report = load_split(args, report_split)
    select = load_split(args, select_split) if select_split is not None else None
    if select is not None:
        check_held_apart(select, report)
    model = args.model or BUNDLED_MINILM
    encoder = PosFairEncoder(model, calibration=None, max_length=args.max_length, batch_size=args.encode_batch_size)
    protocol = _protocol(args, encoder, selecting=select is not None)
    baselines = baseline_systems(
        encoder,
        protocol.default,
        segment_tokens=args.segment_tokens,
        chunk_sizes=args.chunk_sizes,
        multivector_tokens=args.multivector_tokens,
        rerank_k=args.rerank_k,
    )
    if args.dump_model:
        dump_enc = PosFairEncoder(
            args.dump_model, calibration=None, max_length=args.max_length, batch_size=args.encode_batch_size
        )
        baselines.append(DenseSystem("DUMP-prefixed", dump_enc, None, kind="dump"))
    label = "all-MiniLM-L6-v2" if args.model is None else Path(str(model)).name
    return _Setup(
        encoder, encoder.model_id, label, report, select, protocol, baselines, truncated_passages(encoder, report)
    )


# ------------------------------------------------------------------ the handler
def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    """Handler: flags -> ``sweep.protocol`` -> ``sweep.report`` files; ``argv`` is recorded in ``run.json``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t_start = time.perf_counter()
    import torch

    from research.eval.sweep.protocol import summary_caption
    from research.eval.sweep.report import write_outputs

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        s = _setup(args)
    except (ValueError, OSError) as exc:  # also FileNotFoundError, SplitError, HeldApartError
        raise CliError(error_message(exc)) from None
    if s.truncated:
        logger.warning(
            "%d of %d passages exceed max_length=%d and are truncated",
            s.truncated,
            len(s.report.corpus),
            s.encoder.max_length,
        )
    outcome = s.protocol.run(s.encoder, s.report, s.select, s.baselines)
    wall = time.perf_counter() - t_start
    caption = summary_caption(s.report, s.model_label, s.encoder.max_length, args.rerank_k, outcome.selection)
    meta = _run_meta(args, argv, s, outcome, wall, torch.get_num_threads())
    table, _ = write_outputs(
        outcome, s.report, s.select, args.out_dir, caption=caption, model_label=s.model_label, meta=meta
    )
    print(table)
    grid_files = ", grid.md, grid.csv, psi_vs_harmonic.png" if outcome.selection else ""
    print(f"wrote {args.out_dir}/summary.md, summary.csv, ndcg_by_group.png{grid_files}")
    print(f"wall time {wall:.0f} s")
    return 0


def _run_meta(
    args: argparse.Namespace, argv: Sequence[str], s: _Setup, outcome: Any, wall: float, threads: int
) -> dict[str, Any]:
    """Provenance of the run (``run.json``)."""
    record = outcome.selection
    return {
        "command": " ".join([PROG, *(shlex.quote(a) for a in argv)]),
        "wall_seconds": round(wall, 1),
        "torch_threads": threads,
        "model": s.model,
        "max_length": s.encoder.max_length,
        "benchmark": s.report.name,
        "select_benchmark": record.benchmark if record else None,
        "grid_points": len(record.grid) if record else 0,
        "calib_options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in dict(args.calib_option).items()},
        "truncated_passages": s.truncated,
        "selection": record.to_dict() if record else None,
    }
