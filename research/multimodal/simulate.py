"""``python -m research.multimodal.simulate``: calibration on the simulated MLLM with a planted position bias.

Fits the attention-guided calibrator on a few samples of
:class:`research.multimodal.simulator.SimulatedMLLM`, evaluates vanilla, PriDe
and the calibration over all cyclic shifts of held-out samples, next to the
unbiased simulator (the ceiling), and prints the results table (docs/multimodal.md)::

    python -m research.multimodal.simulate --n 4,8

Lists are comma-separated; plots go to ``--plot-dir``, all metrics to ``--json-out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from llamaindex_posfair.cli.mm import add_counts, add_plot_dir
from llamaindex_posfair.cli.options import int_at_least, user_errors
from research import _cli

PROG = "python -m research.multimodal.simulate"
_USER_ERRORS = (OSError, ValueError)


@user_errors(*_USER_ERRORS)
def _simulate(args: argparse.Namespace) -> int:
    from llamaindex_posfair.multimodal.calibrator import AttentionGuidedCalibrator, CalibratorConfig
    from llamaindex_posfair.multimodal.evaluate import evaluate_methods, format_table, plot_per_slot
    from research.multimodal.simulator import SimulatedMLLM, SimulatorConfig, make_samples

    rows, dump = [], {}
    for n in args.n:
        sim = SimulatedMLLM(SimulatorConfig(seed=args.seed))
        cal = AttentionGuidedCalibrator(
            CalibratorConfig(top_k=args.top_layers, sharpen=args.sharpen, variant=args.variant)
        )
        cal.fit(sim, make_samples(args.calibration_samples, n, seed=args.seed + 1, hard=args.hard))
        test = make_samples(args.test_samples, n, seed=args.seed + 2, hard=args.hard)
        rep = evaluate_methods(sim, cal, test)
        rep["unbiased simulator"] = evaluate_methods(sim.unbiased(), None, test, methods=("vanilla",))["vanilla"]
        rows += [(m if m != "ours" else "ours (attention-guided)", r) for m, r in rep.items()]
        dump[n] = {m: dataclasses.asdict(r) for m, r in rep.items()}
        if args.plot_dir:
            plot_per_slot({m: rep[m] for m in ("vanilla", "pride", "ours")}, Path(args.plot_dir) / f"sim_n{n}.png")
    print(format_table(rows, args.rstd))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(dump, indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The run's flags (the counts and plot folder are ``posfair mm-eval``'s)."""
    p = _cli.parser(PROG, __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_counts(p, (4, 8), "default 4,8")
    p.add_argument(
        "--calibration-samples", type=int_at_least(1), default=5, help="labelled samples, each run in N shifts"
    )
    p.add_argument("--test-samples", type=int_at_least(1), default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hard", action="store_true", help="hard negatives (relevance closer to the right image)")
    p.add_argument(
        "--top-layers", type=int_at_least(1), default=2, help="layers kept by visual evidence strength (default 2)"
    )
    p.add_argument("--sharpen", type=float, default=5.0)
    p.add_argument("--variant", choices=["linear", "log_mixture"], default="linear")
    p.add_argument("--rstd", choices=["sample", "population"], default="sample")
    add_plot_dir(p, "per-slot accuracy plots")
    p.add_argument("--json-out", default=None, help="write all metrics to this JSON file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return _cli.run(build_parser(), _simulate, argv)


if __name__ == "__main__":
    raise SystemExit(main())
