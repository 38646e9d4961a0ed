"""``posfair query "..." --collection NAME``: ranked nodes with scores, sources and the matching sentence.

Answers through :class:`~llamaindex_posfair.integrations.retriever.PosFairRetriever`
from a collection written by ``posfair ingest``: nodes ranked by the collection's search
(node vector and best sub-chunk, fused with BM25 where the collection stores it) in one
Qdrant query, each scored by its relevance in [0, 1], the cosine of its best sub-chunk
(with ``--rerank``: the reranker's score). The collection records its recipe (encoder,
layout, default search), so no model or calibration flag is needed; a flag that
contradicts the recipe is an error naming both values. ``--rerank`` re-scores
``--candidates`` first-stage nodes with ``PosFairRerank``, scoring as the collection does.

``--filter KEY=VALUE`` (repeatable, ANDed; also ``!=``, ``>``, ``>=``, ``<``, ``<=`` for
numbers and ISO dates) keeps only nodes whose metadata match, inside the one Qdrant
query (:mod:`llamaindex_posfair.cli.metadata`); ``--json`` carries each hit's metadata.

Many queries: ``--queries-file FILE`` (JSONL objects with ``id`` and ``text``, or
one query per line) loads the model once and writes one JSON object per query
(``id``, ``query``, ``results``) to stdout or ``--out``.

Example:
    posfair query "who kept the lighthouse?" --collection demo
    posfair query "..." --collection demo --vector-name vanilla --rerank --json
    posfair query --queries-file questions.jsonl --collection demo --out answers.jsonl
    posfair query "spring tides" --collection docs --filter file_type=application/pdf --filter 'page_number<=3'
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.metadata import add_filter_arg, parse_filters, qdrant_filter
from llamaindex_posfair.cli.options import CliError
from qdrant_tools import payload as P

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

#: Posfair's payload fields that are metadata to a reader of the results (the rest are in the row or internal).
_SHOWN_FIELDS = frozenset({P.PAGE_LABEL, P.PAGE_NUMBER, P.PAGE_LABELS})


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "query",
        help="search a collection written by `posfair ingest` and print ranked nodes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("query", nargs="?", default=None, help="the question or search text (or --queries-file)")
    options.add_storage_args(p)
    options.add_model_args(p)
    g = p.add_argument_group("search")
    g.add_argument("--top-k", type=int, default=5, help="results per query (default 5)")
    g.add_argument("--vector-name", default=None, help='dense vector to search (default: "calibrated" or the only one)')
    g.add_argument(
        "--prefetch-limit",
        type=int,
        default=None,
        help="node-vector candidates re-scored above --exact-up-to nodes (default: the collection's)",
    )
    g.add_argument(
        "--exact-up-to",
        type=options.int_at_least(0),
        default=None,
        help="collections of at most this many nodes are scored exactly (default: the collection's; 0 = never)",
    )
    g.add_argument(
        "--node-weight",
        type=float,
        default=None,
        help="weight of the node cosine in the dense ranking's node-weighted score (default: the collection's)",
    )
    g.add_argument("--no-subchunks", action="store_true", help="score by the node vector only")
    g.add_argument(
        "--no-bm25", dest="bm25", action="store_false", default=None, help="dense ranking only (no BM25 fusion)"
    )
    g.add_argument(
        "--fusion", choices=["rrf", "dbsf"], default=None, help="dense + BM25 fusion (default: the collection's)"
    )
    g.add_argument(
        "--bm25-weight", type=float, default=None, help="BM25 weight in RRF, dense = 1 (default: the collection's)"
    )
    g.add_argument("--rrf-k", type=int, default=None, help="k of RRF, 1/(k + rank) (default: the collection's)")
    add_filter_arg(g)
    g.add_argument("--rerank", action="store_true", help="re-score candidates with PosFairRerank")
    g.add_argument("--candidates", type=int, default=20, help="first-stage candidates for --rerank (default 20)")
    g.add_argument(
        "--blend-weight",
        type=float,
        default=0.0,
        help="weight of the first-stage score blended into the --rerank score (default 0)",
    )
    g.add_argument(
        "--endpoint",
        default=None,
        help="encode queries on this `posfair serve` URL (it must serve the collection's encoder: "
        "posfair serve --collection NAME)",
    )
    b = p.add_argument_group("many queries")
    b.add_argument("--queries-file", default=None, help="JSONL ({'id', 'text'}) or one query per line")
    b.add_argument("--out", default=None, help="write the JSONL answers of --queries-file here (default: stdout)")
    options.add_json_arg(p, "the results of a single query")
    p.set_defaults(handler=run_query)


def read_queries(path: str) -> list[tuple[str, str]]:
    """``(id, text)`` pairs of a JSONL file (``id``, ``text``) or a plain file (one query per line; id = line number).

    Raises:
        CliError: the file is missing, a JSON line lacks ``text``, or a query is empty.
    """
    file = Path(path)
    if not file.is_file():
        raise CliError(f"--queries-file {path!r} does not exist")
    out = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                row = json.loads(line)
                qid, text = str(row.get("id", n)), row["text"]
            except (ValueError, KeyError, TypeError) as exc:
                raise CliError(
                    f"--queries-file {path!r} line {n}: expected {{'id': ..., 'text': ...}} ({exc})"
                ) from None
        else:
            qid, text = str(n), line
        if not isinstance(text, str) or not text.strip():
            raise CliError(f"--queries-file {path!r} line {n}: the query text is empty")
        out.append((qid, text.strip()))
    if not out:
        raise CliError(f"--queries-file {path!r} holds no query")
    return out


def _settings(args: argparse.Namespace, recipe: Any) -> Any:
    """The search: the collection's recipe (if it has one), the search flags on top."""
    from llamaindex_posfair.integrations.recipe import recorded_search

    given = {
        "limit": max(args.candidates, args.top_k) if args.rerank else args.top_k,
        "vector": args.vector_name,
        "subchunks": not args.no_subchunks,
        "evidence": True,
        "prefetch_limit": args.prefetch_limit,
        "prefetch_max": args.prefetch_limit,  # a given --prefetch-limit is the count, whatever the collection's size
        "exact_up_to": args.exact_up_to,
        "node_weight": args.node_weight,
        "sparse": False if args.bm25 is False else None,
        "fusion": args.fusion,
        "sparse_weight": args.bm25_weight,
        "rrf_k": args.rrf_k,
    }
    try:
        return recorded_search(recipe).overridden(**given)
    except ValueError as exc:
        message = str(exc).replace("sparse_weight", "--bm25-weight")
        for field in ("node_weight", "prefetch_limit", "exact_up_to", "rrf_k"):  # named by their flags
            message = message.replace(field, "--" + field.replace("_", "-"))
        raise CliError(message) from None


