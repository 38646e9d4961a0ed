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

from qdrant_tools.store.errors import StorageDamagedError, recovery_hint

MARKER = "store.json"
COLLECTIONS = "collections"
COLLECTION_META = "collection.json"
SHARD = "shard"
FORMAT = 1
ENGINE = "qdrant-edge"

FolderKind = Literal["missing", "empty", "store", "unmarked-store", "legacy-local", "other"]

_INVALID_NAME_CHARS = set('/\\:*?"<>|\0')


def folder_kind(root: str | Path) -> FolderKind:
    """What ``root`` holds: nothing, an embedded store, an old local-mode folder, or other files.

    ``"unmarked-store"``: a store whose ``store.json`` is gone (it has collection folders but no marker).
    """
    root = Path(root)
    if not root.exists():
        return "missing"
    if not root.is_dir():
        return "other"
    if (root / MARKER).is_file():
        return "store"
    if (root / "meta.json").is_file():
        return "legacy-local"
    if collection_folders(root):
        return "unmarked-store"
    names = {p.name for p in root.iterdir()}
    return "empty" if names <= {".lock", ".store.lock"} else "other"


def is_store_folder(root: str | Path) -> bool:
    """Whether ``root`` is an embedded store: Qdrant Edge's (``store.json`` beside ``collections/``) or
    qdrant-client local mode's (``meta.json`` beside ``collection/`` or ``.lock``); a lone file of either
    name is not one.

    Example:
        >>> import tempfile
        >>> is_store_folder(tempfile.mkdtemp())
        False
    """
    root = Path(root)
    if (root / MARKER).is_file() and (root / COLLECTIONS).is_dir():
        return True
    return (root / "meta.json").is_file() and ((root / "collection").is_dir() or (root / ".lock").is_file())


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


def marker_text() -> str:
    """What ``store.json`` holds in a store of this version (for a message that tells how to rewrite it)."""
    return json.dumps({"engine": ENGINE, "format": FORMAT})


def missing_marker_message(root: Path) -> str:
    """What to do when ``root`` holds collection folders but no ``store.json``."""
    found = [p.name for p in collection_folders(root)]
    names = ", ".join(repr(n) for n in found)
    check = found[0] if len(found) == 1 else "NAME"
    return (
        f"{root / MARKER} is missing, but {str(root)!r} holds the embedded store's collections ({names}): the file "
        f"was deleted. Write it again with the line {marker_text()} (e.g. `echo '{marker_text()}' > "
        f"{root / MARKER}`), or restore the folder from a backup copy; then run `posfair storage check {check} "
        f"--path {root}` to see whether anything else is missing"
    )


def read_marker(root: Path) -> dict[str, Any]:
    """The store marker.

    Raises:
        StorageDamagedError: ``store.json`` cannot be read or is not a JSON object (names the file and the fix).
        ValueError: a store of another engine or a newer format (upgrade llamaindex-posfair).
    """
    path = root / MARKER
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageDamagedError(_marker_damage(path, exc), path) from None
    if not isinstance(data, dict):
        raise StorageDamagedError(_marker_damage(path, ValueError(f"a JSON {type(data).__name__}")), path)
    if data.get("engine") != ENGINE or int(data.get("format", 0)) > FORMAT:
        raise ValueError(
            f"{root / MARKER} describes engine {data.get('engine')!r} format {data.get('format')!r}; this version "
            f"reads {ENGINE!r} format <= {FORMAT}: upgrade llamaindex-posfair"
        )
    return data


def _marker_damage(path: Path, exc: Exception) -> str:
    return (
        f"{path} cannot be read as the embedded store's marker ({type(exc).__name__}: {exc}); it should hold "
        f"{marker_text()}: write that line into it, or restore the folder from a backup copy"
    )


def collection_folders(root: Path) -> list[Path]:
    """The folders under ``<root>/collections`` that hold a collection's record or shard (complete or not)."""
    base = root / COLLECTIONS
    if not base.is_dir():
        return []
    return sorted(
        p
        for p in base.iterdir()
        if p.is_dir() and not p.name.startswith(".") and ((p / COLLECTION_META).exists() or (p / SHARD).is_dir())
    )


def read_record_data(folder: Path, root: Path) -> dict[str, Any]:
    """The JSON object in a collection's ``collection.json``.

    Raises:
        StorageDamagedError: missing, unreadable or not a JSON object (names the file and the fix).
    """
    path = folder / COLLECTION_META
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageDamagedError(record_damage(path, root, folder.name, exc), path) from None
    if not isinstance(data, dict):
        raise StorageDamagedError(record_damage(path, root, folder.name, f"a JSON {type(data).__name__}"), path)
    return data


def record_damage(path: Path, root: Path, name: str, problem: object) -> str:
    """The message of a ``collection.json`` that cannot be read (``problem``: the exception or what was found)."""
    what = f"{type(problem).__name__}: {problem}" if isinstance(problem, Exception) else str(problem)
    what = what.splitlines()[0]
    return (
        f"{path} cannot be read as the record of collection {name!r} ({what}); it holds the collection's "
        f"create_collection arguments (vectors, indexes, metadata), which the shard beside it does not keep in "
        f"that form. To recover, {recovery_hint(root, name)}"
    )


def collection_dir(root: Path, name: str) -> Path:
    return root / COLLECTIONS / check_collection_name(name)


def list_collections(root: Path) -> list[str]:
    """Names of the complete collections (a folder with its ``collection.json``), sorted."""
    base = root / COLLECTIONS
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if not p.name.startswith(".") and (p / COLLECTION_META).is_file())
