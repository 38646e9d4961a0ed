"""Throughput and latency of ``posfair serve``: dynamic batching vs a max batch size of 1.

Starts a local Ray, deploys the application once per setting (same model, same
replicas), warms it up, then sends ``--requests`` requests to ``/v1/embeddings``
from ``--concurrency`` client threads over loopback (one ``httpx.Client`` each)
and reports requests/s, texts/s, p50/p99 latency and the mean batch size read
from the ``X-Posfair-Batch-Size`` header, as a markdown table.

Texts are the shipped needle benchmark's dev queries (``--input-type query``) or
its passages cut to ``--max-chars`` (``--input-type document``).

``--stall`` measures fairness instead: one maximal request (``--big-texts`` texts of
``--big-chars`` characters; the default limits allow 512 x 1,953) runs while a one-word
embed is sent every ``--probe-every-s`` seconds; it reports the one-word requests' p50/p99
latency, the big request's time and the embed replica's memory (RSS) before, at its peak and
after, once with long requests cut into parts (``--call-chars``) and once without
(one call per request, as before the split existed).

Usage:
    python bench/serve_speed.py --requests 400 --concurrency 16
    python bench/serve_speed.py --stall --big-texts 512 --big-chars 1953
    python bench/serve_speed.py --input-type document --texts-per-request 4 --device cuda --num-gpus 0.5 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import gzip
import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "llamaindex_posfair" / "data" / "benchmarks" / "needle_prose" / "dev"


def load_texts(kind: str, max_chars: int) -> list[str]:
    name = "queries.jsonl.gz" if kind == "query" else "corpus.jsonl.gz"
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"][:max_chars] for line in f]


def run_load(url: str, bodies: list[dict], concurrency: int) -> dict[str, float]:
    """Send every body once from ``concurrency`` threads; latency stats, throughput and mean batch size."""
    import httpx

    clients = [httpx.Client(timeout=120) for _ in range(concurrency)]

    def one(i: int) -> tuple[float, int]:
        t0 = time.perf_counter()
        r = clients[i % concurrency].post(url + "/v1/embeddings", json=bodies[i])
        r.raise_for_status()
        return time.perf_counter() - t0, int(r.headers["x-posfair-batch-size"])

    try:
        t0 = time.perf_counter()
        with futures.ThreadPoolExecutor(concurrency) as pool:
            out = list(pool.map(one, range(len(bodies))))
        wall = time.perf_counter() - t0
    finally:
        for c in clients:
            c.close()
    lat = np.array([x for x, _ in out]) * 1000
    texts = sum(len(b["input"]) for b in bodies)
    return {
        "req_s": len(bodies) / wall,
        "texts_s": texts / wall,
        "p50": float(np.percentile(lat, 50)),
        "p99": float(np.percentile(lat, 99)),
        "batch": float(np.mean([b for _, b in out])),
    }


def bench_setting(config, args, bodies: list[dict], port: int) -> dict[str, float]:
    from ray import serve

    from llamaindex_posfair.serve import runner

    t0 = time.perf_counter()
    runner.deploy(config, "127.0.0.1", port)
    start = time.perf_counter() - t0
    url = f"http://127.0.0.1:{port}"
    run_load(url, bodies[: args.warmup], args.concurrency)
    stats = run_load(url, bodies[args.warmup :], args.concurrency)
    serve.delete(config.app_name)
    return {**stats, "start_s": start}


def _replica_rss_mb(app_name: str) -> float:
    """Resident memory of this machine's embed replica processes (MB)."""
    import psutil

    total = 0
    for proc in psutil.process_iter(["cmdline", "memory_info"]):
        cmd = proc.info["cmdline"] or []
        if cmd and cmd[0].startswith(f"ray::ServeReplica:{app_name}:embed"):
            total += proc.info["memory_info"].rss
    return total / 2**20


