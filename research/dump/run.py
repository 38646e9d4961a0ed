"""Train every DUMP control on the same label-free pairs and score what ships (issue 16).

    nice -n 15 python -m research.dump.run --out research/results/dump --models runs/dump-experiment

1. One ``posfair train-dump --corpus C`` per arm (same pairs, steps, batch,
   seed; the arms differ only in what trains), each under ``nice``. An arm
   whose folder already holds ``train_report.json`` is reused, and an
   interrupted arm resumes from its checkpoint: rerun the same command.
2. The base model and every trained folder on the shipped needle benchmark's
   ``test`` split: single vector per passage, and the default pipeline's default
   layout (see :mod:`research.dump.experiment`). Per-model results
   are cached in ``MODELS/eval/`` so an interrupted evaluation resumes.
3. ``OUT/summary.md``, ``OUT/summary.csv`` and ``OUT/run.json`` (commands,
   wall and CPU times, settings).

Defaults are the CPU recipe of docs/dump.md (the shipped *As You Like It*
corpus, passages at the node size, 40 steps of 8 pairs).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHIPPED_CORPUS = Path(__file__).resolve().parents[2] / "llamaindex_posfair" / "data" / "dump" / "as_you_like_it"
DEFAULT_ARMS = "plain,full-k4,random_prefix-k4,dump_only-k4,soft_prompt-k4,full-k2"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default=str(SHIPPED_CORPUS), help="folder of .txt/.md (default: shipped play)")
    p.add_argument("--out", default="research/results/dump", help="where summary.md/csv and run.json go")
    p.add_argument("--models", default="runs/dump-experiment", help="where trained folders and eval caches go")
    p.add_argument("--arms", default=DEFAULT_ARMS, help=f"comma-separated arms (default {DEFAULT_ARMS})")
    p.add_argument(
        "--layout-arms", default=None, help="arms also scored in the default pipeline's layout (default: all)"
    )
    p.add_argument("--max-steps", type=int, default=40)
    p.add_argument("--train-batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nice", type=int, default=15, help="niceness of the training subprocesses (default 15)")
    p.add_argument("--train-args", default="", help="extra posfair train-dump flags, e.g. '--remove-prob 0.9'")
    p.add_argument("--skip-train", action="store_true", help="only evaluate folders that exist")
    return p.parse_args(argv)


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def train_arm(arm: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Run (or reuse) one arm's ``posfair train-dump``; returns its command, times and report."""
    folder = Path(args.models) / arm.name
    cmd = [
        "posfair",
        "train-dump",
        "--corpus",
        args.corpus,
        "--save-model",
        str(folder),
        *arm.cli_args(),
        "--max-steps",
        str(args.max_steps),
        "--train-batch-size",
        str(args.train_batch_size),
        "--seed",
        str(args.seed),
        "--no-progress",
        *args.train_args.split(),
    ]
    record: dict[str, Any] = {"arm": arm.name, "command": f"nice -n {args.nice} " + " ".join(cmd)}
    report = folder / "train_report.json"
    if not report.exists() and not args.skip_train:
        t0, c0 = time.perf_counter(), _cpu_children()
        full = [sys.executable, "-m", "llamaindex_posfair.cli", *cmd[1:]]  # inherits this process's niceness
        done = subprocess.run(full, stdout=subprocess.DEVNULL, check=False)
        record.update(wall_seconds=round(time.perf_counter() - t0, 1), cpu_seconds=round(_cpu_children() - c0, 1))
        if done.returncode != 0:
            raise SystemExit(f"{arm.name}: train-dump exited {done.returncode}; rerun to resume")
    else:
        record["reused"] = True
    if report.exists():
        record["report"] = json.loads(report.read_text(encoding="utf-8"))
    return record


def evaluate_model(label: str, folder: str, bench: Any, layout: bool, cache: Path) -> dict[str, Any]:
    """Single-vector and layout results of one model (cached as JSON)."""
    from llamaindex_posfair.encoders.spec import EncoderSpec
    from research.dump.experiment import layout_system, nodes_per_passage, score_needle
    from research.eval.harness.systems import DenseSystem

    path = cache / f"{label}.json"
    if path.exists():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if layout <= ("layout" in saved):
            return saved
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    single = EncoderSpec(model=folder, calibration=None, max_length=512, device="cpu").load()
    (res,) = score_needle(bench, [DenseSystem(label, single, None)])
    out["single"] = {"per_query": res.per_query, "seconds": round(time.perf_counter() - t0, 1)}
    if layout:
        t0 = time.perf_counter()
        encoder = EncoderSpec(model=folder, calibration=None, device="cpu").load()  # as posfair ingest stores it
        system = layout_system(label, encoder)
        (res,) = score_needle(bench, [system])
        out["layout"] = {
            "per_query": res.per_query,
            "seconds": round(time.perf_counter() - t0, 1),
            "nodes/passage": nodes_per_passage(system),
        }
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out), encoding="utf-8")
    return out


def _summary(per_query: dict[str, float], bench: Any) -> Any:
    from types import SimpleNamespace

    from llamaindex_posfair.eval.metrics import summarize

    return SimpleNamespace(per_query=per_query, ndcg=summarize(per_query, bench.groups, bench.group_order))


def tables(evals: dict[str, dict], bench: Any) -> dict[str, list[dict]]:
    """Single-vector and layout rows with bootstrap intervals vs base and vs plain."""
    from research.dump.experiment import comparison_row

    out: dict[str, list[dict]] = {}
    for setting in ("single", "layout"):
        results = {k: _summary(v[setting]["per_query"], bench) for k, v in evals.items() if setting in v}
        base, plain = results.get("base"), results.get("plain")
        out[setting] = [comparison_row(k, r, base, plain, bench.groups, bench.group_order) for k, r in results.items()]
    return out


