"""``posfair train-dump``: add [DUMP] prefix tokens to an encoder, train with InfoNCE, save, evaluate.

From raw text (label-free, position-balanced pairs; docs/methods.md part B, docs/dump.md):

    posfair train-dump --corpus my_docs/ --save-model runs/minilm-dump --max-steps 40 --train-batch-size 8

a pseudo-query is a sentence drawn at a uniformly random position of a passage
(the default layout's node size, --chunk-tokens), cut out of it with probability --remove-prob; the
positive is that passage, the hard negative a neighbouring passage of the same
document. Documents are split into train and dev (--dev-fraction); the report
has the in-domain retrieval metrics on the dev documents before and after.

From triples (the shipped tiny set by default):

    posfair train-dump --save-model runs/minilm-dump \\
        --data llamaindex_posfair/data/dump/train.jsonl --eval llamaindex_posfair/data/dump/test.jsonl

--mode plain trains the same way without any prefix (the plain fine-tune the
paper compares against). Checkpoints go to DIR/checkpoints (DIR: --save-model)
every --checkpoint-steps steps; after an interruption, rerun the same command and
it resumes. The report (JSON, also DIR/train_report.json) has the metrics of the
base model, of the prefixed model before training and after training.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Any

from llamaindex_posfair.cli.options import CliError, int_at_least, user_errors
from llamaindex_posfair.encoders.models import BUNDLED_MINILM, resolve_model_path

MODES = ("full", "dump_only", "random_prefix", "soft_prompt", "plain")
SETTINGS_FILE = "train_settings.json"
REPORT_FILE = "train_report.json"
CHECKPOINT_DIR = "checkpoints"
#: ``--dtype`` value -> ``DumpTrainingConfig.precision``.
PRECISION = {"auto": "auto", "bfloat16": "bf16", "float32": "fp32"}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "train-dump",
        help="train a [DUMP]-prefixed encoder (InfoNCE) from raw text or triples and save it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model", default=None, help="base SentenceTransformer folder or name (default: bundled all-MiniLM-L6-v2)"
    )
    p.add_argument(
        "--save-model",
        required=True,
        metavar="DIR",
        help="folder to save the trained model into (required; rerun to resume)",
    )
    _add_data_args(p)
    p.add_argument(
        "--mode",
        default="full",
        choices=MODES,
        help="what trains (default full = the paper; plain = no prefix, the plain fine-tune); see docs/dump.md",
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
    p.add_argument(
        "--encode-batch-size",
        type=int_at_least(1),
        default=32,
        help="texts per forward pass in evaluation (default 32)",
    )
    p.add_argument(
        "--max-length", type=int_at_least(1), default=None, help="tokens per text incl. prefix (default: model's)"
    )
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    p.add_argument(
        "--checkpoint-steps", type=int_at_least(1), default=25, help="steps between checkpoints (default 25)"
    )
    p.add_argument(
        "--dtype",
        default="auto",
        choices=list(PRECISION),
        help="training dtype (default auto = bfloat16 on capable CUDA, else float32)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of pairs, split, initialisation and training (default 0)")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available else cpu)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=run_train_dump)


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", default=None, help="folder of .txt/.md files: label-free pairs (see above)")
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
    g = p.add_argument_group("pairs from --corpus")
    g.add_argument(
        "--chunk-tokens",
        type=int,
        default=None,
        help="tokens per passage (default: the node size of posfair ingest, whose --chunk-tokens this is)",
    )
    g.add_argument(
        "--remove-prob", type=float, default=0.5, help="probability that a query is cut out of its passage (0.5)"
    )
    g.add_argument("--query-sentences", type=int, default=1, help="a query is 1..N consecutive sentences (default 1)")
    g.add_argument("--min-query-words", type=int, default=4, help="shorter sentences never make a query (default 4)")
    g.add_argument("--pairs-per-passage", type=int, default=4, help="independent draws per passage (default 4)")
    g.add_argument("--dev-fraction", type=float, default=0.2, help="share of documents held apart (default 0.2)")
    g.add_argument(
        "--dev-queries-per-passage", type=int_at_least(1), default=2, help="in-domain check queries per dev passage (2)"
    )


def _fmt(metrics: dict[str, float]) -> str:
    keys = ("ndcg@10", "mrr@10", "recall@1", "recall@5", "infonce")
    return "  ".join(f"{k}={metrics[k]:.4f}" for k in keys if k in metrics)


def _configs(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(DumpConfig or None for --mode plain, DumpTrainingConfig, PairConfig or None without --corpus)."""
    from llamaindex_posfair.dump.config import DumpConfig, DumpTrainingConfig
    from llamaindex_posfair.dump.pairs import PairConfig

    if args.corpus and args.data:
        raise CliError("--corpus builds training pairs from raw text and --data reads triples; pass one of them")
    if args.corpus and not os.path.exists(args.corpus):
        raise CliError(f"--corpus {args.corpus!r} does not exist; pass a folder of .txt/.md files")
    if args.corpus and args.eval_path:
        raise CliError("--corpus evaluates on its own held-apart documents; drop --eval (or use --no-eval)")
    try:
        dump_cfg = (
            None if args.mode == "plain" else DumpConfig(num_tokens=args.num_tokens, mode=args.mode, seed=args.seed)
        )
        train_cfg = DumpTrainingConfig(
            learning_rate=args.lr,
            epochs=args.epochs,
            batch_size=args.train_batch_size,
            mini_batch_size=args.mini_batch_size,
            max_length=args.max_length,
            max_steps=args.max_steps,
            precision=PRECISION[args.dtype],
            seed=args.seed,
        )
        pair_cfg = None
        if args.corpus:
            pair_cfg = PairConfig(
                remove_prob=args.remove_prob,
                max_query_sentences=args.query_sentences,
                min_query_words=args.min_query_words,
                pairs_per_passage=args.pairs_per_passage,
                dev_fraction=args.dev_fraction,
                seed=args.seed,
            )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.chunk_tokens is not None and args.chunk_tokens < 8:
        raise CliError(f"--chunk-tokens must be an integer >= 8, got {args.chunk_tokens}; default: the node size")
    return dump_cfg, train_cfg, pair_cfg


