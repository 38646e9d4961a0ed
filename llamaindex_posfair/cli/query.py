"""``posfair query "..." --collection NAME``: ranked chunks with scores and sources.

Retrieves through LlamaIndex (``QdrantVectorStore`` + ``PosFairEmbedding``)
from a collection written by ``posfair ingest``; ``--rerank`` re-scores a
larger candidate set with ``PositionFairRerank`` (calibrated), which is how
an index built with the plain model gets position fairness.

Example:
    posfair query "who kept the lighthouse?" --collection demo
    posfair query "..." --collection demo --vector-name vanilla --rerank --json
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.options import CliError, add_model_args, add_storage_args

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "query",
        help="search a collection written by `posfair ingest` and print ranked chunks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("query", help="the question or search text")
    add_storage_args(p)
    add_model_args(p)
    p.add_argument("--top-k", type=int, default=5, help="results to print (default 5)")
    p.add_argument(
        "--vector-name",
        default=None,
        help='vector to search (default: "calibrated" if the collection has it, else its only vector)',
    )
    p.add_argument("--rerank", action="store_true", help="re-score candidates with PositionFairRerank")
    p.add_argument("--candidates", type=int, default=20, help="first-stage candidates for --rerank (default 20)")
    p.add_argument("--fusion-weight", type=float, default=0.0, help="weight of the first-stage score in --rerank")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.set_defaults(handler=run_query)


def _pick_vector(client: Any, collection: str, requested: str | None) -> tuple[str, int]:
    if not client.collection_exists(collection):
        names = [c.name for c in client.get_collections().collections]
        raise CliError(
            f"collection {collection!r} not found (existing: {names or 'none'}); "
            f"run `posfair ingest PATH --collection {collection}` first"
        )
    vectors = client.get_collection(collection).config.params.vectors
    if not isinstance(vectors, dict):
        raise CliError(f"collection {collection!r} has an unnamed vector; it was not written by posfair ingest")
    if requested:
        if requested not in vectors:
            raise CliError(f"--vector-name {requested!r} not in collection {collection!r} (it has {sorted(vectors)})")
        return requested, vectors[requested].size
    if "calibrated" in vectors:
        return "calibrated", vectors["calibrated"].size
    if len(vectors) == 1:
        name = next(iter(vectors))
        return name, vectors[name].size
    raise CliError(f"collection {collection!r} has vectors {sorted(vectors)}; choose one with --vector-name")


def _stored_fingerprint(client: Any, collection: str, vector: str) -> str | None:
    points, _ = client.scroll(collection, limit=1, with_payload=["encoder_fingerprints"], with_vectors=False)
    if not points:
        return None
    return (points[0].payload or {}).get("encoder_fingerprints", {}).get(vector)


def _query_encoder(encoder: Any, stored: str | None, vector: str) -> Any:
    """Encoder view whose fingerprint matches the stored vector (plain or calibrated)."""
    from llamaindex_posfair.encoders.view import CalibrationView

    if stored is None or stored == encoder.fingerprint():
        return encoder
    if encoder.calibration is not None and stored == encoder.fingerprint(calibration=None):
        return CalibrationView(encoder, None)
    logger.warning(
        "vector %r was written by an encoder with fingerprint %s, but this query uses %s (model %s); "
        "scores may be meaningless: pass the --model/calibration flags used at ingest time",
        vector,
        stored,
        encoder.fingerprint(),
        encoder.model_id,
    )
    return encoder


def _row(rank: int, nws: Any) -> dict[str, Any]:
    md = nws.node.metadata
    row = {
        "rank": rank,
        "score": round(float(nws.score), 6) if nws.score is not None else None,
        "doc_id": md.get("doc_id"),
        "source": md.get("source"),
        "chunk_index": md.get("chunk_index"),
        "start_char": md.get("start_char"),
        "end_char": md.get("end_char"),
        "point_id": nws.node.node_id,
        "text": nws.node.get_content(),
    }
    if "retrieval_score" in md:
        row["retrieval_score"] = md["retrieval_score"]
    return row


def run_query(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CliError("the query is empty; pass the text to search for")
    if args.top_k < 1 or args.candidates < 1:
        raise CliError(f"--top-k and --candidates must be positive, got {args.top_k} and {args.candidates}")
    client = options.open_client(args, must_exist=not args.qdrant_url)
    try:
        vector, size = _pick_vector(client, args.collection, args.vector_name)
        encoder = options.load_spec(options.spec_from_args(args), args)
        if encoder.dimension != size:
            raise CliError(
                f"vector {vector!r} of collection {args.collection!r} has size {size}, but model "
                f"{args.model!r} produces {encoder.dimension}; pass the --model used at ingest time"
            )
        rows = _search(args, client, vector, encoder)
    finally:
        client.close()
    if args.json:
        print(
            json.dumps(
                {
                    "query": args.query,
                    "collection": args.collection,
                    "vector": vector,
                    "reranked": bool(args.rerank),
                    "results": rows,
                },
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0
    print(
        f"{len(rows)} results for {args.query!r} in {args.collection!r} "
        f"(vector {vector!r}{', reranked position-fair' if args.rerank else ''}):"
    )
    for r in rows:
        snippet = " ".join(r["text"].split())
        snippet = snippet[:200] + ("..." if len(snippet) > 200 else "")
        print(f"{r['rank']:>2}. {r['score']:.4f}  {r['doc_id']} [{r['start_char']}:{r['end_char']}]")
        print(f"    {snippet}")
    return 0


def _search(args: argparse.Namespace, client: Any, vector: str, encoder: Any) -> list[dict[str, Any]]:
    from llama_index.core import VectorStoreIndex
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from llamaindex_posfair.integrations.embedding import PosFairEmbedding
    from llamaindex_posfair.integrations.rerank import PositionFairRerank

    query_encoder = _query_encoder(encoder, _stored_fingerprint(client, args.collection, vector), vector)
    embed = PosFairEmbedding(encoder=query_encoder)  # same model; plain or calibrated to match the stored vector
    store = QdrantVectorStore(client=client, collection_name=args.collection, dense_vector_name=vector)
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed)
    k = max(args.candidates, args.top_k) if args.rerank else args.top_k
    nodes = index.as_retriever(similarity_top_k=k).retrieve(args.query)
    if args.rerank:
        if encoder.calibration is None:
            raise CliError("--rerank re-scores with calibration on; drop --no-calibration")
        if not 0.0 <= args.fusion_weight <= 1.0:
            raise CliError(f"--fusion-weight must lie in [0, 1], got {args.fusion_weight}")
        rerank = PositionFairRerank(
            top_n=args.top_k, encoder=encoder, keep_retrieval_score=True, fusion_weight=args.fusion_weight
        )
        nodes = rerank.postprocess_nodes(nodes, query_str=args.query)
    return [_row(i + 1, n) for i, n in enumerate(nodes)]
