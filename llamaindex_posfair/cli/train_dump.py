"""``posfair train-dump``: add [DUMP] prefix tokens to an encoder, train with InfoNCE, save, evaluate.

Example (the shipped tiny set, CPU, about a minute of training):

    posfair train-dump --out runs/minilm-dump \\
        --data llamaindex_posfair/data/dump/train.jsonl --eval llamaindex_posfair/data/dump/test.jsonl

Without --data the shipped train split is used (and the shipped test split for
--eval). The report (JSON, also written to OUT/train_report.json) has the
held-apart retrieval metrics of the base model, of the prefixed model before
training, and after training.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from llamaindex_posfair.cli.options import CliError, user_errors
from llamaindex_posfair.encoders.models import BUNDLED_MINILM, resolve_model_path


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "train-dump",
        help="train a [DUMP]-prefixed encoder (InfoNCE) and save it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model", default=None, help="base SentenceTransformer folder or name (default: bundled all-MiniLM-L6-v2)"
    )
    p.add_argument("--out", required=True, help="folder to save the trained model into")
    p.add_argument(
        "--data",
        default=None,
        help="training triples .jsonl/.parquet (query, positive, negative); default: shipped train split",
    )
    p.add_argument(
        "--eval",
        dest="eval_path",
        default=None,
        help="held-apart triples for before/after retrieval metrics; default: shipped test split when --data is omitted",
    )
    p.add_argument("--no-eval", action="store_true", help="skip evaluation")
    p.add_argument(
        "--mode",
        default="full",
        choices=["full", "dump_only", "random_prefix", "soft_prompt"],
        help="what trains (default full = the paper); see docs/dump.md",
    )
    p.add_argument("--num-tokens", type=int, default=4, help="K prefix tokens (default 4)")
    p.add_argument("--lr", type=float, default=1e-4, help="learning rate (default 1e-4)")
    p.add_argument("--epochs", type=float, default=1.0, help="epochs (default 1)")
    p.add_argument(
        "--train-batch-size", type=int, default=32, help="training pairs per optimiser step (default 32; paper 256)"
    )
    p.add_argument(
        "--mini-batch-size",
        type=int,
        default=None,
        help="use the gradient-cache loss with this many sequences per forward pass",
    )
    p.add_argument("--max-length", type=int, default=None, help="tokens per text incl. prefix (default: model's)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    p.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"], help="auto = bf16 on capable CUDA")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available else cpu)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=run_train_dump)


def _fmt(metrics: dict[str, float]) -> str:
    keys = ("ndcg@10", "mrr@10", "recall@1", "recall@5", "infonce")
    return "  ".join(f"{k}={metrics[k]:.4f}" for k in keys)


@user_errors(OSError)
def run_train_dump(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from llamaindex_posfair.dump.config import DumpConfig, DumpTrainingConfig
    from llamaindex_posfair.dump.data import bundled_split

    try:
        dump_cfg = DumpConfig(num_tokens=args.num_tokens, mode=args.mode, seed=args.seed)
        train_cfg = DumpTrainingConfig(
            learning_rate=args.lr,
            epochs=args.epochs,
            batch_size=args.train_batch_size,
            mini_batch_size=args.mini_batch_size,
            max_length=args.max_length,
            max_steps=args.max_steps,
            precision=args.precision,
            seed=args.seed,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if os.path.exists(args.out) and os.listdir(args.out):
        raise CliError(f"--out {args.out!r} exists and is not empty; choose a new folder")

    from sentence_transformers import SentenceTransformer

    from llamaindex_posfair.dump.model import add_dump_prefix, save_dump_model
    from llamaindex_posfair.dump.training import evaluate_retrieval, load_triples, train_dump

    data_path = args.data or str(bundled_split("train"))
    eval_path = None if args.no_eval else (args.eval_path or (None if args.data else str(bundled_split("test"))))
    try:
        triples = load_triples(data_path)
        held_out = load_triples(eval_path) if eval_path else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    model_path = resolve_model_path(args.model or BUNDLED_MINILM)

    show = not args.no_progress
    try:
        model = SentenceTransformer(model_path, device=args.device)
    except OSError as exc:
        raise CliError(f"--model {model_path!r} cannot be loaded ({exc}); pass a SentenceTransformer folder") from None
    report: dict[str, Any] = {
        "model": model_path,
        "data": data_path,
        "eval": eval_path,
        "n_train": len(triples),
        "dump": dump_cfg.to_dict(),
        "training": train_cfg.to_dict(),
    }
    if held_out:
        report["eval_base"] = evaluate_retrieval(model, held_out, scale=train_cfg.scale)
        print(f"base model          {_fmt(report['eval_base'])}", file=sys.stderr)
    add_dump_prefix(model, dump_cfg)
    if held_out:
        report["eval_before"] = evaluate_retrieval(model, held_out, scale=train_cfg.scale)
        print(f"prefixed, untrained {_fmt(report['eval_before'])}", file=sys.stderr)
    start = time.perf_counter()
    train_report = train_dump(model, triples, train_cfg, show_progress_bar=show)
    report["train"] = train_report.to_dict()
    report["train"]["wall_seconds"] = round(time.perf_counter() - start, 2)
    if held_out:
        report["eval_after"] = evaluate_retrieval(model, held_out, scale=train_cfg.scale)
        print(f"prefixed, trained   {_fmt(report['eval_after'])}", file=sys.stderr)
    save_dump_model(model, args.out, extra={"training": train_cfg.to_dict(), "report": report})
    with open(os.path.join(args.out, "train_report.json"), "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    print(json.dumps(report, indent=2))
    return 0
