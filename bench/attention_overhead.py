"""Where calibration's cost sits: attention time of the calibrated layers inside real forward passes.

End-to-end ratios (``bench/calibration_speed.py``) carry the noise of everything
else in the forward pass (the linear layers vary by a few percent from pass to
pass). This bench times only what calibration changes: the attention function
of every layer, inside forward passes of the bundled all-MiniLM-L6-v2 on
uniform-length synthetic documents (the texts of ``calibration_speed.py``),
tokenised once. Per configuration it prints the median forward time, the
median attention time summed over the calibrated layers, and that attention
time's excess over plain SDPA as a share of the plain forward pass: the
slowdown calibration would cause if nothing else varied.

Configurations: ``plain`` (stock SDPA), ``fast-1row`` (one edited row per
sequence: ``CalibrationConfig(pooling="cls")`` forced on MiniLM) and
``fast-all`` (every row: mean pooling, what MiniLM needs), interleaved in a
rotating order.

Usage::

    python bench/attention_overhead.py                          # 512 tokens, B=128, batch 8
    python bench/attention_overhead.py --length 128 --basket-size 32
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from transformers import AttentionInterface

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration_speed import make_texts

from llamaindex_posfair import CalibrationConfig, PosFairEncoder
from llamaindex_posfair.backends import fast
from llamaindex_posfair.encoders.baskets import baskets_for_batch
from llamaindex_posfair.encoders.models import bundled_model_path


def _timed_attention(spent: dict[int, float]):
    """The fast backend's attention function, adding each layer's wall time to ``spent``."""

    def forward(module, *args, **kwargs):
        start = time.perf_counter()
        out = fast.posfair_attention_forward(module, *args, **kwargs)
        spent[module.layer_idx] += time.perf_counter() - start
        return out

    return forward


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=512, help="tokens per text (uniform, no padding)")
    parser.add_argument("--basket-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)

    encoder = PosFairEncoder(bundled_model_path(), calibration=None, max_length=512, batch_size=args.batch_size)
    encoder.sentence_transformer.max_seq_length = args.length
    st = encoder.sentence_transformer
    features = st.preprocess(make_texts(args.batch_size))
    spent: dict[int, float] = defaultdict(float)
    AttentionInterface.register(fast.ATTENTION_NAME, _timed_attention(spent))
    layers = CalibrationConfig().layer_strengths(encoder.num_layers)  # last half, lambda 0.5
    configs = {"plain": None, "fast-1row": "cls", "fast-all": "mean"}

    def run(pooling: str | None) -> None:
        assignment = None
        if pooling is not None:
            config = CalibrationConfig(basket_size=args.basket_size, pooling=pooling)
            assignment = baskets_for_batch(
                features["input_ids"], features["attention_mask"], encoder.tokenizer, config, pooling
            )
        with torch.inference_mode():
            encoder._backend.forward(st, dict(features), assignment, tuple(layers), layers)

    for pooling in configs.values():
        run(pooling)  # warm-up
    total: dict[str, list[float]] = {name: [] for name in configs}
    attention: dict[str, list[float]] = {name: [] for name in configs}
    names = list(configs)
    for repeat in range(args.repeats):
        turn = repeat % len(names)
        for name in names[turn:] + names[:turn]:
            spent.clear()
            start = time.perf_counter()
            run(configs[name])
            total[name].append(time.perf_counter() - start)
            attention[name].append(sum(spent[layer] for layer in layers))

    print(
        f"# all-MiniLM-L6-v2, {args.length} tokens, basket {args.basket_size}, batch {args.batch_size}, "
        f"calibrated layers {sorted(layers)}, {args.repeats} repeats, torch threads {torch.get_num_threads()}"
    )
    print(f"{'config':>10} {'forward ms':>11} {'attention ms':>13} {'excess ms':>10} {'excess / forward':>17}")
    plain_forward = statistics.median(total["plain"])
    plain_attention = statistics.median(attention["plain"])
    for name in names:
        excess = statistics.median(attention[name]) - plain_attention
        print(
            f"{name:>10} {statistics.median(total[name]) * 1e3:11.1f} {statistics.median(attention[name]) * 1e3:13.1f} "
            f"{excess * 1e3:10.1f} {excess / plain_forward:16.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
