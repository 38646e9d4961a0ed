"""Added latency of rerank-only mode: PosFairRerank scoring 'node' vs 'subchunks' vs 'weighted'.

One query re-scores ``--candidates`` nodes of about ``--node-tokens`` tokens
(cut from the shipped needle benchmark's passages), with the bundled
all-MiniLM-L6-v2 (calibration on, ``PosFairRerank``'s default). Scorings are
interleaved inside every repeat so machine load hits them alike; the table
gives the median and p90 milliseconds per query and the ratio to 'node'.

Usage::

    HF_HUB_OFFLINE=1 python bench/rerank_latency.py                    # 20 candidates, 254-token nodes
    HF_HUB_OFFLINE=1 python bench/rerank_latency.py --candidates 50 --repeats 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def candidate_texts(n: int, node_tokens: int, tokenizer) -> list[str]:
    """``n`` node texts of about ``node_tokens`` tokens from the shipped benchmark's test passages."""
    from qdrant_tools.chunking import ChunkingConfig, chunk_text, tokenizer_spans
    from research.eval.benchmarks.loaders import load_shipped

    bench = load_shipped(split="test")
    spans = tokenizer_spans(tokenizer)
    out: list[str] = []
    for passage in bench.corpus.values():
        out.extend(c.text for c in chunk_text(passage, ChunkingConfig(node_tokens, 0), spans))
        if len(out) >= n:
            return out[:n]
    return out


def main() -> None:
    import torch
    from llama_index.core.schema import NodeWithScore, TextNode

    from llamaindex_posfair import CalibrationConfig, PosFairRerank
    from llamaindex_posfair.encoders.spec import EncoderSpec

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--node-tokens", type=int, default=254)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    encoder = EncoderSpec(calibration=CalibrationConfig()).load()  # the reranker's default encoder
    texts = candidate_texts(args.candidates, args.node_tokens, encoder.tokenizer)
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=t), score=0.0) for i, t in enumerate(texts)]
    rerankers = {s: PosFairRerank(top_n=5, encoder=encoder, scoring=s) for s in ("node", "subchunks", "weighted")}
    query = "Which harbour did the keeper's daughter sail from?"
    times: dict[str, list[float]] = {s: [] for s in rerankers}
    for r in rerankers.values():  # warm-up
        r.postprocess_nodes(nodes, query_str=query)
    for _ in range(args.repeats):
        for name, r in rerankers.items():
            t = time.perf_counter()
            r.postprocess_nodes(nodes, query_str=query)
            times[name].append(1e3 * (time.perf_counter() - t))
    base = statistics.median(times["node"])
    print(
        f"{len(texts)} candidates of ~{args.node_tokens} tokens, MiniLM calibrated, {args.threads} threads, load {os.getloadavg()[0]:.1f}"
    )
    print("| scoring | ms / query (median) | p90 | x node | added ms |")
    print("|---|---|---|---|---|")
    for name, ts in times.items():
        med, p90 = statistics.median(ts), sorted(ts)[int(0.9 * (len(ts) - 1))]
        print(f"| {name} | {med:.0f} | {p90:.0f} | {med / base:.2f} | {med - base:+.0f} |")


if __name__ == "__main__":
    main()
