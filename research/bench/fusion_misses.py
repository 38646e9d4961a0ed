"""Why the shipped weighted RRF loses planted facts that BM25 finds: each query's target rank in each arm.

For every query of a needle set, the target passage's rank in the BM25 ranking alone, in the dense ranking
alone (node cosine fused with the best sub-chunk, as the default search scores it) and in the two fusions of
the two: weighted RRF (BM25 x1.5, ``k`` = 60, the earlier default) and DBSF (the default). Each fusion's
misses (target not first) are sorted by cause:

* ``bm25 first``: BM25 ranked the target first, and the fusion let another passage above it;
* ``near duplicate``: the passage above it is a distractor (a near-duplicate fact about another name);
* ``other``: neither.

The layout ``research/bench/fusion_sweep.py`` and ``research/bench/fusion_confirm.py`` score, in the embedded
store.

Usage:
    python research/bench/fusion_misses.py --memo DIR needle-manuals:dev needle-prose:dev
    python research/bench/fusion_misses.py --memo DIR --fresh /tmp/fresh needle-manuals-fresh:fresh
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ARMS = ("bm25", "dense", "rrf k=60, BM25 x1.5", "dbsf")
DEPTH = 100


def load_set(spec: str, fresh: str | None) -> Any:
    """``NAME:SPLIT`` of a shipped benchmark, or of a fresh set built under ``fresh``."""
    from research.eval.benchmarks.loaders import load_needle, load_shipped

    name, _, split = spec.partition(":")
    if name.endswith("-fresh"):
        if fresh is None:
            raise SystemExit(f"{name} needs --fresh (the folder research/bench/fusion_confirm.py builds)")
        return load_needle(Path(fresh) / name.replace("-", "_"), split)
    return load_shipped(name, split)


def arm_rankings(index: Any, q: Any, text: str, settings: Any) -> dict[str, list[str]]:
    """Arm name -> point ids, best first, for one query."""
    from qdrant_tools.search import collection_vectors, search, sparse_request
    from qdrant_tools.sparse import Bm25Sparse
    from research.default_pipeline.system import COLLECTION

    client, name = index.client, COLLECTION
    vectors = collection_vectors(client, name)
    sparse = Bm25Sparse().embed_query(text)
    req = sparse_request(sparse, vectors, DEPTH, None)
    out = {"bm25": [p.id for p in client.query_points(name, **req).points]}
    wide = settings.overridden(limit=DEPTH)
    out["dense"] = [h.id for h in search(client, name, q, wide.overridden(sparse=False), vectors=vectors)]
    rrf = wide.overridden(fusion="rrf", sparse_weight=1.5, rrf_k=60)
    out[ARMS[2]] = [h.id for h in search(client, name, q, rrf, vectors=vectors, sparse_query=sparse)]
    dbsf = wide.overridden(fusion="dbsf")
    out["dbsf"] = [h.id for h in search(client, name, q, dbsf, vectors=vectors, sparse_query=sparse)]
    return out


def doc_rank(ids: list[str], doc_of: dict[str, str], target: str) -> tuple[int | None, str | None]:
    """The target's passage rank (1-based; ``None``: not returned) and the passage ranked first."""
    docs = list(dict.fromkeys(doc_of[i] for i in ids))
    return (docs.index(target) + 1 if target in docs else None), (docs[0] if docs else None)


def diagnose(bench: Any, encoder: Any) -> tuple[Counter, dict[str, Counter]]:
    """First-place counts per arm, and each fusion's misses by cause."""
    import numpy as np

    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.encoding import resolve_chunking
    from qdrant_tools.layout import NodeLayout
    from research.default_pipeline.system import StoreIndex

    recipe = Recipe.default()
    c = recipe.layout
    chunk_tokens = c.chunk_tokens or resolve_chunking(encoder).chunk_tokens
    # the layout research/bench/fusion_sweep.py scores (float fused rows)
    layout = NodeLayout(
        chunk_tokens=chunk_tokens,
        subchunks=c.subchunks,
        fused_weight=c.fused_weight,
        node_quantization=c.node_quantization,
        node_on_disk=False,
        fused_quantization=None,
    )
    doc_ids = list(bench.corpus)
    index = StoreIndex.build(encoder, [bench.corpus[d] for d in doc_ids], doc_ids, layout, bm25=True)
    try:
        doc_of = {pid: doc_ids[index.vectors.doc_col[row]] for pid, row in index.row_of.items()}
        qids = list(bench.queries)
        qs = np.asarray(encoder.encode_queries([bench.queries[i] for i in qids]), dtype=np.float32)
        firsts: Counter = Counter()
        causes = {a: Counter() for a in ARMS[2:]}
        for qid, q in zip(qids, qs):
            target = next(iter(bench.qrels[qid]))
            ranks = {
                a: doc_rank(ids, doc_of, target)
                for a, ids in arm_rankings(index, q, bench.queries[qid], recipe.search).items()
            }
            firsts.update(a for a, (r, _) in ranks.items() if r == 1)
            for a in ARMS[2:]:
                r, top = ranks[a]
                if r != 1:
                    cause = "bm25 first" if ranks["bm25"][0] == 1 else "other"
                    causes[a][cause] += 1
                    causes[a]["near duplicate" if top and "-d" in top else "not a distractor"] += 1
        return firsts, causes
    finally:
        index.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sets", nargs="+", help="NAME:SPLIT, e.g. needle-manuals:dev")
    parser.add_argument("--fresh", default=None, help="folder of the fresh needle sets")
    parser.add_argument("--memo", default=None, help="folder of the embedding memo")
    args = parser.parse_args(argv)
    import logging

    from llamaindex_posfair.integrations.recipe import Recipe
    from research.eval.memo import MemoEncoder, VectorMemo

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    encoder = MemoEncoder(Recipe.default().encoder_spec().load(), VectorMemo(args.memo) if args.memo else VectorMemo())
    print(
        "| set | queries | target first: " + " / ".join(ARMS) + " | fusion | misses | BM25 had it first | "
        "a near duplicate first |"
    )
    print("|---|---|---|---|---|---|---|")
    for spec in args.sets:
        bench = load_set(spec, args.fresh)
        firsts, causes = diagnose(bench, encoder)
        n = len(bench.queries)
        head = f"| {spec} | {n} | " + " / ".join(str(firsts[a]) for a in ARMS)
        for a in ARMS[2:]:
            c = causes[a]
            misses = c["bm25 first"] + c["other"]
            print(f"{head} | {a} | {misses} | {c['bm25 first']} | {c['near duplicate']} |", flush=True)
            head = "| | | "
    return 0


if __name__ == "__main__":
    sys.exit(main())