def hit_metadata(payload: dict[str, Any]) -> dict[str, Any]:
    """A hit's metadata: the node's (the reader's and the user's fields, the page fields), not posfair's
    bookkeeping.

    Example:
        >>> hit_metadata({"text": "x", "doc_id": "a.pdf", "file_type": "application/pdf", "page_label": "2",
        ...               "posfair_payload_format": 1})
        {'file_type': 'application/pdf', 'page_label': '2'}
    """
    if P.NODE_CONTENT in payload:
        return dict(json.loads(str(payload[P.NODE_CONTENT])).get("metadata") or {})
    hidden = P.FORMAT_1_FIELDS | {P.FORMAT_1}  # a point written in payload format 1
    return {k: v for k, v in payload.items() if k not in hidden or k in _SHOWN_FIELDS}


def row(rank: int, nws: Any, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """One result as JSON: rank, score, where it comes from, its text, the matching sentence's offsets,
    and (given the hit's ``payload``) its metadata."""
    md = nws.node.metadata
    where = P.posfair_fields(payload) if payload is not None else md
    out = {
        "rank": rank,
        "score": round(float(nws.score), 6) if nws.score is not None else None,
        "doc_id": where.get(P.DOC_ID),
        "source": where.get(P.SOURCE),
        "chunk_index": where.get(P.CHUNK_INDEX),
        "start_char": where.get(P.START_CHAR),
        "end_char": where.get(P.END_CHAR),
        "point_id": nws.node.node_id,
        "text": nws.node.get_content(),
    }
    if "evidence_start_char" in md:
        out["evidence"] = [md["evidence_start_char"], md["evidence_end_char"]]
    if "retrieval_score" in md:
        out["retrieval_score"] = md["retrieval_score"]
    if payload is not None:
        out["metadata"] = hit_metadata(payload)
    return out


class _Answerer:
    """Retriever (and reranker) loaded once, answering any number of queries."""

    def __init__(self, args: argparse.Namespace, client: StoreLike) -> None:
        from llamaindex_posfair.integrations.retriever import FingerprintMismatchError, PosFairRetriever

        qdrant_filter(args.filter)  # a bad filter is refused before the model loads
        remote = args.endpoint is not None
        if args.rerank and remote:
            raise CliError("--rerank runs the reranker in this process; drop --endpoint or --rerank")
        recipe = _recipe(args, client)
        spec = options.spec_for_recipe(args, recipe, args.vector_name) if recipe else _unrecorded_spec(args)
        errors: tuple[type[Exception], ...] = (FingerprintMismatchError, ValueError)
        if remote:
            from llamaindex_posfair.serve.client import ServeError

            errors += (ServeError,)
        encoder = None if remote else options.load_spec(spec, args)
        try:
            self.retriever = PosFairRetriever(
                client,
                args.collection,
                spec=spec if remote else None,
                encoder=encoder,
                endpoint=args.endpoint,
                settings=_settings(args, recipe),
                filters=parse_filters(args.filter),
            )
        except errors as exc:
            raise CliError(str(exc)) from None
        self.rerank = _reranker(args, encoder, recipe) if args.rerank else None
        self.top_k = args.top_k

    def search(self, query: str) -> list[Any]:
        """The retriever's search of ``query``, inside the ``--filter`` conditions (one ``query_points`` call)."""
        if not query.strip():
            raise CliError("the query is empty; pass the question or search text")
        try:
            return self.retriever.search(query)
        except (ValueError, NotImplementedError) as exc:  # e.g. a filter the embedded store cannot run
            raise CliError(f"--filter: {exc}") from None

    def answer(self, query: str) -> list[dict[str, Any]]:
        from llamaindex_posfair.integrations.nodes import hit_to_node

        hits = self.search(query)
        nodes = [hit_to_node(h) for h in hits]
        payloads = {n.node.node_id: h.payload for h, n in zip(hits, nodes)}
        if self.rerank is not None:
            nodes = self.rerank.postprocess_nodes(nodes, query_str=query)
        return [row(i + 1, n, payloads.get(n.node.node_id)) for i, n in enumerate(nodes[: self.top_k])]


def _recipe(args: argparse.Namespace, client: StoreLike) -> Any:
    """The collection's recipe (``None`` for a collection written before recipes).

    Raises:
        CliError: no such collection (the existing ones named), or a recipe this version cannot read.
    """
    from llamaindex_posfair.integrations.recipe import read_recipe

    try:
        return read_recipe(client, args.collection)
    except LookupError:
        names = [c.name for c in client.get_collections().collections]
        raise CliError(
            f"collection {args.collection!r} not found (existing: {names or 'none'}); "
            f"run `posfair ingest PATH --collection {args.collection}` first"
        ) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _unrecorded_spec(args: argparse.Namespace) -> Any:
    """The flags' spec for a collection written before recipes: calibrated as then, unless the flags say otherwise
    (a plain vector there is read by the encoder's plain view: the gate's ``check_reader``)."""
    from llamaindex_posfair.integrations.gate import UNRECORDED_CALIBRATION

    return options.spec_from_args(args, UNRECORDED_CALIBRATION)


def _reranker(args: argparse.Namespace, encoder: Any, recipe: Any) -> Any:
    """``PosFairRerank`` scoring as the collection does (its recipe); without one, calibrated node scoring."""
    from llamaindex_posfair.integrations.rerank import PosFairRerank

    if not 0.0 <= args.blend_weight <= 1.0:
        raise CliError(f"--blend-weight must lie in [0, 1], got {args.blend_weight}")
    if recipe is not None:
        scoring = {k: v for k, v in recipe.rerank_settings(args.vector_name).items() if k != "spec"}
    elif encoder.calibration is None:
        raise CliError("--rerank re-scores with calibration on; drop --no-calibration")
    else:
        scoring = {}
    return PosFairRerank(
        top_n=args.top_k, encoder=encoder, keep_retrieval_score=True, blend_weight=args.blend_weight, **scoring
    )


def _check(args: argparse.Namespace) -> list[tuple[str, str]] | None:
    if args.queries_file and args.query:
        raise CliError("pass either a query or --queries-file, not both")
    if args.top_k < 1 or args.candidates < 1:
        raise CliError(f"--top-k and --candidates must be positive, got {args.top_k} and {args.candidates}")
    if args.queries_file:
        return read_queries(args.queries_file)
    if args.out:
        raise CliError("--out writes the answers of --queries-file; for one query use --json and redirect")
    if args.query is None or not args.query.strip():
        raise CliError("the query is empty; pass the text to search for (or --queries-file FILE)")
    return None


def run_query(args: argparse.Namespace) -> int:
    batch = _check(args)
    client = options.open_client(args, must_exist=not args.qdrant_url)
    try:
        answerer = _Answerer(args, client)
        if batch is not None:
            _write_batch(args, answerer, batch)
            return 0
        rows = answerer.answer(args.query)
    finally:
        client.close()
    _print_single(args, answerer.retriever.vector, rows)
    return 0


def _write_batch(args: argparse.Namespace, answerer: _Answerer, batch: list[tuple[str, str]]) -> None:
    with open(args.out, "w", encoding="utf-8") if args.out else nullcontext(sys.stdout) as out:
        for qid, text in batch:
            answer = {"id": qid, "query": text, "results": answerer.answer(text)}
            out.write(json.dumps(answer, ensure_ascii=False) + "\n")
    if args.out:
        print(f"wrote {len(batch)} answers to {args.out}", file=sys.stderr)


def _print_single(args: argparse.Namespace, vector: str, rows: list[dict[str, Any]]) -> None:
    if args.json:
        data = {"query": args.query, "collection": args.collection, "vector": vector, "reranked": bool(args.rerank)}
        print(json.dumps({**data, "results": rows}, indent=2, ensure_ascii=False))
        return
    tag = ", reranked position-fair" if args.rerank else ""
    print(f"{len(rows)} results for {args.query!r} in {args.collection!r} (vector {vector!r}{tag}):")
    for r in rows:
        page = r.get("metadata", {}).get(P.PAGE_LABEL)
        where = f" p. {page}" if page is not None else ""
        print(f"{r['rank']:>2}. {r['score']:.4f}  {r['doc_id']}{where} [{r['start_char']}:{r['end_char']}]")
        print(f"    {_snippet(r)}")


def _snippet(r: dict[str, Any], width: int = 200) -> str:
    """The matching sentence(s) when known, else the node's start."""
    text = r["text"]
    if "evidence" in r:
        a, b = (x - r["start_char"] for x in r["evidence"])
        while a > 0 and not text[a - 1].isspace():  # a window of an over-long sentence may start inside a word
            a -= 1
        while b < len(text) and not text[b].isspace():
            b += 1
        text = text[a:b]
    text = " ".join(text.split())
    return text[:width] + ("..." if len(text) > width else "")
