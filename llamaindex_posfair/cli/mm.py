"""``posfair mm-eval``: multimodal position-bias calibration evaluated on a COCO-style image folder.

Heavy imports happen inside the handler so ``posfair --help`` stays fast; the flags follow
``docs/cli.md`` (comma-separated lists, the ``mm-`` prefix of multimodal settings).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from llamaindex_posfair.cli.options import (
    CliError,
    comma_list,
    int_at_least,
    user_errors,
)


def _check_evaluate_args(args: argparse.Namespace, known_methods: tuple[str, ...]) -> None:
    """Refuse settings ``mm-eval`` would only trip over after loading the model."""
    unknown = [m for m in args.methods if m not in known_methods]
    if unknown:
        raise CliError(f"--methods: unknown method(s) {unknown}; valid: {','.join(known_methods)}")
    if args.mm_calibration and not Path(args.mm_calibration).is_file():
        raise CliError(
            f"--mm-calibration {args.mm_calibration!r} does not exist; drop --mm-calibration to fit a calibration on "
            "--calibration-samples problems, or pass a file written by CalibrationState.save(path)"
        )


# user errors: missing files or models (OSError), settings the library rejects and states that do not fit (ValueError)
@user_errors(OSError, ValueError)
def _evaluate(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from llamaindex_posfair.multimodal.calibrator import AttentionGuidedCalibrator, CalibrationState
    from llamaindex_posfair.multimodal.coco import build_problems, load_captions
    from llamaindex_posfair.multimodal.evaluate import ALL_METHODS, evaluate_methods, format_table, plot_per_slot

    _check_evaluate_args(args, ALL_METHODS)
    pairs = load_captions(args.folder, args.captions)
    if args.mm_model == "tiny":
        from llamaindex_posfair.multimodal.tiny import build_tiny_adapter

        adapter = build_tiny_adapter("qwen2_vl")
    else:
        from llamaindex_posfair.multimodal.qwen_adapter import QwenVLAdapter

        adapter = QwenVLAdapter.from_pretrained(args.mm_model, device=args.device)
    rows = []
    for n in args.n:
        if args.mm_calibration:
            cal = AttentionGuidedCalibrator(
                state=CalibrationState.load(args.mm_calibration, model_id=adapter.model_id, n=n)
            )
        else:
            cal = AttentionGuidedCalibrator()
            calib = build_problems(pairs, n, args.calibration_samples, negatives=args.negatives, seed=args.seed)
            cal.fit(adapter, calib)
        test = build_problems(pairs, n, args.test_samples, negatives=args.negatives, seed=args.seed + 1)
        rep = evaluate_methods(adapter, cal, test, methods=args.methods)
        rows += list(rep.items())
        if args.plot_dir:
            out = plot_per_slot(
                {m: rep[m] for m in rep if m in ("vanilla", "ours")}, Path(args.plot_dir) / f"eval_n{n}.png"
            )
            print(f"plot: {out}")
    print(format_table(rows, args.rstd))
    return 0


def add_counts(p: argparse.ArgumentParser, default: tuple[int, ...], what: str) -> None:
    p.add_argument(
        "--n",
        type=comma_list(int_at_least(2)),
        default=default,
        metavar="N,N",
        help=f"candidate counts, comma-separated ({what})",
    )


def add_plot_dir(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--plot-dir", default=None, help=f"folder for {what}")


def register(subparsers: argparse._SubParsersAction) -> None:
    e = subparsers.add_parser("mm-eval", help="evaluate calibration on a COCO-style image folder")
    e.add_argument("folder", help="folder with images and a captions JSON")
    e.add_argument("--captions", default="captions.json")
    e.add_argument("--mm-model", default="tiny", help="'tiny' (random, offline) or a Qwen2-VL/2.5-VL path or hub id")
    e.add_argument("--device", default="cpu")
    add_counts(e, (4,), "2..12; default 4")
    e.add_argument("--negatives", choices=["random", "hard"], default="random")
    e.add_argument("--calibration-samples", type=int_at_least(1), default=5)
    e.add_argument("--test-samples", type=int_at_least(1), default=50)
    e.add_argument(
        "--mm-calibration", default=None, help="use this fitted calibration state (.safetensors) instead of fitting"
    )
    e.add_argument(
        "--methods",
        type=comma_list(str),
        default=("vanilla", "pride", "attention", "ours", "self_consistency"),
        metavar="M,M",
        help="methods, comma-separated (default vanilla,pride,attention,ours,self_consistency)",
    )
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--rstd", choices=["sample", "population"], default="sample")
    add_plot_dir(e, "the per-slot accuracy plot (before/after)")
    e.set_defaults(handler=_evaluate)
