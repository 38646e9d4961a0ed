"""Cost of one calibrated rerank vs one vanilla forward pass (CPU; target <= 1.15x).

Calibrated = the adapter's forward with the row-capturing attention (SDPA
for every layer + one recomputed answer row per layer) + span sums + the
calibrator math. Vanilla = the same prompt through stock SDPA, logits only.
Both read only the last 1–2 logit rows. Median over --repeats runs after a
warm-up. The model is the tiny random Qwen2-VL unless --model names a real
Qwen2-VL/2.5-VL folder; on a tiny model fixed Python overheads dominate, so
ratios on a real model are the ones to quote. (GPU part: not run here.)

Run:  python bench/mm_rerank_cost.py [--n 4 8 12] [--repeats 20] [--model PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _paired_times(fa, fb, repeats: int) -> tuple[float, float, float, float]:
    """Interleave a/b so load changes hit both; medians of wall, CPU-time ratio and wall ratio."""
    fa(), fb()  # warm-up
    wa, wb, ratios_cpu, ratios_wall = [], [], [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fa()
        ta, ca = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        fb()
        tb, cb = time.perf_counter() - t, time.process_time() - c
        wa.append(ta), wb.append(tb), ratios_wall.append(tb / ta), ratios_cpu.append(cb / max(ca, 1e-9))
    return statistics.median(wa), statistics.median(wb), statistics.median(ratios_wall), statistics.median(ratios_cpu)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="calibrated rerank vs vanilla forward cost")
    ap.add_argument("--n", type=int, nargs="+", default=[4, 8, 12])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--image-size", type=int, default=56)
    args = ap.parse_args(argv)

    import tempfile
    from pathlib import Path

    import torch
    from PIL import Image

    from llamaindex_posfair.multimodal.calibrator import AttentionGuidedCalibrator
    from llamaindex_posfair.multimodal.tiny import build_tiny_adapter, write_synthetic_image_folder
    from llamaindex_posfair.multimodal.types import Candidates

    torch.set_num_threads(max(1, torch.get_num_threads()))
    if args.model == "tiny":
        adapter = build_tiny_adapter("qwen2_vl")
    else:
        from llamaindex_posfair.multimodal.qwen_adapter import QwenVLAdapter

        adapter = QwenVLAdapter.from_pretrained(args.model)
    folder = write_synthetic_image_folder(Path(tempfile.mkdtemp()), count=max(args.n) + 1, size=args.image_size)
    imgs = [Image.open(p).convert("RGB") for p in sorted(folder.glob("*.png"))]
    print(f"model: {adapter.model_id}  layers: {adapter.num_layers}  threads: {torch.get_num_threads()}")
    print(
        "| N | prompt tokens | vanilla forward (ms, wall) | calibrated rerank (ms, wall) | ratio (wall, paired median) | ratio (CPU time, paired median) |"
    )
    print("|---|---|---|---|---|---|")
    for n in args.n:
        cal = AttentionGuidedCalibrator()
        cal.fit(adapter, [Candidates("a red circle", tuple(imgs[:n]), answer=0)])
        cand = imgs[1 : n + 1]
        tokens = adapter.build_inputs("a red circle", cand).model_inputs["input_ids"].shape[1]
        t_van, t_cal, r_wall, r_cpu = _paired_times(
            lambda cand=cand: adapter.vanilla_logits("a red circle", cand),
            lambda cand=cand, cal=cal: cal.scores(adapter.score("a red circle", cand)).argmax(),
            args.repeats,
        )
        print(f"| {n} | {tokens} | {t_van * 1e3:.2f} | {t_cal * 1e3:.2f} | {r_wall:.3f} | {r_cpu:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