def _settings(args: argparse.Namespace, model_path: str, dump_cfg: Any, train_cfg: Any, pair_cfg: Any) -> dict:
    """Everything that shapes the trained weights (a rerun resumes only with the same settings)."""
    return {
        "model": model_path,
        "data": None if args.corpus else (args.data or "shipped train split"),
        "corpus": os.path.abspath(args.corpus) if args.corpus else None,
        "passage_tokens": args.chunk_tokens,  # the key of earlier runs: a rerun still resumes them
        "dump": None if dump_cfg is None else dump_cfg.to_dict(),
        "training": train_cfg.to_dict(),
        "pairs": None if pair_cfg is None else pair_cfg.to_dict(),
    }


def _check_out(out: str, settings: dict) -> bool:
    """Whether to resume: ``--save-model`` is new (False), or holds an unfinished run with the same settings (True).

    Raises:
        CliError: the folder holds a finished model, another run's checkpoints, or other files.
    """
    if not (os.path.exists(out) and os.listdir(out)):
        return False
    if os.path.exists(os.path.join(out, REPORT_FILE)):
        raise CliError(f"--save-model {out!r} already holds a trained model ({REPORT_FILE}); choose a new folder")
    path = os.path.join(out, SETTINGS_FILE)
    if not os.path.exists(path):
        raise CliError(f"--save-model {out!r} exists and is not empty; choose a new folder")
    with open(path, encoding="utf-8") as fh:
        previous = json.load(fh)
    if previous != settings:
        changed = sorted(k for k in set(previous) | set(settings) if previous.get(k) != settings.get(k))
        raise CliError(
            f"--save-model {out!r} holds an unfinished run with other settings ({', '.join(changed)} differ); "
            "rerun with the same flags to resume it, or choose a new folder"
        )
    return True


def _corpus_data(args: argparse.Namespace, model: Any, pair_cfg: Any, show: bool) -> tuple[list, dict, dict]:
    """Training triples, in-domain dev sets and a description, from --corpus."""
    from llamaindex_posfair.dump.corpus import corpus_passages, node_tokens, read_corpus
    from llamaindex_posfair.dump.pairs import build_eval_set, build_pairs, pair_statistics
    from llamaindex_posfair.dump.training import Triple

    corpus = read_corpus(args.corpus, pair_cfg.dev_fraction, pair_cfg.seed)
    tokens = args.chunk_tokens or node_tokens(model)
    train = corpus_passages(corpus.train, model.tokenizer, tokens, show_progress=show)
    pairs = build_pairs(train, pair_cfg)
    dev_sets = {}
    if corpus.dev and not args.no_eval:
        dev = corpus_passages(corpus.dev, model.tokenizer, tokens)
        for name, removed in (("dev, sentence kept", False), ("dev, sentence removed", True)):
            dev_sets[name] = build_eval_set(
                dev,
                args.dev_queries_per_passage,
                pair_cfg.seed + 1,
                removed=removed,
                min_query_words=pair_cfg.min_query_words,
            )
    info = {
        **corpus.to_dict(),
        "passage_tokens": tokens,
        "train_passages": len(train),
        "pair_statistics": pair_statistics(pairs),
        "dev_queries": {k: len(v.queries) for k, v in dev_sets.items()},
    }
    return [Triple(p.query, p.positive, p.negative) for p in pairs], dev_sets, info


