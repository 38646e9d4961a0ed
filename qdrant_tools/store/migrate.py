"""Convert a folder written by qdrant-client's local mode into the embedded Qdrant Edge store.

Local mode (``QdrantClient(path=...)``) was posfair's embedded store before
Qdrant Edge; its folders hold ``meta.json`` and ``collection/<name>/storage.sqlite``.
:func:`migrate_local_storage` reads every collection through qdrant-client
(vectors, multivectors and payloads, page by page) and writes it to a new
:class:`EdgeStore`, checks the point counts, builds the index, and only then
swaps the folders (the old one is kept as ``<folder>.local-backup``). A crash
part-way leaves the old folder untouched; run it again. Payload indexes are
not copied (local mode keeps none); the next ``posfair ingest`` adds posfair's.

Example:
    >>> counts = migrate_local_storage(".posfair/qdrant")      # doctest: +SKIP
    >>> counts                                                  # doctest: +SKIP
    {'demo': 216}
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from qdrant_client import models

from qdrant_tools.store.edge_store import EdgeStore
from qdrant_tools.store.errors import NotAStoreError, StoreError
from qdrant_tools.store.layout import folder_kind
from qdrant_tools.store.open import open_store

BACKUP_SUFFIX = ".local-backup"
_TMP_SUFFIX = ".edge-migrating"


def _copy_collection(local: object, store: EdgeStore, name: str, batch_size: int) -> int:
    params = local.get_collection(name).config.params  # type: ignore[attr-defined]
    if params.sparse_vectors:
        raise StoreError(
            f"collection {name!r} has sparse vectors, which the embedded Qdrant Edge store does not support; "
            "keep it in local mode (open_store(path, backend='local')) or move it to a Qdrant server"
        )
    store.create_collection(name, vectors_config=params.vectors, on_disk_payload=params.on_disk_payload)
    offset, copied = None, 0
    while True:
        page, offset = local.scroll(  # type: ignore[attr-defined]
            name, limit=batch_size, offset=offset, with_payload=True, with_vectors=True
        )
        if page:
            store.upsert(name, [models.PointStruct(id=p.id, vector=p.vector, payload=p.payload) for p in page])
            copied += len(page)
        if offset is None:
            break
    stored = store.count(name, exact=True).count
    if stored != copied:  # pragma: no cover - would be an engine bug
        raise StoreError(
            f"collection {name!r}: copied {copied} points but the new store holds {stored}; nothing swapped"
        )
    return copied


def migrate_local_storage(
    source: str | Path, target: str | Path | None = None, *, batch_size: int = 512, show_progress: bool = False
) -> dict[str, int]:
    """Copy every collection of a local-mode folder into a Qdrant Edge store.

    Args:
        source: the local-mode folder.
        target: the new store's folder; default: ``source`` itself, converted in place
            (the old folder is renamed to ``<source>.local-backup``).
        batch_size: points per page read and per write.
        show_progress: print index-building progress on stderr.

    Returns:
        Collection name -> points copied.

    Raises:
        NotAStoreError: ``source`` is not a local-mode folder, or ``target`` / the backup path is taken.
        StoreLockedError: a process has ``source`` open.
    """
    source = Path(source)
    if folder_kind(source) != "legacy-local":
        raise NotAStoreError(
            f"{str(source)!r} is not a folder of qdrant-client's local mode (no meta.json); nothing to migrate"
        )
    in_place = target is None
    dest = source.with_name(source.name + _TMP_SUFFIX) if in_place else Path(target)  # type: ignore[arg-type]
    backup = source.with_name(source.name + BACKUP_SUFFIX)
    if in_place and backup.exists():
        raise NotAStoreError(f"{str(backup)!r} exists; move it away first (it is an earlier backup)")
    if in_place and folder_kind(dest) == "store":
        shutil.rmtree(dest)  # an interrupted earlier migration
    if folder_kind(dest) not in ("missing", "empty"):
        raise NotAStoreError(f"target {str(dest)!r} exists and is not empty; pass a new folder")
    local = open_store(source, backend="local", must_exist=True)
    try:
        with EdgeStore.open(dest) as store:
            names = [c.name for c in local.get_collections().collections]
            counts = {n: _copy_collection(local, store, n, batch_size) for n in names}
            for n in names:
                store.build_index(n, show_progress=show_progress)
    finally:
        local.close()
    if in_place:
        os.rename(source, backup)
        os.rename(dest, source)
    return counts
