"""``posfair snapshot create|list|download|restore``: server snapshots, sha256-verified.

Snapshots need a Qdrant server (embedded storage has no snapshot API). A
server's API key comes from ``$QDRANT_API_KEY`` and is never printed.

Example:
    posfair snapshot create --collection docs --qdrant-url https://qdrant:6333
    posfair snapshot download --collection docs --name NAME --out-dir backups/ --qdrant-url https://qdrant:6333
    posfair snapshot restore --collection docs --file backups/NAME --qdrant-url https://qdrant:6333
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.options import CliError


def register(subparsers: Any) -> None:
    snap = subparsers.add_parser(
        "snapshot",
        help="create / list / download (sha256-verified) / restore snapshots",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    snap_sub = snap.add_subparsers(dest="snapshot_command", metavar="ACTION", required=True)
    for name, helptext in (
        ("create", "create a snapshot on the server"),
        ("list", "list snapshots"),
        ("download", "download and verify a snapshot"),
        ("restore", "verify a local snapshot file, then upload and recover it"),
    ):
        p = snap_sub.add_parser(name, help=helptext)
        p.add_argument("--collection", required=True, help="Qdrant collection name")
        options.add_storage_args(p, collection=False, server_only=True)
        p.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
        if name == "download":
            p.add_argument("--name", required=True, help="snapshot name (see `posfair snapshot list`)")
            p.add_argument("--out-dir", default=".", help="folder to write NAME and NAME.sha256 into (default .)")
            p.add_argument("--checksum", default=None, help="expected sha256 (default: the server's)")
        if name == "restore":
            p.add_argument("--file", required=True, help="snapshot file (with its .sha256 beside it)")
            p.add_argument("--checksum", default=None, help="expected sha256 (default: FILE.sha256)")
            p.add_argument("--priority", default="snapshot", choices=["snapshot", "replica", "no_sync"])
        p.set_defaults(handler=run_snapshot)


def _act(args: argparse.Namespace, server: Any) -> None:
    from qdrant_tools.snapshots import create_snapshot, download_snapshot, list_snapshots, restore_snapshot

    action = args.snapshot_command
    if action == "create":
        info = create_snapshot(server, args.collection)
        print(json.dumps({"name": info.name, "size": info.size, "checksum": info.checksum}, indent=2))
    elif action == "list":
        for s in list_snapshots(server, args.collection):
            print(f"{s.name}\t{s.size}\t{s.checksum}\t{s.creation_time}")
    elif action == "download":
        path = download_snapshot(
            server, args.collection, args.name, args.out_dir, expected_checksum=args.checksum, show_progress=True
        )
        print(f"downloaded and verified {path} (checksum in {path.name}.sha256)")
    else:
        restore_snapshot(server, args.collection, args.file, checksum=args.checksum, priority=args.priority)
        print(f"restored {args.collection!r} from {args.file}")


def run_snapshot(args: argparse.Namespace) -> int:
    import httpx

    from qdrant_tools.snapshots import ChecksumMismatchError, InsecureApiKeyError, ServerConfig

    try:
        server = ServerConfig(args.qdrant_url, allow_insecure_api_key=args.allow_insecure_api_key, timeout=args.timeout)
        server.api_key()  # refuse an insecure key before any request
        _act(args, server)
    except (ValueError, FileNotFoundError, ChecksumMismatchError, InsecureApiKeyError) as exc:
        raise CliError(str(exc)) from None
    except httpx.HTTPError as exc:
        raise CliError(
            f"{exc} (server {args.qdrant_url}); check the URL, the API key and that the collection exists on this node"
        ) from None
    return 0
