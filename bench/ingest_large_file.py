"""``posfair ingest`` of one large text file: peak memory and time to the first written points.

A text file of ``--mb`` megabytes is generated (paragraphs of sentences drawn from ``examples/data``,
shuffled with a fixed seed), then ingested by the real command, ``posfair ingest FILE --collection big``
into a fresh embedded store with the bundled model and the default layout, in this process. Encoding
the whole file through the model takes hours on a CPU, so the run is stopped after ``--windows``
upserts or at the first upsert after ``--budget-s`` seconds, whichever comes first (the command reports
the stop as an interruption and keeps what it wrote, as after a crash); a run with no upsert by twice
``--budget-s`` is ended there, and its row says so (no first write).

Printed: the file size; the windows and points written; the seconds from the command's start to the
first upsert returning, with the CPU seconds the process had used by then (every thread counted; a
shared machine stretches the seconds, not the CPU seconds), and the part of them spent loading the
model, in the one pass over the whole file that counts its chunks (``ChunkEncoder.bounds``; ``-``
where the code has no such pass) and embedding (``ChunkEncoder.encode``); the seconds to the stop;
the peak resident memory by the kernel's ``ru_maxrss`` and the peaks of resident and anonymous memory
sampled every 0.5 s by a child process (``bench/scale.py``'s ``MemoryPeaks``); the load average
before and after. On a shared machine, compare runs only at a similar load average.

Usage::

    nice -n 10 python bench/ingest_large_file.py --mb 5 --windows 2
    nice -n 10 python bench/ingest_large_file.py --mb 50 --windows 3 --budget-s 900   # docs/cli.md, "Large files"
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import MemoryPeaks

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"


class Stop(Exception):
    """Raised by the patched writer to end the run after its last measured window."""


def make_file(path: Path, mb: float, seed: int = 0) -> int:
    """Write ``mb`` megabytes of paragraphs of ``examples/data``'s sentences, shuffled; return the size in bytes."""
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted(EXAMPLES.iterdir()) if p.is_file())
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) > 3]
    rng = random.Random(seed)
    target, size = int(mb * 1e6), 0
    with open(path, "w", encoding="utf-8") as f:
        while size < target:
            paragraph = " ".join(rng.choice(sentences) for _ in range(rng.randint(3, 9))) + "\n\n"
            f.write(paragraph)
            size += len(paragraph.encode("utf-8"))
    return size


def timed(owner: object, name: str, seen: dict, key: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its seconds to ``seen[key]``."""
    inner = getattr(owner, name)
    seen[key] = 0.0

    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            seen[key] += time.perf_counter() - t

    setattr(owner, name, wrapper)


def print_table(size: int, seen: dict, elapsed: float, peaks: MemoryPeaks) -> None:
    """The result row: file size, writes, time to the first write, peaks, load average."""
    rss, anon, _ = peaks.gb()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    first = "none" if seen["first"] is None else f"{seen['first']:.1f} ({seen['first cpu']:.0f} CPU)"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print()
    bounds = f"{seen['bounds s']:.1f}" if "bounds s" in seen else "-"
    print("| file MB | windows written | points written | first write s | of which model load s | of which bounds s "
          "| of which encoding s | stopped at s | ru_maxrss GB | sampled VmRSS GB | sampled RssAnon GB | load average after (1, 5, 15 min) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {size / 1e6:.1f} | {seen['windows']} | {seen['points']} | {first} | {seen['model s']:.1f} | {bounds} "
          f"| {seen['encode s']:.1f} | {elapsed:.1f} | {maxrss:.2f} | {rss:.2f} | {anon:.2f} | {load} |", flush=True)  # fmt: skip


def run(args: argparse.Namespace) -> None:
    from llamaindex_posfair.cli import main, options
    from qdrant_tools.encoding import ChunkEncoder
    from qdrant_tools.writer import QdrantWriter

    work = Path(tempfile.mkdtemp(prefix="posfair-large-"))
    try:
        data = work / "big.txt"
        size = make_file(data, args.mb)
        print(f"load average before: {os.getloadavg()}", flush=True)
        upsert = QdrantWriter.upsert
        seen = {"windows": 0, "points": 0, "first": None}
        t0, c0 = time.perf_counter(), time.process_time()

        def counted(self: QdrantWriter, batch):  # type: ignore[no-untyped-def]
            n = upsert(self, batch)
            seen["windows"] += 1
            seen["points"] += n
            if seen["first"] is None:
                seen["first"] = time.perf_counter() - t0
                seen["first cpu"] = time.process_time() - c0
            if seen["windows"] >= args.windows or time.perf_counter() - t0 > args.budget_s:
                raise Stop(f"measured {seen['windows']} windows")
            return n

        QdrantWriter.upsert = counted  # type: ignore[method-assign]
        timed(options, "load_spec", seen, "model s")
        timed(ChunkEncoder, "encode", seen, "encode s")
        if hasattr(ChunkEncoder, "bounds"):  # the one pass over the whole file before its first window
            timed(ChunkEncoder, "bounds", seen, "bounds s")
        with MemoryPeaks() as peaks:

            def out_of_time() -> None:  # no upsert within twice the budget: report what there is and leave
                print(f"no stop after {2 * args.budget_s:.0f} s: the run is ended here")
                print_table(size, seen, time.perf_counter() - t0, peaks)
                os._exit(0)

            watchdog = threading.Timer(2 * args.budget_s, out_of_time)
            watchdog.daemon = True
            watchdog.start()
            t0, c0 = time.perf_counter(), time.process_time()
            main(["ingest", str(data), "--collection", "big", "--path", str(work / "store"), "--no-progress"])
            watchdog.cancel()
            time.sleep(1.0)
            print_table(size, seen, time.perf_counter() - t0 - 1.0, peaks)
        QdrantWriter.upsert = upsert  # type: ignore[method-assign]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, default=5.0, help="size of the generated text file, MB (default 5)")
    p.add_argument("--windows", type=int, default=2, help="stop after this many upserts (default 2)")
    p.add_argument("--budget-s", type=float, default=600.0, help="stop at the first upsert after this (default 600)")
    run(p.parse_args())


if __name__ == "__main__":
    main()