def bench_stall(config, args, port: int) -> dict[str, float]:
    """One-word latency while one maximal request runs (see the module docstring)."""
    import threading

    import httpx
    from ray import serve

    from llamaindex_posfair.serve import runner

    runner.deploy(config, "127.0.0.1", port)
    url = f"http://127.0.0.1:{port}/v1/embeddings"
    word = {"input": ["hello"], "input_type": "query"}
    big = {"input": [("the river carried silt past old mills " * 200)[: args.big_chars] for _ in range(args.big_texts)]}
    with httpx.Client(timeout=600) as client:
        for _ in range(3):
            client.post(url, json=word).raise_for_status()
        rss = {"before": _replica_rss_mb(config.app_name), "peak": 0.0}
        done = threading.Event()
        took = {}

        def send_big() -> None:
            t0 = time.perf_counter()
            with httpx.Client(timeout=600) as c:
                c.post(url, json=big).raise_for_status()
            took["big"] = time.perf_counter() - t0
            done.set()

        threading.Thread(target=send_big, daemon=True).start()
        lat = []
        while not done.is_set():
            t0 = time.perf_counter()
            client.post(url, json=word).raise_for_status()
            lat.append(time.perf_counter() - t0)
            rss["peak"] = max(rss["peak"], _replica_rss_mb(config.app_name))
            time.sleep(args.probe_every_s)
        time.sleep(1.0)
        rss["after"] = _replica_rss_mb(config.app_name)
    serve.delete(config.app_name)
    ms = np.array(lat) * 1000
    return {"n": len(lat), "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "max": float(ms.max()), "big_s": took["big"], **rss}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="bundled:all-MiniLM-L6-v2")
    ap.add_argument("--requests", type=int, default=400, help="timed requests per setting")
    ap.add_argument("--warmup", type=int, default=32, help="untimed requests per setting")
    ap.add_argument("--concurrency", type=int, default=16, help="client threads")
    ap.add_argument("--texts-per-request", type=int, default=1)
    ap.add_argument("--input-type", choices=["query", "document"], default="query")
    ap.add_argument("--max-chars", type=int, default=1000, help="characters per passage (documents)")
    ap.add_argument("--max-batch-size", type=int, default=32, help="the batching setting (vs 1)")
    ap.add_argument("--batch-wait-timeout-s", type=float, default=0.005)
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--num-cpus", type=float, default=1, help="CPUs (torch threads) per replica (embed and rerank)")
    ap.add_argument("--num-gpus", type=float, default=0.0)
    ap.add_argument("--local-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--stall", action="store_true", help="one-word latency while one maximal request runs")
    ap.add_argument("--big-texts", type=int, default=512, help="--stall: texts of the big request")
    ap.add_argument("--big-chars", type=int, default=1953, help="--stall: characters per text of the big request")
    ap.add_argument("--probe-every-s", type=float, default=0.05, help="--stall: pause between one-word requests")
    ap.add_argument("--call-chars", type=int, default=16384, help="--stall: characters per model call")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from llamaindex_posfair.calibration.config import CalibrationConfig
    from llamaindex_posfair.encoders.spec import EncoderSpec
    from llamaindex_posfair.serve import config as C
    from llamaindex_posfair.serve import runner

    texts = load_texts(args.input_type, args.max_chars)
    n = args.warmup + args.requests
    k = args.texts_per_request
    bodies = [
        {"input": [texts[(i * k + j) % len(texts)] for j in range(k)], "input_type": args.input_type} for i in range(n)
    ]
    calibration = CalibrationConfig()  # the encoder measured in docs/serving.md
    spec = EncoderSpec(model=args.model, calibration=calibration, device=args.device, dtype=args.dtype).pinned()
    scaling = C.ScalingConfig(replicas=args.replicas, num_cpus=args.num_cpus, num_gpus=args.num_gpus)
    owns = runner.ensure_ray(None, args.local_cpus, log_to_driver=False)
    import ray

    problem = runner.missing_resources(C.ServeConfig(encoder=spec, scaling=scaling), ray.cluster_resources())
    if problem:
        runner.stop(owns)
        raise SystemExit(f"serve_speed: {problem}; lower --num-cpus / --replicas or raise --local-cpus")
    port = runner.free_port()
    if args.stall:
        stall_table(args, spec, scaling, port, owns)
        return
    rows = []
    try:
        for size in (args.max_batch_size, 1):
            batching = C.BatchingConfig(max_batch_size=size, batch_wait_timeout_s=args.batch_wait_timeout_s)
            config = C.ServeConfig(encoder=spec, batching=batching, scaling=scaling)
            print(f"serve_speed: max batch size {size} ...", file=sys.stderr, flush=True)
            rows.append((size, bench_setting(config, args, bodies, port)))
    finally:
        runner.stop(owns)
    print(
        f"\n{args.model}, {args.input_type} x {k} per request, {args.requests} requests, {args.concurrency} client "
        f"threads, {args.replicas} replica(s) x {args.num_cpus:g} CPU / {args.num_gpus:g} GPU, device "
        f"{args.device or 'auto'}, dtype {args.dtype or 'as saved'}\n"
    )
    print("| max batch size | requests/s | texts/s | p50 ms | p99 ms | mean batch |")
    print("|---|---|---|---|---|---|")
    for size, s in rows:
        print(
            f"| {size} | {s['req_s']:.1f} | {s['texts_s']:.1f} | {s['p50']:.1f} | {s['p99']:.1f} | {s['batch']:.1f} |"
        )


def stall_table(args, spec, scaling, port: int, owns: bool) -> None:
    from llamaindex_posfair.serve import config as C
    from llamaindex_posfair.serve import runner

    rows = []
    try:
        for label, call_chars in ((f"cut into parts ({args.call_chars} chars/call)", args.call_chars),
                                  ("one call per request", 10**12)):  # fmt: skip
            batching = C.BatchingConfig(batch_wait_timeout_s=args.batch_wait_timeout_s, call_chars=call_chars)
            config = C.ServeConfig(encoder=spec, batching=batching, scaling=scaling)
            print(f"serve_speed --stall: {label} ...", file=sys.stderr, flush=True)
            rows.append((label, bench_stall(config, args, port)))
    finally:
        runner.stop(owns)
    print(
        f"\n{args.model}: one-word /v1/embeddings while one request of {args.big_texts} x {args.big_chars} characters "
        f"runs; {args.replicas} replica(s) x {args.num_cpus:g} CPU; load average {os.getloadavg()[0]:.1f} at the end\n"
    )
    print(
        "| long requests | one-word requests | p50 ms | p99 ms | max ms | big request s | replica MB before / peak / after |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, s in rows:
        print(f"| {label} | {s['n']} | {s['p50']:.0f} | {s['p99']:.0f} | {s['max']:.0f} | {s['big_s']:.1f} | "
              f"{s['before']:.0f} / {s['peak']:.0f} / {s['after']:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
