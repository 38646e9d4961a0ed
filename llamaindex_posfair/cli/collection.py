"""``posfair collection create|validate|apply|example-spec``: a collection from a declarative spec.

Collections are described by a spec file (JSON or TOML, see
``qdrant_tools.spec.CollectionSpec``: named vectors, distance, HNSW, quantization,
on-disk, payload indexes, shards, replication). A server's API key comes from
``$QDRANT_API_KEY`` and is never printed.

Example:
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
