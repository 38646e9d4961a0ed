"""``posfair collection create|validate|apply|example-spec|set-search``: a collection's configuration.

Collections are described by a spec file (JSON or TOML, see
``qdrant_tools.spec.CollectionSpec``: named vectors, distance, HNSW, quantization,
on-disk, payload indexes, shards, replication). A server's API key comes from
``$QDRANT_API_KEY`` and is never printed.

``set-search`` changes the default search a collection records (how its dense and BM25 rankings are
fused) without re-embedding anything, and prints what it changed.

Example:
    posfair collection set-search docs --fusion dbsf
    posfair collection example-spec --collection docs > docs.json
    posfair collection create --spec docs.json --qdrant-url https://qdrant:6333
    posfair collection apply --spec docs.json --qdrant-url https://qdrant:6333 --dry-run
"""

from __future__ import annotations

import argparse
from typing import Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.options import CliError, comma_list


def register(subparsers: Any) -> None:
    col = subparsers.add_parser(
        "collection",
        help="create / validate / apply changes to a collection from a spec file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    col_sub = col.add_subparsers(dest="collection_command", metavar="ACTION", required=True)
    for name, helptext in (
        ("create", "create the collection (or check it matches if it exists)"),
        ("validate", "compare the collection with the spec; exit 1 on differences"),
        ("apply", "apply online changes: add named vectors, payload indexes, HNSW/quantization"),
    ):
        p = col_sub.add_parser(name, help=helptext)
        p.add_argument("--spec", required=True, help="collection spec file (.json or .toml)")
        options.add_storage_args(p, collection=False)
        if name == "apply":
            p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
        p.set_defaults(handler=run_collection)
    p = col_sub.add_parser(
        "set-search",
        help="change the fusion a collection's recorded search uses (nothing is re-embedded)",
        description="Change how a posfair collection's default search fuses its dense ranking with BM25. "
        "--fusion dbsf sets the current default (distribution-based score fusion); --fusion rrf the earlier "
        "weighted reciprocal rank fusion (BM25 weight 1.5, k = 60). Nothing is re-embedded; what changed is printed.",
    )
    p.add_argument("collection", help="the collection (written by posfair ingest or PosFairVectorStore)")
    p.add_argument(
        "--fusion", choices=("dbsf", "rrf"), required=True, help="dbsf (the default of new collections) or rrf"
    )
    p.add_argument("--fusion-limit", type=options.int_at_least(1), default=None, help="nodes of each ranking fused")
    p.add_argument("--bm25-weight", type=float, default=None, help="BM25 weight in RRF, dense = 1 (rrf only)")
    p.add_argument("--rrf-k", type=int, default=None, help="k of RRF, 1/(k + rank) (rrf only)")
    p.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    options.add_storage_args(p, collection=False)
    p.set_defaults(handler=run_set_search)
    p = col_sub.add_parser("example-spec", help="print an example spec (JSON) to start from")
    p.add_argument("--collection", default="posfair", help="collection name (default: posfair)")
    p.add_argument("--size", type=int, default=384, help="vector size (384 for all-MiniLM-L6-v2)")
    p.add_argument(
        "--vectors",
        type=comma_list(str),
        default=("vanilla", "calibrated"),
        help="vector names, comma-separated (default vanilla,calibrated)",
    )
    p.set_defaults(handler=run_example_spec)


def run_example_spec(args: argparse.Namespace) -> int:
    from qdrant_tools.spec import CollectionSpec, HnswSpec, VectorConfig

    names = list(args.vectors)
    try:
        spec = CollectionSpec(
            name=args.collection,
            vectors=[VectorConfig(name=n, size=args.size) for n in names],
            hnsw=HnswSpec(m=16, ef_construct=128),
            on_disk_payload=True,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    print(spec.to_json())
    return 0


def run_set_search(args: argparse.Namespace) -> int:
    """Record another fusion in the collection's recipe and print each changed search field."""
    from llamaindex_posfair.integrations.recipe import read_recipe, search_changes, switched_search, write_recipe

    given = {"fusion_limit": args.fusion_limit, "sparse_weight": args.bm25_weight, "rrf_k": args.rrf_k}
    client = options.open_client(args, must_exist=not args.qdrant_url)
    try:
        if not client.collection_exists(args.collection):
            raise CliError(f"collection {args.collection!r} not found in {options.storage_label(args)}")
        recipe = read_recipe(client, args.collection, notice=False)
        if recipe is None:
            raise CliError(
                f"collection {args.collection!r} records no posfair recipe (not written by posfair ingest or "
                "PosFairVectorStore); its search cannot be set"
            )
        if recipe.bm25 is None:
            raise CliError(f"collection {args.collection!r} has no BM25 vector, so its search fuses nothing")
        try:
            search = switched_search(recipe.search, args.fusion, **given)
        except ValueError as exc:
            raise CliError(str(exc).replace("sparse_weight", "--bm25-weight").replace("rrf_k", "--rrf-k")) from None
        changes = search_changes(recipe.search, search)
        if not changes:
            print(f"collection {args.collection!r} already searches with {args.fusion}: nothing changed")
            return 0
        if not args.dry_run:
            write_recipe(client, args.collection, recipe.model_copy(update={"search": search}))
        verb = "would change" if args.dry_run else "changed"
        print(f"collection {args.collection!r}: search {verb} (no point re-embedded)")
        for line in changes:
            print(f"  {line}")
        return 0
    finally:
        client.close()


def run_collection(args: argparse.Namespace) -> int:
    from qdrant_tools.spec import (
        CollectionMismatchError,
        CollectionSpec,
        SpecError,
        apply_changes,
        create_collection,
        validate_collection,
    )

    action = args.collection_command
    try:
        spec = CollectionSpec.from_file(args.spec)  # parse before touching storage
    except SpecError as exc:
        raise CliError(str(exc)) from None
    client = options.open_client(args, must_exist=action != "create" and not args.qdrant_url)
    try:
        if action == "create":
            created = create_collection(client, spec)
            print(
                ("created" if created else "exists and matches:") + "\n" + validate_collection(client, spec).summary()
            )
            return 0
        if action == "validate":
            report = validate_collection(client, spec)
            print(report.summary())
            return 0 if report.ok else 1
        plan = apply_changes(client, spec, dry_run=args.dry_run)
        print(plan.summary() + ("\n(dry run: nothing changed)" if args.dry_run else ""))
        return 1 if plan.not_applied else 0
    except (CollectionMismatchError, NotImplementedError) as exc:  # NotImplementedError: embedded store limits
        raise CliError(str(exc)) from None
    finally:
        client.close()
