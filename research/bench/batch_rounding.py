"""How much a text's vector depends on the batch it is embedded in, in bfloat16 and in float32.

The CLI and ``PosFairVectorStore`` batch node texts differently (token-budget batches against LlamaIndex's
embed batches); in bfloat16 another batch means other padding and matrix shapes, so other rounding. This probe
embeds the first 40 natural-docs ``test`` passages (cut to 1,200 characters) with the default encoder alone,
in batches of 32 and in batches of 10, and prints the largest coordinate difference and the lowest cosine.

Usage::

    python research/bench/batch_rounding.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from llamaindex_posfair.integrations.recipe import Recipe
    from research.eval.benchmarks.loaders import load_shipped

    corpus = load_shipped("natural-docs", "test").corpus
    texts = [t[:1200] for t in list(corpus.values())[:40]]
    recipe = Recipe.default()
    name = next(iter(recipe.vectors))
    for dtype in ("bfloat16", "float32"):
        enc = recipe.vectors[name].model_copy(update={"dtype": dtype}).load()
        batched = enc.encode_documents(texts, batch_size=32)
        alone = np.stack([enc.encode_documents([t])[0] for t in texts])
        tens = enc.encode_documents(texts, batch_size=10)
        cos = float((batched * alone).sum(1).min())
        print(
            f"{dtype}: alone vs batches of 32: max |diff| {np.abs(batched - alone).max():.2e}, lowest cosine "
            f"{cos:.5f}; batches of 10 vs 32: max |diff| {np.abs(batched - tens).max():.2e}"
        )


if __name__ == "__main__":
    main()
