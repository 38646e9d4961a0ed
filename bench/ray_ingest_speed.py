"""Chunks/s of single-process ingestion vs Ray ingestion with 1 and 2 CPU workers, in one run.

Uses the bundled all-MiniLM-L6-v2 (calibrated, the default strength) and a
synthetic corpus built from ``examples/data`` (each file repeated with a
numbered header, so every document is distinct). Each path writes into its
own embedded in-memory collection. Reported per path:

* ``total``: wall time of the whole ingestion call (Ray: includes actor start-up
  and the model load in every worker);
* ``extra``: single process: chunks per embedding second; Ray: seconds to the first upsert (the figure that scales with workers).

Usage:
    python bench/ray_ingest_speed.py --docs 40 --chunk-tokens 128
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]


def build_corpus(n_docs: int, dest: Path) -> Path:
    sources = sorted((ROOT / "examples" / "data").glob("*.*"))
    texts = [p.read_text(encoding="utf-8") for p in sources]
    for i in range(n_docs):
        body = "\n\n".join(texts[(i + k) % len(texts)] for k in range(3))
        (dest / f"doc{i:04d}.txt").write_text(f"Document {i}.\n\n{body}", encoding="utf-8")
    return dest


class Timer:
    def __init__(self) -> None:
        self.first: float | None = None
        self.after_first = 0

    def __call__(self, n: int) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        else:
            self.after_first += n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--chunk-tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64, help="chunks per upsert")
    ap.add_argument("--workers", default="1,2", help="Ray CPU worker counts to run")
    ap.add_argument("--single-threads", default="1,2", help="torch thread counts for the single-process runs")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import numpy as np
    import ray
    import torch

    from llamaindex_posfair import CalibrationConfig, EncoderSet, EncoderSpec, PosFairEncoder
    from llamaindex_posfair.encoders.models import BUNDLED_MINILM
    from qdrant_tools.ingest import IngestConfig, ingest_path
    from qdrant_tools.layout import NodeLayout
    from qdrant_tools.ray_ingest import RayIngestConfig, ray_ingest_path
    from qdrant_tools.store import open_store

    calibration = CalibrationConfig()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_corpus(args.docs, Path(tmp))
        client = open_store(":memory:")

        enc = PosFairEncoder(BUNDLED_MINILM, calibration, device="cpu")
        threads0 = torch.get_num_threads()
        for k, threads in enumerate(int(x) for x in args.single_threads.split(",")):
            torch.set_num_threads(threads)
            name = "single" if k == 0 else f"single{threads}"
            t0 = time.perf_counter()
            rep = ingest_path(
                client,
                name,
                corpus,
                {"calibrated": enc},
                IngestConfig(
                    batch_size=args.batch, show_progress=False, layout=NodeLayout(chunk_tokens=args.chunk_tokens)
                ),
            )
            total = time.perf_counter() - t0
            n = rep.chunks_written
            rows.append(("single process", f"{threads} torch thread(s)", n, total, n / total, n / rep.embed_seconds))
        torch.set_num_threads(threads0)
        del enc

        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        ray_start = time.perf_counter() - t0
        recipe = EncoderSet.single(EncoderSpec(model=BUNDLED_MINILM, calibration=calibration))
        for w in [int(x) for x in args.workers.split(",")]:
            timer = Timer()
            cfg = RayIngestConfig(
                num_workers=w,
                write_batch_size=args.batch,
                docs_per_task=4,
                token_budget=4096,
                show_progress=False,
                layout=NodeLayout(chunk_tokens=args.chunk_tokens),
            )
            t0 = time.perf_counter()
            rep = ray_ingest_path(client, f"ray{w}", corpus, recipe, cfg, on_write=timer)
            end = time.perf_counter()
            total = end - t0
            # Ray Data encodes ahead of the writer, so chunks/s after the first upsert measures draining a
            # buffer, not encoding: report time-to-first-upsert (start-up + first batch) instead.
            steady = (timer.first - t0) if timer.first else float("nan")
            rows.append(
                (
                    f"Ray, {w} CPU worker{'s' if w > 1 else ''}",
                    "1 CPU / 1 thread each",
                    rep.chunks_written,
                    total,
                    rep.chunks_written / total,
                    steady,
                )
            )
        ids = {
            c: sorted(str(p.id) for p in client.scroll(c, limit=100000)[0])
            for c in ["single"] + [f"ray{w}" for w in [int(x) for x in args.workers.split(",")]]
        }
        same = all(v == ids["single"] for v in ids.values())
        ray.shutdown()

    print(
        f"\ncorpus: {args.docs} docs, {rows[0][2]} chunks of <= {args.chunk_tokens} tokens; "
        f"all-MiniLM-L6-v2 calibrated; CPUs visible: {os.cpu_count()}; ray.init {ray_start:.1f}s (not counted)"
    )
    print(f"{'path':24} {'threads':24} {'chunks':>7} {'total s':>8} {'chunks/s':>9} {'extra':>9}")
    for name, threads, n, total, rate, steady in rows:
        print(f"{name:24} {threads:24} {n:7d} {total:8.1f} {rate:9.1f} {steady:9.1f}")
    print(
        "extra: single process = chunks per embedding second; Ray = seconds to the first upsert "
        "(actor start-up + model load + first batch)"
    )
    print(f"identical point ids in every collection: {same}")
    np.random.seed(0)


if __name__ == "__main__":
    main()
