"""``posfair storage migrate``: copy a collection into the fused layout, without encoding again.

``--collection NAME --to NEW``: a collection written with ``--fused-weight 0`` (or
without the fused multivector) answers a default query in two arms. ``migrate`` copies it into ``NEW`` with the fused rows built from its stored
  node and sub-chunk vectors (nothing is encoded; an embedded store or a server, ``--qdrant-url``),
  and records the layout in ``NEW``'s recipe: ``posfair ingest`` into ``NEW`` then finds every
  unchanged document up to date. ``NAME`` is left as it was; delete it when ``NEW`` serves you.
  A rerun after a crash completes the copy.

Example:
    posfair storage migrate --collection docs --to docs_fused
    posfair storage migrate --path my/store --collection docs --to docs_fused --json
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
        help="copy a collection into the fused layout (--collection NAME --to NEW)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    m = sub.add_parser(
        "migrate",
        help="copy a collection into the fused layout (--collection NAME --to NEW), from its stored vectors",
    )
    options.add_storage_args(m, collection=False)
    f = m.add_argument_group("a collection to the fused layout (from its stored vectors; nothing is encoded)")
    f.add_argument("--collection", default=None, help="the collection to copy (required)")
    f.add_argument("--to", default=None, help="the new collection's name (required)")
    f.add_argument(
        "--fused-weight",
        type=float,
        default=None,
        help="node weight of the fused rows (default: the collection's search node weight, else the main job's)",
    )
    f.add_argument(
        "--node-quantization",
        choices=("int8", "none"),
        default="int8",
        help="'int8' (default): add an int8 copy of the node vectors for their HNSW search; 'none': as stored",
    )
    options.add_json_arg(m, "collection -> points copied")
    m.set_defaults(handler=run_fuse)


def _fused_weight(args: argparse.Namespace, recipe: Any) -> float:
    """``--fused-weight``, else the collection's search node weight, else the main job's."""
    from llamaindex_posfair.integrations.recipe import MAIN_JOB_SEARCH

    if args.fused_weight is not None:
        if not 0.0 < args.fused_weight < 1.0:
            raise CliError(f"--fused-weight must lie strictly between 0 and 1, got {args.fused_weight:g}; e.g. 0.5")
        return float(args.fused_weight)
    weight = MAIN_JOB_SEARCH.node_weight if recipe is None else recipe.search.node_weight
    if weight <= 0:
        raise CliError(
            f"collection {args.collection!r} searches without the node cosine (node weight 0), so fused rows "
            "would not be used; pass --fused-weight W for queries at node weight W"
        )
    return weight


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
        int8 = args.node_quantization == "int8"
        meta = None  # without sub-chunks there is nothing to fuse, and fuse_collection says so
        if recipe is not None and recipe.chunking.subchunk_tokens is not None:
            meta = recipe.with_fused_rows(weight, int8).metadata()
        n = fuse_collection(
            client, args.collection, args.to, weight, node_int8=int8, metadata=meta, show_progress=not args.json
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