def _triples_data(args: argparse.Namespace) -> tuple[list, dict, dict]:
    """Training triples and held-apart triples from --data / --eval (default: the shipped splits)."""
    from llamaindex_posfair.dump.data import bundled_split
    from llamaindex_posfair.dump.training import load_triples

    data_path = args.data or str(bundled_split("train"))
    eval_path = None if args.no_eval else (args.eval_path or (None if args.data else str(bundled_split("test"))))
    try:
        triples = load_triples(data_path)
        held_out = {"held-apart triples": load_triples(eval_path)} if eval_path else {}
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return triples, held_out, {"data": data_path, "eval": eval_path, "n_train": len(triples)}


def _evaluate(model: Any, sets: dict, label: str, args: argparse.Namespace, scale: float) -> dict:
    from llamaindex_posfair.dump.pairs import EvalSet
    from llamaindex_posfair.dump.training import evaluate_eval_set, evaluate_retrieval

    out = {}
    for name, data in sets.items():
        if isinstance(data, EvalSet):
            out[name] = evaluate_eval_set(model, data, batch_size=args.encode_batch_size)
        else:
            out[name] = evaluate_retrieval(model, data, scale=scale, batch_size=args.encode_batch_size)
        print(f"{label:<20}{name:<24}{_fmt(out[name])}", file=sys.stderr)
    return out


def _keep_text_window(model: Any, k: int) -> int:
    """Grow ``max_seq_length`` by the ``k`` prefix tokens when the position table allows it.

    The prefix then takes no room from the text: passages at the node size are
    not truncated in training, and ``posfair ingest`` cuts the same nodes for
    the trained model as for its base.
    """
    limit = getattr(model[0].auto_model.config, "max_position_embeddings", None)
    wanted = int(model.max_seq_length) + k
    if limit is not None and wanted <= int(limit):
        model.max_seq_length = wanted
    return int(model.max_seq_length)


def _load_base(args: argparse.Namespace, model_path: str) -> Any:
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(model_path, device=args.device)
    except OSError as exc:
        raise CliError(f"--model {model_path!r} cannot be loaded ({exc}); pass a SentenceTransformer folder") from None


@user_errors(OSError, ValueError)
def run_train_dump(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from llamaindex_posfair.dump.model import add_dump_prefix
    from llamaindex_posfair.dump.training import train_contrastive, train_dump

    dump_cfg, train_cfg, pair_cfg = _configs(args)
    model_path = resolve_model_path(args.model or BUNDLED_MINILM)
    settings = _settings(args, model_path, dump_cfg, train_cfg, pair_cfg)
    resume = _check_out(args.save_model, settings)
    show = not args.no_progress
    model = _load_base(args, model_path)
    if args.corpus:
        triples, sets, info = _corpus_data(args, model, pair_cfg, show)
    else:
        triples, sets, info = _triples_data(args)
    os.makedirs(args.save_model, exist_ok=True)
    with open(os.path.join(args.save_model, SETTINGS_FILE), "w", encoding="utf-8") as fh:
        json.dump(settings, fh, indent=2, sort_keys=True)
    report: dict[str, Any] = {**settings, **info, "resumed": resume}
    report["eval_base"] = _evaluate(model, sets, "base model", args, train_cfg.scale)
    if dump_cfg is not None:
        add_dump_prefix(model, dump_cfg)
        if args.max_length is None:
            report["max_seq_length"] = _keep_text_window(model, dump_cfg.num_tokens)
        report["eval_before"] = _evaluate(model, sets, "prefixed, untrained", args, train_cfg.scale)
    start = time.perf_counter()
    checkpoints = os.path.join(args.save_model, CHECKPOINT_DIR)
    common = dict(show_progress_bar=show, checkpoint_dir=checkpoints, checkpoint_steps=args.checkpoint_steps)
    if dump_cfg is None:
        result = train_contrastive(model, triples, train_cfg, mode="full", **common)
    else:
        result = train_dump(model, triples, train_cfg, **common)
    report["train"] = {**result.to_dict(), "wall_seconds": round(time.perf_counter() - start, 2)}
    report["eval_after"] = _evaluate(model, sets, "trained", args, train_cfg.scale)
    _save(model, args.save_model, dump_cfg, train_cfg, report)
    print(json.dumps(report, indent=2))
    return 0


def _save(model: Any, out: str, dump_cfg: Any, train_cfg: Any, report: dict) -> None:
    """Save the model (a DUMP folder, or a plain sentence-transformers folder), the report; drop checkpoints."""
    from llamaindex_posfair.dump.model import save_dump_model

    if dump_cfg is None:
        model.save(out)
    else:
        save_dump_model(model, out, extra={"training": train_cfg.to_dict(), "report": report})
    with open(os.path.join(out, REPORT_FILE), "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    shutil.rmtree(os.path.join(out, CHECKPOINT_DIR), ignore_errors=True)
