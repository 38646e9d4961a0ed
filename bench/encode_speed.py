"""End-to-end encoding speed and memory on real prose of mixed lengths: calibrated vs off vs reference.

Texts: the shipped needle-prose passages (dev + test, public-domain prose) and
the ``examples/data`` files, each cut to a random length of 60-480 words (seeded),
so a batch of 32 mixes short and long texts and is padded. Encoder: the bundled
all-MiniLM-L6-v2 (mean pooling, every row calibrated), ``max_length`` 512.

Configurations, all through :meth:`PosFairEncoder.encode_documents` (tokenisation,
length sorting, basket assignment and pooling included):

* ``off``        -- calibration off (``calibration=None``: stock SDPA);
* ``calibrated`` -- the shipped default ``CalibrationConfig()`` (B=128, lambda=0.5,
  last half), fast backend;
* ``reference``  -- the same config through the nnsight reference backend
  (``--reference``; slow, so it runs on ``--reference-docs`` texts only and its
  ratio is per document).

Timing: one warm-up pass each, then ``--repeats`` rounds. A round encodes
every text once per configuration, ``--chunk`` texts per ``encode_documents``
call, the configurations taking turns on each slice (rotating order), so load
from other processes hits them alike; the reference encodes only the first
``--reference-docs / --docs`` of each slice. Ratios are taken per round
(configuration / off of the same round), both for wall time and for process
CPU time, and the median is reported beside the median docs/s. The load
average is printed before and after (``os.getloadavg``): on a shared machine,
rerun when it exceeds the number of torch threads.

Memory: peak live bytes of tensors created during one batch (a
``TorchDispatchMode`` counter, see ``bench/calibration_speed.py``; weights
excluded) and the largest single tensor.

Profiling: ``--profile calibrated`` runs one extra pass of that configuration
under ``torch.profiler`` and prints the top operators by self CPU time.

Usage::

    HF_HUB_OFFLINE=1 python bench/encode_speed.py                    # 256 docs, batch 32, 5 rounds
    HF_HUB_OFFLINE=1 python bench/encode_speed.py --reference --repeats 3
    HF_HUB_OFFLINE=1 python bench/encode_speed.py --profile calibrated --repeats 0

Targets (issue 12): calibrated >= 0.95x off (docs/s); peak tensor memory <= 1.25x off.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from calibration_speed import TensorBytes

from llamaindex_posfair import CalibrationConfig, PosFairEncoder
from llamaindex_posfair.encoders.encoder import bundled_model_path

ROOT = Path(__file__).resolve().parents[1]
NEEDLE = ROOT / "llamaindex_posfair" / "data" / "benchmarks" / "needle_prose"


def source_texts() -> list[str]:
    """The shipped prose: needle-prose passages (dev + test) and the ``examples/data`` files."""
    texts = []
    for split in ("dev", "test"):
        with gzip.open(NEEDLE / split / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
            texts += [json.loads(line)["text"] for line in fh]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples" / "data").iterdir())]
    return texts


def mixed_texts(count: int, low: int = 60, high: int = 480, seed: int = 0) -> list[str]:
    """``count`` texts cut from the shipped prose to a random length of ``low``-``high`` words."""
    rng = random.Random(seed)
    sources = source_texts()
    rng.shuffle(sources)
    out = []
    for i in range(count):
        words = sources[i % len(sources)].split()
        n = min(len(words), rng.randint(low, high))
        start = rng.randint(0, len(words) - n)
        out.append(" ".join(words[start : start + n]))
    return out


def time_rounds(runs: dict, texts: list[str], repeats: int, chunk: int) -> dict[str, list[tuple[float, float]]]:
    """``(wall, cpu)`` seconds per round for each configuration.

    A round encodes every text once per configuration, ``chunk`` texts per
    :meth:`encode_documents` call, the configurations taking turns on each
    slice (rotating order), so load changes hit them alike.
    """
    names = list(runs)
    totals: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for r in range(repeats):
        spent = {name: [0.0, 0.0] for name in names}
        for i, start in enumerate(range(0, len(texts), chunk)):
            shift = (r + i) % len(names)
            for name in names[shift:] + names[:shift]:
                encode, subset = runs[name]
                part = texts[start : start + chunk][: max(1, subset * chunk // len(texts))]
                wall, cpu = time.perf_counter(), time.process_time()
                encode(part)
                spent[name][0] += time.perf_counter() - wall
                spent[name][1] += time.process_time() - cpu
        for name in names:
            totals[name].append(tuple(spent[name]))
    return totals


def peak_memory(encode, texts: list[str]) -> TensorBytes:
    counter = TensorBytes(length=-1)
    with counter:
        encode(texts)
    return counter


def profile(encode, texts: list[str], top: int) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        encode(texts)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=256, help="texts per timed pass")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds")
    parser.add_argument("--chunk", type=int, default=64, help="texts per encode_documents call (turn length)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--reference", action="store_true", help="also time the nnsight reference backend")
    parser.add_argument("--reference-docs", type=int, default=32, help="texts per reference pass")
    parser.add_argument("--profile", choices=["off", "calibrated"], default=None)
    parser.add_argument("--top", type=int, default=25, help="profiler rows")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    path = bundled_model_path()
    common = dict(max_length=512, batch_size=args.batch_size)
    fast = PosFairEncoder(path, calibration=CalibrationConfig(), **common)
    texts = mixed_texts(args.docs)
    runs = {
        "off": (lambda t: fast.encode_documents(t, calibration=None), len(texts)),
        "calibrated": (fast.encode_documents, len(texts)),
    }
    if args.reference:
        ref = PosFairEncoder(path, calibration=CalibrationConfig(), backend="reference", **common)
        runs["reference"] = (ref.encode_documents, min(args.reference_docs, len(texts)))
    tokens = fast.count_tokens(texts)
    print(
        f"# all-MiniLM-L6-v2, {len(texts)} texts of {min(tokens)}-{max(tokens)} tokens (mean "
        f"{statistics.mean(tokens):.0f}), batch {args.batch_size}, torch threads {torch.get_num_threads()}, "
        f"{args.repeats} rounds, load average before {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    for encode, subset in runs.values():  # warm-up
        encode(texts[: min(subset, args.batch_size)])
    if args.profile:
        profile(runs[args.profile][0], texts, args.top)
    if args.repeats:
        report(runs, texts, args)
    return 0


def report(runs: dict, texts: list[str], args) -> None:
    times = time_rounds(runs, texts, args.repeats, args.chunk)
    load_after = os.getloadavg()[0]
    docs = {name: _docs_per_round(subset, texts, args.chunk) for name, (_, subset) in runs.items()}
    print(f"{'config':>11} {'docs/s':>8} {'x off':>7} {'cpu x off':>9} {'peak MiB':>9} {'x off':>7} {'max MiB':>8}")
    mem = {name: peak_memory(encode, texts[: args.batch_size]) for name, (encode, _) in runs.items()}
    for name in runs:
        rate = docs[name] / statistics.median(w for w, _ in times[name])
        ratios = [
            [(docs[name] / t[i]) / (docs["off"] / t_off[i]) for t, t_off in zip(times[name], times["off"])]
            for i in (0, 1)
        ]
        peak = mem[name].peak / mem["off"].peak
        print(
            f"{name:>11} {rate:8.2f} {statistics.median(ratios[0]):7.3f} {statistics.median(ratios[1]):9.3f} "
            f"{mem[name].peak / 2**20:9.1f} {peak:7.2f} {mem[name].largest / 2**20:8.1f}",
            flush=True,
        )
    per_round = " ".join(f"{t_off[0] / t[0]:.3f}" for t, t_off in zip(times["calibrated"], times["off"]))
    print(f"# load average after {load_after:.2f}; per-round calibrated/off docs/s ratios (wall): {per_round}")


def _docs_per_round(subset: int, texts: list[str], chunk: int) -> int:
    return sum(len(texts[s : s + chunk][: max(1, subset * chunk // len(texts))]) for s in range(0, len(texts), chunk))


if __name__ == "__main__":
    sys.exit(main())
