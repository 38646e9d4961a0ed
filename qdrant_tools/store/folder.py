"""The embedded store's folder: what kind of folder a path is, and where each collection lives.

::

    <root>/store.json                   marker: engine and format version
    <root>/.store.lock                  one process at a time (qdrant_tools.store.lock)
    <root>/collections/<name>/collection.json   the create_collection arguments, as given
    <root>/collections/<name>/shard/            one Qdrant Edge shard (segments, WAL, indexes)

A folder written by qdrant-client's local mode (``meta.json`` and
``collection/<name>/storage.sqlite``) is recognised, so it is never mistaken
for an empty store. Small files are written atomically (temporary file,
fsync, rename), and a collection folder appears in one rename, so a crash
leaves either the whole collection or none of it.

Example:
    >>> import tempfile
    >>> from qdrant_tools.store.folder import folder_kind
    >>> folder_kind(tempfile.mkdtemp())
    'empty'
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

MARKER = "store.json"
COLLECTIONS = "collections"
COLLECTION_META = "collection.json"
SHARD = "shard"
FORMAT = 1
ENGINE = "qdrant-edge"

FolderKind = Literal["missing", "empty", "store", "legacy-local", "other"]

_INVALID_NAME_CHARS = set('/\\:*?"<>|\0')


def folder_kind(root: str | Path) -> FolderKind:
    """What ``root`` holds: nothing, an embedded store, an old local-mode folder, or other files."""
    root = Path(root)
    if not root.exists():
        return "missing"
    if not root.is_dir():
        return "other"
    if (root / MARKER).is_file():
        return "store"
    if (root / "meta.json").is_file():
        return "legacy-local"
    names = {p.name for p in root.iterdir()}
    return "empty" if names <= {".lock", ".store.lock"} else "other"


def check_collection_name(name: str) -> str:
    """Return ``name`` if it can be a folder name.

    Raises:
        ValueError: empty, too long, ``.``/``..`` or with a path character.
    """
    if not isinstance(name, str) or not name or len(name) > 255 or name in (".", "..") or name.startswith("."):
        raise ValueError(f"collection name must be 1-255 characters and not start with '.', got {name!r}")
    bad = sorted(set(name) & _INVALID_NAME_CHARS)
    if bad:
        raise ValueError(f"collection name {name!r} contains {bad}; use letters, digits, '-', '_' or '.'")
    return name


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so a crash leaves the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Persist a rename inside ``folder`` (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse
        pass
    finally:
        os.close(fd)


def init_store(root: Path) -> None:
    """Create ``root`` as an empty store (marker and ``collections/``)."""
    (root / COLLECTIONS).mkdir(parents=True, exist_ok=True)
    if not (root / MARKER).is_file():
        write_json_atomic(root / MARKER, {"engine": ENGINE, "format": FORMAT})


def read_marker(root: Path) -> dict[str, Any]:
    """The store marker; raises ``ValueError`` naming the file if it is not a store of a known format."""
    data = json.loads((root / MARKER).read_text(encoding="utf-8"))
    if data.get("engine") != ENGINE or int(data.get("format", 0)) > FORMAT:
        raise ValueError(
            f"{root / MARKER} describes engine {data.get('engine')!r} format {data.get('format')!r}; this version "
            f"reads {ENGINE!r} format <= {FORMAT}: upgrade llamaindex-posfair"
        )
    return data


def collection_dir(root: Path, name: str) -> Path:
    return root / COLLECTIONS / check_collection_name(name)


def list_collections(root: Path) -> list[str]:
    """Names of the complete collections (a folder with its ``collection.json``), sorted."""
    base = root / COLLECTIONS
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if not p.name.startswith(".") and (p / COLLECTION_META).is_file())
