"""Errors of :mod:`qdrant_tools.store`: each names what happened and the fix.

A file of the embedded store that cannot be read or decoded raises :class:`StorageDamagedError`, naming
the file and the ways back (:func:`recovery_hint`); :func:`storage_errors` turns Qdrant Edge's exceptions
into it at the store's boundary (docs/storage.md, "Errors name the file and the way back").

Example:
    >>> from qdrant_tools.store.errors import StoreError, StoreLockedError
    >>> issubclass(StoreLockedError, StoreError)
    True
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

#: Qdrant Edge raises a bare ``Exception`` for everything; these message parts mean its files failed (I/O,
#: decoding, bounds), not that a request was wrong (those say "Wrong input", "Vector dimension error", ...).
_FILE_FAILURES = (
    "service runtime error",
    "io error",
    "gridstore",
    "corrupt",
    "failed to decode",
    "failed to deserialize",
    "not readable",
    "out of bounds",
    "failed to load",
    "failed to open",
)
_EDGE_PREFIX = "Service runtime error: "
#: Message parts of Qdrant Edge's payload storage (its files are ``segments/*/payload_storage/``).
_PAYLOAD_FAILURES = ("gridstore", "decode value", "decompress", "payload")


class StoreError(RuntimeError):
    """Storage cannot be opened as asked (the message says why and what to do)."""


class StoreLockedError(StoreError):
    """Another process holds the storage folder (or this process holds it outside :func:`open_store`)."""


class StoreNotFoundError(StoreError):
    """``must_exist=True`` and there is no storage at the path."""


class LegacyStorageError(StoreError):
    """The folder was written by qdrant-client's local mode, the embedded store before Qdrant Edge."""


class NotAStoreError(StoreError):
    """The folder holds other files: it is neither an embedded store nor empty."""


class ServerUnreachableError(StoreError):
    """The Qdrant server did not answer."""


class StorageDamagedError(StoreError):
    """A file of the embedded store cannot be read or decoded; the message names it and the fix.

    Attributes:
        path: the damaged file, or the folder whose files failed when Qdrant Edge does not say which.
    """

    def __init__(self, message: str, path: str | Path) -> None:
        super().__init__(message)
        self.path = Path(path)


class UnsupportedCallError(NotImplementedError):
    """A qdrant-client method or argument the embedded Qdrant Edge store does not implement."""


def recovery_hint(root: str | Path, collection: str | None = None, *, check: bool = True) -> str:
    """The ways back from damaged files of the store at ``root`` (one wording for every message).

    Args:
        root: the store folder.
        collection: the damaged collection (``NAME`` in the commands when unknown).
        check: also point to ``posfair storage check`` (False in the check's own report).

    Example:
        >>> recovery_hint("data/qdrant", "docs").startswith("restore")
        True
    """
    name = collection or "NAME"
    hint = (
        f"restore the folder {str(root)!r} from a backup copy (or, on a Qdrant server, `posfair snapshot restore "
        f"--collection {name} --file FILE`), or re-ingest the collection (`posfair ingest PATH --collection {name} "
        f"--path NEW_FOLDER`)"
    )
    return f"{hint}; `posfair storage check {name} --path {root}` lists the damaged points and files" if check else hint


def is_file_failure(exc: BaseException) -> bool:
    """Whether a Qdrant Edge exception says its files failed (rather than that the request was wrong)."""
    if type(exc) is not Exception and not isinstance(exc, OSError):
        return False
    text = str(exc).lower()
    return isinstance(exc, OSError) or any(part in text for part in _FILE_FAILURES)


def damaged_path(message: str, folder: Path) -> Path:
    """The file or folder a Qdrant Edge message names under ``folder``; else the part of ``folder`` it is about.

    Example:
        >>> damaged_path("vector 3 is not readable from /s/c/shard/segments/x/vector_storage-node/vectors",
        ...              Path("/s/c/shard")).name
        'vectors'
    """
    named = re.findall(re.escape(str(folder)) + r"[^\s:,;'\"()]*", message)
    if named:
        return Path(max(named, key=len).rstrip("."))  # the most specific path Edge names
    text = message.lower()
    if any(part in text for part in _PAYLOAD_FAILURES):
        return one_segment(folder / "segments" / "*" / "payload_storage")
    if "vector" in text or "elements range" in text:  # Edge's vector storages (chunked memory maps)
        return one_segment(folder / "segments" / "*" / "vector_storage-*")
    return folder


def one_segment(path: Path) -> Path:
    """``<shard>/segments/*/<part>`` with the ``*`` replaced by the segment's name when the shard has only one."""
    if path.parent.name != "*":
        return path
    segments = [p for p in path.parent.parent.glob("*") if p.is_dir()]
    return segments[0] / path.name if len(segments) == 1 else path


def damaged_message(what: str, exc: BaseException, folder: Path, root: Path, collection: str | None) -> str:
    """``cannot WHAT: <Edge's words> (file: PATH); <fix>``."""
    text = str(exc).replace(_EDGE_PREFIX, "").strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    where = damaged_path(str(exc), folder)
    return (
        f"cannot {what}: {first} (damaged: {where}). The store's files are damaged or were changed by hand; "
        f"{recovery_hint(root, collection)}"
    )


@contextlib.contextmanager
def storage_errors(what: str, folder: Path, root: Path, collection: str | None = None) -> Iterator[None]:
    """Raise Qdrant Edge's file failures inside the block as :class:`StorageDamagedError`.

    Args:
        what: the operation, for the message (``"read collection 'docs'"``).
        folder: the folder the operation reads (a collection's shard folder).
        root: the store's folder (for the fix).
        collection: the collection's name (for the fix).

    Raises:
        StorageDamagedError: the block raised a file failure (:func:`is_file_failure`); other errors pass.
    """
    try:
        yield
    except StorageDamagedError:
        raise
    except Exception as exc:
        if not is_file_failure(exc):
            raise
        message = damaged_message(what, exc, folder, root, collection)
        raise StorageDamagedError(message, damaged_path(str(exc), folder)) from exc
