"""One engine per embedded store folder in a process: every open of one path shares it.

An :class:`~qdrant_tools.store.EdgeStore` is a handle on an :class:`OpenFolder` (the folder's lock, its
open Qdrant Edge shards, its background indexer). :func:`join` gives every open of a folder this process has
open that engine, found by the folder's resolved path, and counts its users; :func:`leave` closes it with
the last one. Another process still gets "in use by process N" (docs/storage.md, "Several opens of one
folder in one process").

Example:
    >>> import tempfile
    >>> from qdrant_tools.store import open_store
    >>> folder = tempfile.mkdtemp()
    >>> a, b = open_store(folder), open_store(folder)
    >>> a.close(); b.collection_exists("demo")   # b still open: a's close left the engine to b
    False
    >>> b.close()
"""

from __future__ import annotations

import shutil
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qdrant_tools.store.collection import EdgeCollection
from qdrant_tools.store.indexer import DEFAULT_QUIET_S, AutoIndexer
from qdrant_tools.store.lock import FolderLock

_REGISTRY: dict[Path, OpenFolder] = {}
#: Re-entrant: a store collected while this thread holds it (inside :func:`join`) leaves through it.
_GUARD = threading.RLock()


@dataclass(eq=False)
class OpenFolder:
    """What the handles of one store folder share.

    Args:
        root: the store folder.
        lock: this process's lock on it.
        temporary: delete the folder when the engine closes (``open_store(":memory:")``).
    """

    root: Path
    lock: FolderLock
    temporary: bool = False
    collections: dict[str, EdgeCollection] = field(default_factory=dict)
    indexer: AutoIndexer | None = None
    users: int = 0
    #: Held while a collection is opened, so two handles never load one shard twice.
    opening: threading.RLock = field(default_factory=threading.RLock)
    key: Path | None = None

    def start_indexer(self, quiet_s: float = DEFAULT_QUIET_S) -> AutoIndexer:
        """The background indexer, started on the first open that asks for it (and tracking what is open)."""
        if self.indexer is None:
            self.indexer = AutoIndexer(_weak_optimizer(self), quiet_s=quiet_s)
            weakref.finalize(self, self.indexer.stop)  # an engine never closed still stops its worker
            for name, col in self.collections.items():
                self.indexer.track(name, col.record, backlog=unindexed(col))
        return self.indexer

    def close(self) -> None:
        """Stop the indexer, flush and close every shard, release the folder (delete it if temporary)."""
        if self.indexer is not None:
            self.indexer.stop()
        try:
            for col in self.collections.values():
                try:
                    col.close()
                except Exception:
                    if not self.temporary:  # a temporary folder is discarded (and may be gone already at exit)
                        raise
        finally:
            self.collections.clear()
            self.lock.release()
            if self.temporary:
                shutil.rmtree(self.root, ignore_errors=True)


def join(root: Path, open_new: Callable[[], OpenFolder]) -> OpenFolder:
    """The engine of ``root`` this process has open, else ``open_new()``'s; one more user of it.

    Raises:
        whatever ``open_new`` raises (the folder is locked by another process, damaged, ...).
    """
    key = root.resolve()
    with _GUARD:
        while True:
            shared = _REGISTRY.get(key)
            if shared is None:
                shared = open_new()
                shared.key, shared.users = key, 1
                _REGISTRY[key] = shared
                return shared
            shared.users += 1
            if _REGISTRY.get(key) is shared:  # else its last store was collected meanwhile and closed it
                return shared


def leave(shared: OpenFolder) -> None:
    """One user fewer; the last one closes the engine (and frees its path for a new open)."""
    with _GUARD:
        shared.users -= 1
        if shared.users > 0:
            return
        if shared.key is not None and _REGISTRY.get(shared.key) is shared:
            del _REGISTRY[shared.key]
        shared.close()


def open_here(root: str | Path) -> bool:
    """Whether this process has the store at ``root`` open (through :func:`open_store`)."""
    with _GUARD:
        return Path(root).resolve() in _REGISTRY


def unindexed(col: EdgeCollection) -> int:
    """Points of an opened collection not in an HNSW index yet (an estimate: Edge counts indexed vectors)."""
    info = col.shard.info()
    per_point = max(1, len(col.record.named))
    return max(0, info.points_count - info.indexed_vectors_count // per_point)


def _weak_optimizer(shared: OpenFolder) -> Any:
    """The indexer's step: ``optimize`` one collection (a weak reference: the worker keeps no engine alive)."""
    ref = weakref.ref(shared)

    def step(name: str) -> None:
        live = ref()
        col = live.collections.get(name) if live is not None else None
        if col is not None:  # None: deleted (or the engine closed) since the step was planned
            col.shard.optimize()

    return step
