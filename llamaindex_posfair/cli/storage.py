"""``posfair storage migrate``: a collection into posfair's layout, as a new collection;
``posfair storage check``: read a collection whole and report damaged files and points.

* ``--collection NAME --to NEW``: a collection written with ``--fused-weight 0`` (or without the
  fused multivector) answers a default query in two arms. ``migrate`` copies it into ``NEW`` with
  the fused rows built from its stored node and sub-chunk vectors (nothing is encoded; an embedded
  store or a server, ``--qdrant-url``), and records the layout in ``NEW``'s recipe: ``posfair
  ingest`` into ``NEW`` then finds every unchanged document up to date.
* ``--from-llamaindex NAME --to NEW``: a collection written by LlamaIndex's ``QdrantVectorStore``;
  its nodes (ids, metadata, relationships) are re-stored in posfair's layout, their text embedded
  with ``--model`` (default: the bundled model).

``NAME`` is left as it was; delete it when ``NEW`` serves you. A rerun after a crash completes the copy.

``check COLLECTION [--path DIR]`` reads an embedded collection's files, every point's payload and every
vector (:func:`qdrant_tools.store.check.check_collection`) and lists what is damaged, changing nothing.
Exit status 0: no damage; 1: damage found (the last line says how to recover); 2: no such store or
collection, or the folder is in use by another process.

Example:
    posfair storage migrate --collection docs --to docs_fused
    posfair storage migrate --path my/store --collection docs --to docs_fused --json
    posfair storage migrate --from-llamaindex llama_docs --to docs
    posfair storage check docs --path my/store
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.options import CliError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "storage",
        help="copy a collection into the fused layout (--collection NAME --to NEW), or adopt a LlamaIndex "
        "collection (--from-llamaindex NAME --to NEW)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    m = sub.add_parser(
        "migrate",
        help="copy a collection into the fused layout (--collection NAME --to NEW), from its stored vectors, "
        "or adopt a LlamaIndex collection (--from-llamaindex NAME --to NEW)",
    )
    options.add_storage_args(m, collection=False)
    f = m.add_argument_group("a collection to the fused layout (from its stored vectors; nothing is encoded)")
    f.add_argument("--collection", default=None, help="the collection to copy")
    f.add_argument("--to", default=None, help="the new collection's name (required)")
    f.add_argument(
        "--fused-weight",
        type=float,
        default=None,
        help="node weight of the fused rows (default: the collection's search node weight, else the default search's)",
    )
    f.add_argument(
        "--node-quantization",
        choices=("int8", "none"),
        default="int8",
        help="'int8' (default): add an int8 copy of the node vectors for their HNSW search; 'none': as stored",
    )
    options.add_compact_storage_args(f)
    a = m.add_argument_group("a LlamaIndex QdrantVectorStore collection into posfair's layout (re-embedded)")
    a.add_argument(
        "--from-llamaindex",
        metavar="COLLECTION",
        default=None,
        help="adopt COLLECTION (written by LlamaIndex's QdrantVectorStore) into --to NEW: node ids, metadata and "
        "relationships kept, posfair's vectors computed with --model (default: the bundled model)",
    )
    options.add_model_args(m)
    options.add_json_arg(m, "collection -> points copied")
    m.set_defaults(handler=run_migrate)
    c = sub.add_parser(
        "check",
        help="read every file, point and vector of an embedded collection and report damage (changes nothing; "
        "exit 1 on damage)",
    )
    c.add_argument("collection_name", metavar="COLLECTION", help="the collection to check")
    c.add_argument(
        "--path",
        default=None,
        help=f"embedded Qdrant (Edge) storage folder (default: {options.DEFAULT_STORAGE}); one process at a time",
    )
    c.add_argument(
        "--page-size",
        type=options.int_at_least(1),
        default=256,
        help="points read per page (default 256)",
    )
    c.add_argument("--no-progress", action="store_true", help="no progress bar")
    options.add_json_arg(c, "the report (files and points damaged)")
    c.set_defaults(handler=run_check)


def run_migrate(args: argparse.Namespace) -> int:
    """The adoption of a LlamaIndex collection (:func:`run_adopt`), or the copy into the fused layout
    (:func:`run_fuse`)."""
    return run_adopt(args) if args.from_llamaindex is not None else run_fuse(args)


def _fused_weight(args: argparse.Namespace, recipe: Any) -> float:
    """``--fused-weight``, else the collection's search node weight, else the default search's."""
    from qdrant_tools.search import SearchSettings

    if args.fused_weight is not None:
        if not 0.0 < args.fused_weight < 1.0:
            raise CliError(f"--fused-weight must lie strictly between 0 and 1, got {args.fused_weight:g}; e.g. 0.5")
        return float(args.fused_weight)
    weight = SearchSettings().node_weight if recipe is None else recipe.search.node_weight
    if weight <= 0:
        raise CliError(
            f"collection {args.collection!r} searches without the node cosine (node weight 0), so fused rows "
            "would not be used; pass --fused-weight W for queries at node weight W"
        )
    return weight


def _storage(args: argparse.Namespace) -> dict[str, Any]:
    """The target's storage: the flags, else the default layout's (``NodeLayout()``); a ValueError names a conflict."""
    from qdrant_tools.layout import NodeLayout

    given: dict[str, Any] = {"node_quantization": None if args.node_quantization == "none" else args.node_quantization}
    if args.node_on_disk is not None:
        given["node_on_disk"] = args.node_on_disk
    if args.fused_quantization is not None:
        given["fused_quantization"] = None if args.fused_quantization == "none" else args.fused_quantization
    layout = NodeLayout(**given)
    return {f: getattr(layout, f) for f in ("node_quantization", "fused_quantization", "node_on_disk")}


def run_fuse(args: argparse.Namespace) -> int:
    """``--collection NAME --to NEW``: :func:`qdrant_tools.fuse.fuse_collection`, with the recipe updated."""
    from llamaindex_posfair.integrations.recipe import read_recipe
    from qdrant_tools.fuse import FuseError, fuse_collection

    if args.collection is None or args.to is None:
        raise CliError("copying into the fused layout needs both --collection NAME and --to NEW")
    client = options.open_client(args, must_exist=args.qdrant_url is None)
    try:
        if not client.collection_exists(args.collection):
            raise CliError(f"collection {args.collection!r} does not exist in {options.storage_label(args)}")
        recipe = read_recipe(client, args.collection)
        weight = _fused_weight(args, recipe)
        storage = _storage(args)
        meta = None  # without sub-chunks there is nothing to fuse, and fuse_collection says so
        if recipe is not None and recipe.layout.subchunks is not None:
            meta = recipe.with_fused_rows(weight, **storage).metadata()
        n = fuse_collection(
            client, args.collection, args.to, weight, **storage, metadata=meta, show_progress=not args.json
        )
    except (FuseError, ValueError) as exc:  # ValueError: a recorded recipe this version cannot read
        raise CliError(str(exc)) from None
    finally:
        client.close()
    if args.json:
        print(json.dumps({"collection": args.collection, "to": args.to, "points": n, "fused_weight": weight}))
        return 0
    print(
        f"collection {args.to!r}: {n} points of {args.collection!r} with fused rows at node weight {weight:g}; "
        f"query it with --collection {args.to} (and delete {args.collection!r} when it serves you)"
    )
    return 0


def run_adopt(args: argparse.Namespace) -> int:
    """``--from-llamaindex SOURCE --to NEW``: :func:`llamaindex_posfair.integrations.adopt.adopt_llamaindex_collection`."""
    if args.to is None:
        raise CliError("adopting a LlamaIndex collection needs --to NEW (the new collection's name)")
    if args.collection is not None:
        raise CliError("--from-llamaindex names the source collection; drop --collection")
    from llamaindex_posfair.integrations.adopt import adopt_llamaindex_collection, check_llamaindex_source
    from llamaindex_posfair.integrations.embedding import PosFairEmbedding

    client = options.open_client(args, must_exist=args.qdrant_url is None)
    try:
        check_llamaindex_source(client, args.from_llamaindex, args.to)  # before the model loads
        embed = PosFairEmbedding(encoder=options.load_spec(options.spec_from_args(args), args))
        n = adopt_llamaindex_collection(
            client, args.from_llamaindex, args.to, embed_model=embed, show_progress=not args.json
        )
    except (LookupError, ValueError) as exc:
        raise CliError(str(exc).strip("'\"")) from None
    finally:
        client.close()
    if args.json:
        print(json.dumps({"from_llamaindex": args.from_llamaindex, "to": args.to, "points": n}))
        return 0
    print(
        f"collection {args.to!r}: {n} nodes of LlamaIndex collection {args.from_llamaindex!r} in posfair's layout; "
        f"query it with `posfair query ... --collection {args.to}` or PosFairVectorStore({args.to!r}, ...)"
    )
    return 0


def run_check(args: argparse.Namespace) -> int:
    """:func:`qdrant_tools.store.check.check_collection`, printed; 0 when clean, 1 on damage."""
    from qdrant_tools.store import StoreError
    from qdrant_tools.store.check import check_collection

    root = args.path or options.DEFAULT_STORAGE
    try:
        report = check_collection(
            root, args.collection_name, page_size=args.page_size, show_progress=not (args.json or args.no_progress)
        )
    except (StoreError, ValueError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0 if report.clean else 1
    for path, problem in report.files.items():
        print(f"damaged: {path}: {problem}")
    shown = list(report.damaged_points.items())
    for point_id, problem in shown[:_POINTS_SHOWN]:
        print(f"damaged point {point_id!r}: {problem}")
    if len(shown) > _POINTS_SHOWN:
        print(f"... and {len(shown) - _POINTS_SHOWN:,} more damaged points (--json lists them all)")
    print(report.summary())
    return 0 if report.clean else 1


#: Damaged points listed one per line before the summary (all of them with --json).
_POINTS_SHOWN = 20
