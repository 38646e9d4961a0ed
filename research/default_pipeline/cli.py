"""``python -m research.default_pipeline``: the sweep behind the default pipeline's defaults.

Runs the default pipeline itself — ``posfair ingest`` into an embedded store, queries
through ``qdrant_tools.search`` — over node sizes, sub-chunk budgets and
overlaps, calibration, prefetch limits and node weights on the ``dev`` split,
chooses the settings to ship there only, and reports them on ``test`` next to
the shipped single-vector default pipeline::

    python -m research.default_pipeline --out-dir research/results/default_pipeline

writes ``summary.md/csv`` (test), ``sweep.md/csv`` (dev), ``ndcg_by_group.png``,
``frontier.png`` (harmonic nDCG@10 vs vector bytes per passage) and ``run.json`` (the
choice, the rule and the command). Embeddings are memoised on disk
(``--cache-dir``), so a rerun takes minutes.

This module only handles arguments; the sweep is ``research/default_pipeline/protocol.py``
and the files are written by ``research/default_pipeline/report.py``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
from dataclasses import asdict
from typing import Any

from llamaindex_posfair.cli.options import CliError, error_message, int_at_least
from research import _cli
from research.eval.cli import add_data_args, cache_dir_from_args, float_list, int_list, load_split

PROG = "python -m research.default_pipeline"


def build_parser() -> argparse.ArgumentParser:
    """The sweep's flags: ``python -m research.eval``'s data flags, then the grid."""
    p = _cli.parser(PROG, __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(p)
    p.add_argument(
        "--chunk-tokens-grid",
        type=int_list,
        default=(254, 510),
        help="node sizes tried (posfair ingest --chunk-tokens), comma-separated (default 254,510)",
    )
    p.add_argument(
        "--windows",
        default="510:512",
        help="CHUNK_TOKENS:MAX_LENGTH pairs, comma-separated, for node sizes beyond the model's default window "
        "(default 510:512)",
    )
    p.add_argument(
        "--subchunk-tokens-grid",
        type=int_list,
        default=(32, 48, 64, 96, 128),
        help="sub-chunk budgets tried (posfair ingest --subchunk-tokens), comma-separated (default 32,48,64,96,128)",
    )
    p.add_argument(
        "--subchunk-overlaps", default="0,1,2", help="sentence overlaps tried, comma-separated (default 0,1,2)"
    )
    p.add_argument("--calibrations", default="off,paper,posfair-minilm", help="'off' and preset names, comma-separated")
    p.add_argument(
        "--prefetch-limits", type=int_list, default=(20, 50, 100), help="prefetch limits tried, comma-separated"
    )
    p.add_argument(
        "--exact-up-to",
        type=int_at_least(0),
        default=None,
        help="exact MaxSim for collections of at most N nodes (default: the shipped 10000; 0 = always prefetch, "
        "the large-collection regime)",
    )
    p.add_argument(
        "--reference-prefetch-limits",
        type=int_list,
        default=(200, 500),
        help="larger prefetch limits reported for the choice, not chosen from, comma-separated (default 200,500)",
    )
    p.add_argument(
        "--node-weights",
        type=float_list,
        default=(0.0, 0.1, 0.2, 0.3, 0.5),
        help="node weights tried (posfair query --node-weight), comma-separated",
    )
    p.add_argument("--finalists", type=int_at_least(1), default=3, help="sub-chunk layouts tuned further")
    p.add_argument("--tolerance", type=float, default=1.0, help="harmonic-mean margin of the rule, in points")
    p.add_argument("--model", default=None, help="model path or name (default: bundled all-MiniLM-L6-v2)")
    p.add_argument("--threads", type=int_at_least(1), default=None, help="torch CPU threads (default: torch's)")
    p.add_argument(
        "--out-dir",
        default="research/results/default_pipeline",
        help="output folder (default research/results/default_pipeline)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument(
        "--cache-dir", default=None, help="embedding memo folder (default: ~/.cache/llamaindex_posfair/pipeline)"
    )
    p.add_argument("--no-cache", action="store_true", help="keep embeddings in memory only")
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the sweep; a user error prints one line ``PROG: error: ...`` and returns 2."""
    return _cli.run(build_parser(), run, argv)


def _pairs(text: str) -> dict[int, int]:
    try:
        return {int(a): int(b) for a, _, b in (item.partition(":") for item in text.split(",") if item.strip())}
    except ValueError:
        raise CliError(f"--windows takes CHUNK_TOKENS:MAX_LENGTH pairs, got {text!r}; e.g. 510:512") from None


