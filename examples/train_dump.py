"""Train a [DUMP]-prefixed all-MiniLM-L6-v2 on the shipped tiny set, save it, use it.

Run:  HF_HUB_OFFLINE=1 python examples/train_dump.py runs/minilm-dump
(about a minute of CPU; the same as `posfair train-dump --save-model runs/minilm-dump`).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from sentence_transformers import SentenceTransformer

from llamaindex_posfair import CalibrationConfig, PosFairEncoder, bundled_model_path
from llamaindex_posfair.dump import (
    DumpConfig,
    DumpTrainingConfig,
    add_dump_prefix,
    bundled_split,
    evaluate_retrieval,
    load_triples,
    save_dump_model,
    train_dump,
)


def main(out: str) -> None:
    train, test = load_triples(bundled_split("train")), load_triples(bundled_split("test"))
    model = add_dump_prefix(
        SentenceTransformer(bundled_model_path(), device="cpu"), DumpConfig(num_tokens=4, mode="full")
    )
    print("before:", evaluate_retrieval(model, test))
    report = train_dump(model, train, DumpTrainingConfig(batch_size=16, epochs=3))
    print(f"trained {report.steps} steps in {report.seconds:.0f}s; losses {report.train_losses}")
    print("after: ", evaluate_retrieval(model, test))
    save_dump_model(model, out)

    # The saved folder is a stock sentence-transformers model: the prefix comes back on its own.
    reloaded = SentenceTransformer(out)
    ids = reloaded.preprocess(["what causes the tides"])["input_ids"][0]
    print(reloaded.tokenizer.convert_ids_to_tokens(ids.tolist()))
    encoder = PosFairEncoder(out, calibration=CalibrationConfig())  # calibrated: DUMP positions isolated automatically
    print(encoder.encode_queries(["what causes the tides"]).shape, "dump tokens:", encoder.dump_tokens)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/minilm-dump")
