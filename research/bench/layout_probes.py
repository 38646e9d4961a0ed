"""Probes of two layouts the default pipeline does not ship: where its node and sub-chunk vectors could come from.

``posfair ingest`` embeds every node twice over: the node text (one 254-token pass) and each of its
sentence-aligned sub-chunks (~10 short passes). That is why it ingests at about half the docs/s of
LlamaIndex's ``SentenceSplitter`` 128/20 (the scale issue). Two layouts would embed each token once:

* ``derived-node``: the node vector is the normalised mean of the node's sub-chunk vectors (no node pass);
* ``late-subchunks``: one pass per node; each sub-chunk vector is the mean of the node's contextual token
  states over the sub-chunk's characters ("late chunking"), normalised; the node vector is the model's.

This script measures both with the sweep's own harness (``research/bench/hybrid_sweep.py``: the same rule, the
same tables, the shipped ingestion and search code) by swapping the vectors ``ChunkEncoder`` hands to the
writer, so nothing else changes. It is a probe: neither layout is an ingestion option, because neither
passed the sweep's rule against the shipped default (see research/results/hybrid_sweep/probes.md).

Usage::

    python research/bench/layout_probes.py --probe derived-node --memo ~/.cache/posfair/memo     # ~2 min warm
    python research/bench/layout_probes.py --probe late-subchunks --memo ~/.cache/posfair/memo   # cold: one pass per node
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hybrid_sweep as H  # the sweep's harness, rule and tables

PROBES = ("derived-node", "late-subchunks")


def derive_node_vectors() -> None:
    """Every node vector becomes the normalised mean of the node's sub-chunk vectors."""
    from qdrant_tools import encoding
    from qdrant_tools.subchunks import SUBCHUNK_VECTOR

    original = encoding.ChunkEncoder.encode

    def encode(self: Any, chunks: Any, token_budget: int | None = None) -> Any:
        batch = original(self, chunks, token_budget)
        subs = batch.vectors.get(SUBCHUNK_VECTOR)
        if subs is not None:
            mean = np.stack([s.mean(axis=0) for s in subs])
            mean = (mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)).astype(np.float32)
            for name in [n for n in batch.vectors if n != SUBCHUNK_VECTOR]:
                batch.vectors[name] = mean
        return batch

    encoding.ChunkEncoder.encode = encode


def late_subchunk_vectors(encoder: Any) -> None:
    """Sub-chunk vectors pooled from one forward pass over the node (uncalibrated encoder only)."""
    import torch

    from qdrant_tools import encoding
    from qdrant_tools import payload as P

    model, tok = encoder.sentence_transformer[0].auto_model, encoder.tokenizer

    def pooled(text: str, spans: list[tuple[int, int]]) -> np.ndarray:
        enc = tok(
            text, truncation=True, max_length=encoder.max_length, return_offsets_mapping=True, return_tensors="pt"
        )
        offsets = enc.pop("offset_mapping")[0].tolist()
        with torch.inference_mode():
            states = model(**enc).last_hidden_state[0]
        out = []
        for start, end in spans:
            idx = [i for i, (a, b) in enumerate(offsets) if b > a and a >= start and b <= end]
            v = states[idx].mean(0) if idx else states.mean(0)
            out.append(torch.nn.functional.normalize(v, dim=0).numpy())
        return np.stack(out).astype(np.float32)

    def subchunk_vectors(self: Any, chunks: Any) -> list[np.ndarray]:
        vecs = []
        for c in chunks:
            fields = P.posfair_fields(c.payload)
            base = int(fields[P.START_CHAR])
            vecs.append(pooled(c.text, [(a - base, b - base) for a, b in fields[P.SUBCHUNK_SPANS]]))
        return vecs

    encoding.ChunkEncoder._subchunk_vectors = subchunk_vectors


def grid(probe: str) -> tuple[Any, ...]:
    """The shipped default and its neighbours, under ``probe``'s vectors."""
    s, tag = H.Setting, f" ({probe})"
    return (
        s("node weight 0.5 + BM25 x1.5, weighted RRF k=60" + tag, 0.5, True, sparse_weight=1.5, rrf_k=60),
        s("node weight 0.3 + BM25 x1.5, weighted RRF k=60" + tag, 0.3, True, sparse_weight=1.5, rrf_k=60),
        s("node weight 0.5 + BM25, RRF" + tag, 0.5, True),
        s("dense, node weight 0.5" + tag, 0.5),
        s("dense, best sub-chunk" + tag, 0.0),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probe", choices=PROBES, required=True, help="which layout to measure")
    parser.add_argument("--memo", default=None, help="folder of the embedding memo (research/bench/hybrid_sweep.py's)")
    parser.add_argument("--splits", default="dev", help="comma-separated splits (choose on dev; test to report)")
    args = parser.parse_args(argv)
    from llamaindex_posfair.encoders.spec import EncoderSpec
    from research.default_pipeline.system import cpu_load
    from research.eval.memo import MemoEncoder, VectorMemo

    t0 = time.perf_counter()
    plain = EncoderSpec(calibration=None, dtype=None).load()  # as saved: float32 on any machine
    if args.probe == "derived-node":
        derive_node_vectors()
    else:
        late_subchunk_vectors(plain)
    H.GRID = grid(args.probe)
    encoder = {False: MemoEncoder(plain, VectorMemo(args.memo) if args.memo else None)}
    for split in args.splits.split(","):
        for bench in H.BENCHMARKS:
            print(H.table(f"{bench} {split}", H.score(bench, split, encoder)), flush=True)
    print(f"\nwall {time.perf_counter() - t0:.0f} s; load averages at the end {cpu_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