def in_domain_rows(trained: list[dict]) -> list[dict]:
    """nDCG@10 / MRR@10 on the held-apart documents, base model first (from the train reports)."""
    rows = []
    for i, rec in enumerate(trained):
        report = rec.get("report")
        if not report:
            continue
        pairs = [("base", report["eval_base"])] if i == 0 else []
        for label, evals in [*pairs, (rec["arm"], report["eval_after"])]:
            row: dict[str, Any] = {"model": label}
            for name, m in evals.items():
                short = name.replace("dev, sentence ", "")
                row[f"{short}: nDCG@10"] = round(100 * m["ndcg@10"], 1)
                row[f"{short}: MRR@10"] = round(100 * m["mrr@10"], 1)
                row[f"{short}: n"] = int(m["n_queries"])
            rows.append(row)
    return rows


def training_rows(trained: list[dict]) -> list[dict]:
    rows = []
    for rec in trained:
        train = (rec.get("report") or {}).get("train", {})
        losses = train.get("train_losses") or [float("nan")]
        rows.append(
            {
                "arm": rec["arm"],
                "steps": train.get("steps"),
                "loss first→last": f"{losses[0]:.3f} → {losses[-1]:.3f}",
                "train wall s": train.get("wall_seconds"),
                "command wall s": rec.get("wall_seconds", "reused"),
                "command CPU s": rec.get("cpu_seconds", "reused"),
            }
        )
    return rows


def write_outputs(out: Path, parts: dict[str, list[dict]], caption: str, run: dict) -> None:
    from research.dump.experiment import markdown_table

    out.mkdir(parents=True, exist_ok=True)
    titles = {
        "single": "Needle `test`, single vector per passage (plain encoder, max_length 512)",
        "layout": "Needle `test`, the default pipeline's default layout (254-tok nodes + ≤32-tok sub-chunks, uncalibrated, "
        "exact MaxSim through the embedded Qdrant Edge store)",
        "in_domain": "In-domain check: held-apart documents of the training corpus",
        "training": "Training runs",
    }
    md = [caption, ""]
    for key, rows in parts.items():
        md += [f"## {titles[key]}", "", markdown_table(rows), ""]
    (out / "summary.md").write_text("\n".join(md), encoding="utf-8")
    with open(out / "summary.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        for key, rows in parts.items():
            if rows:
                writer.writerow(["table", *rows[0]])
                writer.writerows([key, *r.values()] for r in rows)
    (out / "run.json").write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_all(args: argparse.Namespace, trained: list[dict], evals: dict, bench: Any, started: float, argv) -> None:
    """Tables of everything finished so far (called after every arm, so a stopped run still reports)."""
    parts = {**tables(evals, bench), "in_domain": in_domain_rows(trained), "training": training_rows(trained)}
    first = next((r["report"] for r in trained if r.get("report")), {})
    caption = (
        f"`{bench.name}` ({len(bench.queries)} queries, groups {bench.group_counts()}); base all-MiniLM-L6-v2. "
        f"Training: `{Path(args.corpus).name}` ({len(first.get('train_documents', []))} train / "
        f"{len(first.get('dev_documents', []))} dev documents, {first.get('train_passages')} train passages of "
        f"{first.get('passage_tokens')} tokens), {args.max_steps} steps × {args.train_batch_size} pairs, seed "
        f"{args.seed}. nDCG@10 ×100; ΔH = harmonic-mean difference, paired bootstrap over queries within groups "
        f"(2000 resamples, 95% percentile interval)."
    )
    run = {
        "command": "python -m research.dump.run " + " ".join(argv if argv is not None else sys.argv[1:]),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds_children": round(_cpu_children(), 1),
        "cpu_seconds_self": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 1),
        "eval_seconds": {k: {s: v[s].get("seconds") for s in ("single", "layout") if s in v} for k, v in evals.items()},
        "load_average_end": os.getloadavg(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "layout_note": "default pipeline's layout as posfair ingest --model M stores it (qdrant_tools.ingest_documents into "
        "open_store(':memory:'), Qdrant Edge) and as posfair query searches it (qdrant_tools.search: exact MaxSim "
        "at this size)",
        "arms": [{k: v for k, v in r.items() if k != "report"} for r in trained],
        "pairs": first.get("pair_statistics"),
        "settings": {k: first.get(k) for k in ("training", "pairs", "passage_tokens", "dev_documents")},
    }
    write_outputs(Path(args.out), parts, caption, run)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.nice(max(0, args.nice - os.nice(0)))
    from llamaindex_posfair.encoders.models import bundled_model_path
    from research.dump.experiment import parse_arms
    from research.eval.benchmarks.loaders import load_shipped

    started, arms = time.perf_counter(), parse_arms(args.arms)
    layout_arms = {a.name for a in parse_arms(args.layout_arms)} if args.layout_arms else {a.name for a in arms}
    bench = load_shipped("needle-prose", "test")
    cache = Path(args.models) / "eval"
    trained: list[dict] = []
    evals: dict[str, dict] = {}
    for arm in arms:  # train, then score at once: a run stopped early still reports what it finished
        trained.append(train_arm(arm, args))
        if "base" not in evals:
            evals["base"] = evaluate_model("base", bundled_model_path(), bench, True, cache)
        folder = Path(args.models) / arm.name
        if (folder / "train_report.json").exists():
            evals[arm.name] = evaluate_model(arm.name, str(folder), bench, arm.name in layout_arms, cache)
        write_all(args, trained, evals, bench, started, argv)
    print((Path(args.out) / "summary.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
