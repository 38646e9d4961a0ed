"""``posfair storage migrate``: convert an embedded folder of the old local mode to the Qdrant Edge store.

Earlier versions kept embedded collections in qdrant-client's local mode
(``meta.json`` and ``collection/NAME/storage.sqlite``). Opening such a folder
now stops with a message pointing here. ``migrate`` copies every collection
(vectors, multivectors, payloads) into a Qdrant Edge store, checks the point
counts, builds the search index, and swaps the folders; the old folder is
kept as ``PATH.local-backup`` until you delete it.

Example:
    posfair storage migrate                     # the default ./.posfair/qdrant
    posfair storage migrate --path my/store --json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.options import CliError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "storage",
        help="migrate an embedded folder of the old local mode to the Qdrant Edge store",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    m = sub.add_parser("migrate", help="convert a local-mode folder in place (the old one is kept as a backup)")
    m.add_argument("--path", default=None, help=f"the folder to convert (default: {options.DEFAULT_STORAGE})")
    options.add_json_arg(m, "collection -> points copied")
    m.set_defaults(handler=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    from qdrant_tools.store import StoreError, migrate_local_storage
    from qdrant_tools.store.migrate import BACKUP_SUFFIX

    path = str(Path(args.path or options.DEFAULT_STORAGE))
    try:
        counts = migrate_local_storage(path, show_progress=not args.json)
    except StoreError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps({"path": path, "backup": path + BACKUP_SUFFIX, "collections": counts}, indent=2))
        return 0
    for name, n in counts.items():
        print(f"collection {name!r}: {n} points copied")
    print(f"{path} is now a Qdrant Edge store; the old folder is kept as {path + BACKUP_SUFFIX} (delete it when done)")
    return 0
