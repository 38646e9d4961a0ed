"""Operator commands: ``posfair collection``, ``posfair snapshot`` and ``posfair ingest-ray``.

Collections are described by a spec file (JSON or TOML, see
``qdrant_tools.spec.CollectionSpec``); snapshots need a Qdrant server
(embedded local mode has no snapshot API); ``ingest-ray`` encodes on a Ray
actor pool and writes the same points as ``posfair ingest``. A server's API key
comes from ``$QDRANT_API_KEY`` and is never printed.

Example:
    posfair collection example-spec --name docs > docs.json
    posfair collection create --spec docs.json --qdrant-url https://qdrant:6333
    posfair collection migrate --spec docs.json --qdrant-url https://qdrant:6333 --dry-run
    posfair snapshot create --collection docs --qdrant-url https://qdrant:6333
    posfair snapshot download --collection docs --name NAME --dest backups/ --qdrant-url https://qdrant:6333
    posfair snapshot restore --collection docs --file backups/NAME --qdrant-url https://qdrant:6333
    posfair ingest-ray examples/data --collection demo --workers 2
    posfair ingest-ray /data --collection docs --qdrant-url https://qdrant:6333 \\
        --ray-address auto --workers 8 --gpus-per-worker 1
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

API_KEY_ENV = "QDRANT_API_KEY"


def _storage_args(p: argparse.ArgumentParser, *, server_only: bool = False) -> None:
    if not server_only:
        p.add_argument("--path", default=None, help="embedded Qdrant storage folder (default: .posfair/qdrant)")
    p.add_argument(
        "--qdrant-url",
        default=None,
        required=server_only,
        help=f"Qdrant server REST URL, e.g. https://host:6333; API key from ${API_KEY_ENV}",
    )
    p.add_argument(
        "--allow-insecure-api-key",
        action="store_true",
        help=f"allow sending ${API_KEY_ENV} over plain http (refused by default)",
    )


def register(subparsers: Any) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    # ---------------------------------------------------------------- collection
    col = subparsers.add_parser(
        "collection",
        help="create / validate / migrate a collection from a spec file",
        description=__doc__,
        formatter_class=fmt,
    )
    col_sub = col.add_subparsers(dest="collection_command", metavar="ACTION", required=True)
    for name, helptext in (
        ("create", "create the collection (or check it matches if it exists)"),
        ("validate", "compare the collection with the spec; exit 1 on differences"),
        ("migrate", "apply online changes: add named vectors, payload indexes, HNSW/quantization"),
    ):
        p = col_sub.add_parser(name, help=helptext)
        p.add_argument("--spec", required=True, help="collection spec file (.json or .toml)")
        _storage_args(p)
        if name == "migrate":
            p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
        p.set_defaults(handler=run_collection)
    p = col_sub.add_parser("example-spec", help="print an example spec (JSON) to start from")
    p.add_argument("--name", default="posfair", help="collection name")
    p.add_argument("--size", type=int, default=384, help="vector size (384 for all-MiniLM-L6-v2)")
    p.add_argument("--vectors", default="vanilla,calibrated", help="comma-separated vector names")
    p.set_defaults(handler=run_example_spec)

    # ---------------------------------------------------------------- snapshot
    snap = subparsers.add_parser(
        "snapshot",
        help="create / list / download (sha256-verified) / restore snapshots",
        description=__doc__,
        formatter_class=fmt,
    )
    snap_sub = snap.add_subparsers(dest="snapshot_command", metavar="ACTION", required=True)
    for name, helptext in (
        ("create", "create a snapshot on the server"),
        ("list", "list snapshots"),
        ("download", "download and verify a snapshot"),
        ("restore", "verify a local snapshot file, then upload and recover it"),
    ):
        p = snap_sub.add_parser(name, help=helptext)
        p.add_argument("--collection", required=True)
        _storage_args(p, server_only=True)
        p.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
        if name == "download":
            p.add_argument("--name", required=True, help="snapshot name (see `posfair snapshot list`)")
            p.add_argument("--dest", default=".", help="folder to write NAME and NAME.sha256 into")
            p.add_argument("--checksum", default=None, help="expected sha256 (default: the server's)")
        if name == "restore":
            p.add_argument("--file", required=True, help="snapshot file (with its .sha256 beside it)")
            p.add_argument("--checksum", default=None, help="expected sha256 (default: FILE.sha256)")
            p.add_argument("--priority", default="snapshot", choices=["snapshot", "replica", "no_sync"])
        p.set_defaults(handler=run_snapshot)

    # ---------------------------------------------------------------- ingest-ray
    from llamaindex_posfair.cli.ingest import add_model_args, add_storage_args

    p = subparsers.add_parser(
        "ingest-ray", help="ingest a folder with encoding on a Ray actor pool", description=__doc__, formatter_class=fmt
    )
    p.add_argument("source", metavar="PATH", help="folder of .txt/.md files, or one file (read by the driver)")
    add_storage_args(p)
    add_model_args(p)
    p.add_argument("--vector-name", default=None, help='vector name (default "calibrated", or "vanilla")')
    p.add_argument("--both-vectors", action="store_true", help='store "vanilla" and "calibrated" vectors')
    p.add_argument("--spec", default=None, help="create/check the collection from this spec file first")
    p.add_argument("--ray-address", default=None, help='Ray cluster ("auto", "ray://head:10001"); default: local Ray')
    p.add_argument("--local-cpus", type=int, default=2, help="CPUs of a local Ray (default 2)")
    p.add_argument("--workers", type=int, default=1, help="encoder actors (default 1)")
    p.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs per actor (0 = CPU actors)")
    p.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs per actor (default 1)")
    p.add_argument("--token-budget", type=int, default=16384, help="padded tokens per forward pass")
    p.add_argument("--docs-per-task", type=int, default=8, help="documents per actor call")
    p.add_argument("--chunk-tokens", type=int, default=None, help="tokens per chunk (default: fit the model)")
    p.add_argument("--overlap-tokens", type=int, default=None, help="tokens shared by neighbouring chunks")
    p.add_argument("--extensions", default=".txt,.md", help="comma-separated file suffixes")
    p.add_argument("--write-batch-size", type=int, default=256, help="points per upsert(wait=True)")
    p.add_argument("--write-ordering", default="weak", choices=["weak", "medium", "strong"])
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run_ingest_ray)


def _fail(cmd: str, msg: str) -> int:
    print(f"posfair {cmd}: error: {msg}", file=sys.stderr)
    return 2


# ------------------------------------------------------------------------ collection
def run_example_spec(args: argparse.Namespace) -> int:
    from qdrant_tools.spec import CollectionSpec, HnswSpec, VectorConfig

    names = [n.strip() for n in args.vectors.split(",") if n.strip()]
    try:
        spec = CollectionSpec(
            name=args.name,
            vectors=[VectorConfig(name=n, size=args.size) for n in names],
            hnsw=HnswSpec(m=16, ef_construct=128),
            on_disk_payload=True,
        )
    except ValueError as exc:
        return _fail("collection example-spec", str(exc))
    print(spec.to_json())
    return 0


def run_collection(args: argparse.Namespace) -> int:
    from llamaindex_posfair.cli.ingest import CliError, open_client
    from qdrant_tools.spec import (
        CollectionMismatchError,
        CollectionSpec,
        SpecError,
        create_collection,
        migrate_collection,
        validate_collection,
    )

    action = args.collection_command
    try:
        spec = CollectionSpec.from_file(args.spec)  # parse before touching storage
        client = open_client(args, must_exist=action != "create" and not args.qdrant_url)
    except (SpecError, CliError) as exc:
        return _fail(f"collection {action}", str(exc))
    try:
        if action == "create":
            created = create_collection(client, spec)
            report = validate_collection(client, spec)
            print(("created" if created else "exists and matches:") + "\n" + report.summary())
            return 0
        if action == "validate":
            report = validate_collection(client, spec)
            print(report.summary())
            return 0 if report.ok else 1
        plan = migrate_collection(client, spec, dry_run=args.dry_run)
        print(plan.summary() + ("\n(dry run: nothing changed)" if args.dry_run else ""))
        return 1 if plan.not_applied else 0
    except CollectionMismatchError as exc:
        return _fail(f"collection {action}", str(exc))
    finally:
        client.close()


# ------------------------------------------------------------------------ snapshot
def run_snapshot(args: argparse.Namespace) -> int:
    import httpx

    from qdrant_tools.snapshots import (
        ChecksumMismatchError,
        InsecureApiKeyError,
        ServerConfig,
        create_snapshot,
        download_snapshot,
        list_snapshots,
        restore_snapshot,
    )

    action = args.snapshot_command
    try:
        server = ServerConfig(args.qdrant_url, allow_insecure_api_key=args.allow_insecure_api_key, timeout=args.timeout)
        server.api_key()  # refuse an insecure key before any request
        if action == "create":
            info = create_snapshot(server, args.collection)
            print(json.dumps({"name": info.name, "size": info.size, "checksum": info.checksum}, indent=2))
        elif action == "list":
            for s in list_snapshots(server, args.collection):
                print(f"{s.name}\t{s.size}\t{s.checksum}\t{s.creation_time}")
        elif action == "download":
            path = download_snapshot(
                server, args.collection, args.name, args.dest, expected_checksum=args.checksum, show_progress=True
            )
            print(f"downloaded and verified {path} (checksum in {path.name}.sha256)")
        else:
            restore_snapshot(server, args.collection, args.file, checksum=args.checksum, priority=args.priority)
            print(f"restored {args.collection!r} from {args.file}")
    except (ValueError, FileNotFoundError, ChecksumMismatchError, InsecureApiKeyError) as exc:
        return _fail(f"snapshot {action}", str(exc))
    except httpx.HTTPError as exc:
        return _fail(
            f"snapshot {action}",
            f"{exc} (server {args.qdrant_url}); check the URL, the API key and that the collection exists on this node",
        )
    return 0


# ------------------------------------------------------------------------ ingest-ray
def run_ingest_ray(args: argparse.Namespace) -> int:
    import os

    from llamaindex_posfair.cli.ingest import DEFAULT_STORAGE, CliError, calibration_from_args, open_client
    from qdrant_tools.ray_ingest import EncoderRecipe, RayIngestConfig, ray_ingest_path
    from qdrant_tools.schema import SchemaMismatchError
    from qdrant_tools.spec import CollectionMismatchError, CollectionSpec, SpecError, create_collection

    try:
        if not os.path.exists(args.source):
            raise CliError(f"PATH {args.source!r} does not exist; pass a folder of .txt/.md files or one file")
        calibration = calibration_from_args(args)
        if args.both_vectors:
            if calibration is None:
                raise CliError("--both-vectors needs calibration on; drop --no-calibration")
            vectors = (("vanilla", "vanilla"), ("calibrated", "calibrated"))
        else:
            kind = "vanilla" if calibration is None else "calibrated"
            vectors = ((args.vector_name or kind, kind),)
        try:
            recipe = EncoderRecipe(
                model=args.model,
                calibration=calibration,
                vectors=vectors,
                max_length=args.max_length,
                dtype=args.dtype,
                query_prompt=args.query_prompt,
                document_prompt=args.document_prompt,
                batch_size=args.encode_batch_size,
                trust_remote_code=args.trust_remote_code,
            )
            config = RayIngestConfig(
                num_workers=args.workers,
                num_gpus_per_worker=args.gpus_per_worker,
                num_cpus_per_worker=args.cpus_per_worker,
                token_budget=args.token_budget,
                docs_per_task=args.docs_per_task,
                write_batch_size=args.write_batch_size,
                write_ordering=args.write_ordering,
                chunk_tokens=args.chunk_tokens,
                overlap_tokens=args.overlap_tokens,
                show_progress=not args.no_progress,
                extensions=tuple(e.strip() for e in args.extensions.split(",") if e.strip()),
            )
            spec = CollectionSpec.from_file(args.spec) if args.spec else None
        except (ValueError, SpecError) as exc:
            raise CliError(str(exc)) from None
        if spec is not None and spec.name != args.collection:
            raise CliError(
                f"--spec describes collection {spec.name!r} but --collection is {args.collection!r}; make them agree"
            )
        client = open_client(args, retry=True)
        try:
            if spec is not None:
                create_collection(client, spec)
            report = ray_ingest_path(
                client,
                args.collection,
                args.source,
                recipe,
                config,
                ray_address=args.ray_address,
                local_cpus=args.local_cpus,
            )
        except (SchemaMismatchError, CollectionMismatchError, ValueError) as exc:
            raise CliError(str(exc)) from None
        except Exception as exc:
            print(
                f"posfair ingest-ray: stopped by {type(exc).__name__}: {exc}\n"
                "chunks already stored are kept; rerun the same command to finish (nothing is duplicated)",
                file=sys.stderr,
            )
            return 1
        finally:
            client.close()
    except CliError as exc:
        return _fail("ingest-ray", str(exc))
    if args.json:
        where = args.qdrant_url or (args.path or DEFAULT_STORAGE)
        print(json.dumps({**report.to_dict(), "storage": where}, indent=2))
    else:
        print(report.summary())
    return 0