def _overlaps(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = (-1,)
    if not values or min(values) < 0:
        raise CliError(f"--subchunk-overlaps takes comma-separated integers >= 0, got {text!r}; e.g. 0,1,2")
    return values


def _grid(args: argparse.Namespace) -> Any:
    from research.default_pipeline.protocol import DefaultPipelineGrid

    return DefaultPipelineGrid(
        node_tokens=tuple(args.chunk_tokens_grid),
        subchunk_tokens=tuple(args.subchunk_tokens_grid),
        subchunk_overlaps=_overlaps(args.subchunk_overlaps),
        calibrations=tuple(c.strip() for c in args.calibrations.split(",") if c.strip()),
        prefetch_limits=tuple(args.prefetch_limits),
        reference_prefetch_limits=tuple(args.reference_prefetch_limits),
        node_weights=tuple(args.node_weights),
        finalists=args.finalists,
        tolerance=args.tolerance / 100.0,
        **({} if args.exact_up_to is None else {"exact_up_to": args.exact_up_to}),
    )


def _encoders(args: argparse.Namespace, select: Any, grid: Any) -> Any:
    from llamaindex_posfair.encoders.models import BUNDLED_MINILM
    from llamaindex_posfair.encoders.spec import EncoderSpec
    from qdrant_tools.subchunks import SubchunkConfig, subchunk_text
    from research.default_pipeline.encoders import SpecEncoders, calibration_named
    from research.eval.memo import VectorMemo

    for name in grid.calibrations:
        calibration_named(name)  # unknown presets fail here, before any model loads
    probes = [s.text for t in list(select.corpus.values())[:8] for s in subchunk_text(t, SubchunkConfig(140, 0))]
    memo = VectorMemo(cache_dir_from_args(args, "pipeline"))
    return SpecEncoders(EncoderSpec(model=args.model or BUNDLED_MINILM), memo, probes, _pairs(args.windows))


def _store_label(exact_up_to: int) -> str:
    from research.default_pipeline.system import DEFAULT_CLIENT_FACTORY

    store = f"the embedded store `{DEFAULT_CLIENT_FACTORY.__module__}.{DEFAULT_CLIENT_FACTORY.__name__}`"
    if exact_up_to > 0:
        return store + (
            f" (sub-chunk search: exact MaxSim over every node of collections up to {exact_up_to:,} nodes, as "
            "shipped; the prefetch limits in the labels apply to larger collections only)"
        )
    return store + " (sub-chunk search: node-vector prefetch, then MaxSim: the regime of large collections)"


def run(args: argparse.Namespace) -> int:
    """Handler: flags -> ``DefaultPipelineProtocol`` -> ``write_default_pipeline``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    import torch

    from research.default_pipeline.protocol import SELECTION_RULE, DefaultPipelineProtocol
    from research.default_pipeline.report import write_default_pipeline

    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.verbose:  # one "local mode keeps no payload indexes" line per store is noise here
        logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    if args.select_split == args.split:
        raise CliError(f"--select-split {args.select_split!r} is the reported --split; pick a held-apart split (dev)")
    try:
        grid = _grid(args)
        report, select = load_split(args, args.split), load_split(args, args.select_split)
        encoders = _encoders(args, select, grid)
        outcome = DefaultPipelineProtocol(encoders, grid, show_progress=not args.no_progress).run(select, report)
    except (ValueError, KeyError, OSError) as exc:  # also SplitError, HeldApartError, unknown presets
        raise CliError(error_message(exc)) from None
    meta = {
        "command": " ".join([PROG, *(shlex.quote(a) for a in sys.argv[1:])]),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "torch_threads": torch.get_num_threads(),
        "store": _store_label(grid.exact_up_to),
        "benchmark": report.name,
        "select_benchmark": select.name,
        "rule": SELECTION_RULE.format(slack=grid.bytes_slack) + f"; tolerance {100 * grid.tolerance:g} points",
        "grid": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(grid).items()},
        "chosen": outcome.chosen.setting.to_dict(),
        "chosen_on_select": {"harmonic": outcome.chosen.harmonic, "psi": outcome.chosen.result.ndcg.psi},
        **outcome.notes,
    }
    table, _ = write_default_pipeline(outcome, report, select, args.out_dir, meta=meta, model_label="all-MiniLM-L6-v2")
    print(table)
    print(
        f"wrote {args.out_dir}/summary.md, summary.csv, sweep.md, sweep.csv, ndcg_by_group.png, frontier.png, run.json"
    )
    return 0
