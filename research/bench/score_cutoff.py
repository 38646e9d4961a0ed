"""Does one score cutoff mean the same across queries? Relevance scores on every shipped benchmark.

``PosFairVectorStore`` and ``posfair query`` score each hit by its relevance in [0, 1]
(``qdrant_tools.search.relevance``: the dense similarity the ranking uses, kept in ranking order). This
script asks whether one cutoff works for every query: it keeps the first hit of a question the corpus
answers, and drops every hit of a question about a topic the corpus does not hold.

The rule, written before the run:

* Each benchmark split (needle-prose, needle-manuals, natural-docs; ``dev`` and ``test``) is ingested by
  the default pipeline (``Recipe.default()``: the shipped layout, BM25, the bundled model) into the embedded
  store; every benchmark question and every absent-topic probe (``research/bench/absent_topics.txt``, 40
  questions about cooking, sport, health, travel and the like) is answered by the default search (DBSF).
* keep(c): of the questions whose first hit is relevant, the share whose first hit scores >= c.
  drop(c): of the absent-topic probes, the share whose first hit scores < c (scores fall down the ranking,
  so then every hit is below c).
* The cutoff is chosen on ``dev``: the c in 0.00, 0.01, ..., 1.00 that maximises min(mean keep, mean drop),
  each the mean over the three benchmarks; ties go to the smaller c. It is then reported on ``test``
  (target: keep >= 0.90 and drop >= 0.90 on each benchmark).

Usage::

    python research/bench/score_cutoff.py --memo /tmp/memo > research/results/score_cutoff/run.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

BENCHMARKS = ("needle-prose", "needle-manuals", "natural-docs")
ABSENT = Path(__file__).with_name("absent_topics.txt")
GRID = [round(0.01 * i, 2) for i in range(101)]


def first_hits(encoder, bench, absent: list[str]) -> tuple[list[tuple[float, bool]], list[float]]:
    """``([(first score, first hit relevant)] per question, [first score] per absent probe)`` of ``bench``
    ingested by the default pipeline."""
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.encoding import resolve_chunking
    from qdrant_tools.search import collection_vectors, search
    from qdrant_tools.sparse import Bm25Sparse
    from research.default_pipeline.system import COLLECTION, StoreIndex

    recipe = Recipe.default()
    layout = recipe.layout.replace(chunk_tokens=recipe.layout.chunk_tokens or resolve_chunking(encoder).chunk_tokens)
    settings = recipe.search.overridden(limit=10)
    index = StoreIndex.build(encoder, list(bench.corpus.values()), list(bench.corpus), layout, bm25=True)
    try:
        vectors, bm25 = collection_vectors(index.client, COLLECTION), Bm25Sparse(recipe.bm25)

        def first(text: str):
            q = encoder.encode_queries([text])[0]
            hits = search(index.client, COLLECTION, q, settings, vectors=vectors, sparse_query=bm25.embed_query(text))
            return hits[0] if hits else None

        answered = []
        for qid, text in bench.queries.items():
            hit = first(text)
            relevant = hit is not None and bench.qrels.get(qid, {}).get(str(hit.payload.get("doc_id")), 0) > 0
            answered.append((hit.score if hit else 0.0, relevant))
        probes = [(h.score if (h := first(t)) else 0.0) for t in absent]
        return answered, probes
    finally:
        index.close()


def rates(answered: list[tuple[float, bool]], probes: list[float], c: float) -> tuple[float, float]:
    kept = [s >= c for s, relevant in answered if relevant]
    return float(np.mean(kept)) if kept else float("nan"), float(np.mean([s < c for s in probes]))


def choose(per_bench: dict[str, tuple]) -> float:
    """The cutoff of the rule (module docstring) over ``per_bench`` (the ``dev`` results)."""
    best, best_c = -1.0, 0.0
    for c in GRID:
        keep = np.mean([rates(a, p, c)[0] for a, p in per_bench.values()])
        drop = np.mean([rates(a, p, c)[1] for a, p in per_bench.values()])
        if min(keep, drop) > best + 1e-12:
            best, best_c = min(keep, drop), c
    return best_c


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memo", default=None, help="embedding memo folder (research/bench/natural_peers.py's)")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS), help="comma-separated benchmarks")
    args = parser.parse_args()
    from llamaindex_posfair.integrations.recipe import Recipe
    from research.eval.benchmarks.loaders import load_shipped
    from research.eval.memo import MemoEncoder, VectorMemo

    t0 = time.time()
    encoder = MemoEncoder(Recipe.default().encoder_spec().load(), VectorMemo(args.memo) if args.memo else None)
    absent = [line.strip() for line in ABSENT.read_text().splitlines() if line.strip()]
    results = {}
    for split in ("dev", "test"):
        for name in args.benchmarks.split(","):
            results[split, name] = first_hits(encoder, load_shipped(name, split), absent)
            print(f"<!-- {name}/{split} done at {time.time() - t0:.0f} s -->", flush=True)
    c = choose({n: results["dev", n] for n in args.benchmarks.split(",")})
    print(f"\nCutoff chosen on dev by the rule: **{c:.2f}** (`python research/bench/score_cutoff.py`)\n")
    print("| benchmark | split | questions, first hit relevant | keep at cutoff | absent probes | drop at cutoff |")
    print("|---|---|---|---|---|---|")
    for (split, name), (answered, probes) in results.items():
        keep, drop = rates(answered, probes, c)
        n_rel = sum(r for _, r in answered)
        print(f"| {name} | {split} | {n_rel} of {len(answered)} | {keep:.3f} | {len(probes)} | {drop:.3f} |")
    print("\nFirst-hit scores (median [5th, 95th percentile]):\n")
    print("| benchmark | split | relevant first hits | absent probes |")
    print("|---|---|---|---|")
    for (split, name), (answered, probes) in results.items():
        rel = [s for s, r in answered if r]
        q = lambda xs: f"{np.median(xs):.3f} [{np.percentile(xs, 5):.3f}, {np.percentile(xs, 95):.3f}]"  # noqa: E731
        print(f"| {name} | {split} | {q(rel)} | {q(probes)} |")
    print(f"\nwall {time.time() - t0:.0f} s; load averages at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
