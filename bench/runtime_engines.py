"""The bundled model's transformer forward on each engine, the same batches, taking turns.

What ``bench/ingest_vs_peer.py`` cannot separate: how fast each inference engine computes the same
transformer on this CPU, tokenising and pooling left out. 128 texts of 90 words (the natural benchmark's
passages, cut), batches of 32 padded to their longest text, encoded by

* torch in float32 and in bfloat16 (eager PyTorch, the default runtime);
* ONNX Runtime on the cached export (``EncoderSpec(runtime="onnx")``), with its threads spinning or not;
* OpenVINO on the same export with its inference precision held at ``f32`` (the ``openvino`` runtime) and
  at ``bf16`` (not a runtime posfair offers: for comparison only).

Every engine gets ``torch.get_num_threads()`` threads. Printed: each engine's best and median seconds
for the 128 texts over ``--repeats`` turns, and the largest difference of its token vectors to torch
float32's; the load average before and after. Engines whose package is missing are skipped.

Usage::

    python bench/runtime_engines.py --repeats 3
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest_vs_peer import passages


def batches(n_texts: int = 128, words: int = 90, size: int = 32) -> list[str]:
    """``n_texts`` texts of ``words`` words from the natural benchmark's passages."""
    _, texts = passages(60)
    pool = " ".join(texts).split()
    return [" ".join(pool[i * words : (i + 1) * words]) for i in range(n_texts)]


def engines(encoder: Any, threads: int) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """Engine name -> a function from a tokenised batch (numpy int64) to its token vectors (float32 numpy)."""
    import numpy as np
    import torch

    from llamaindex_posfair.encoders import runtime

    model = encoder.sentence_transformer[0].auto_model
    bf16 = copy.deepcopy(model).to(torch.bfloat16).eval()

    def torch_run(m: Any) -> Callable[[dict[str, Any]], Any]:
        def run(feeds: dict[str, Any]) -> Any:
            with torch.inference_mode():
                out = m(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state
            return out.float().numpy()

        return run

    out = {"torch float32": torch_run(model), "torch bfloat16": torch_run(bf16)}
    path = runtime.onnx_cache_folder(runtime.export_settings(encoder.sentence_transformer, encoder.spec.weights))
    path = path / "model.onnx"
    if importlib.util.find_spec("onnxruntime"):
        import onnxruntime as ort

        for spin in ("1", "0"):
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            options.add_session_config_entry("session.intra_op.allow_spinning", spin)
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            out[f"onnxruntime float32 (spinning {'on' if spin == '1' else 'off'})"] = lambda feeds, s=session: (
                np.asarray(s.run(["token_embeddings"], feeds)[0])
            )
    if importlib.util.find_spec("openvino"):
        import openvino as ov

        for hint in ("f32", "bf16"):
            compiled = ov.Core().compile_model(
                str(path), "CPU", {"INFERENCE_PRECISION_HINT": hint, "INFERENCE_NUM_THREADS": threads}
            )
            out[f"openvino {hint}"] = lambda feeds, c=compiled: np.asarray(
                c.create_infer_request().infer(feeds)[c.output(0)], dtype=np.float32
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="turns per engine (default 3)")
    args = ap.parse_args(argv)
    import numpy as np
    import torch

    from llamaindex_posfair.integrations.recipe import Recipe
    from research.default_pipeline.system import cpu_load

    spec = Recipe.default().encoder_spec().model_copy(update={"dtype": "float32", "runtime": "onnx"})
    encoder = spec.load()  # exports once into the cache if needed
    tokenizer = encoder.sentence_transformer.tokenizer
    texts = batches()
    feeds = [
        {k: v.astype(np.int64) for k, v in tokenizer(texts[i : i + 32], padding=True, return_tensors="np").items()}
        for i in range(0, len(texts), 32)
    ]
    runs = engines(encoder, torch.get_num_threads())
    reference = [runs["torch float32"](f) for f in feeds]
    diff = {name: max(float(np.abs(run(f) - r).max()) for f, r in zip(feeds, reference)) for name, run in runs.items()}
    print(f"{len(texts)} texts of 90 words, batches of 32; {torch.get_num_threads()} threads; load {cpu_load()}")
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            t0 = time.perf_counter()
            for f in feeds:
                run(f)
            seconds[name].append(time.perf_counter() - t0)
    print(f"load after {cpu_load()}\n")
    print("| engine | best s | median s | max token-vector difference to torch float32 |")
    print("|---|---|---|---|")
    for name, secs in seconds.items():
        print(f"| {name} | {min(secs):.2f} | {statistics.median(secs):.2f} | {diff[name]:.2g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
