"""Build a small real store and damage it the ways disks and people do (for the damage and check tests).

What Qdrant Edge keeps for the collection ``c`` of :func:`tests.qdrant_tools.store.conftest.fill`::

    store.json, .store.lock
    collections/c/collection.json                     posfair's record of the collection
    collections/c/shard/edge_config.json              Edge's own settings (rewritten on every load)
    collections/c/shard/wal/first-index, open-N       the write-ahead log (32 MiB segments)
    collections/c/shard/segments/<uuid>/segment.json  a segment's state (rewritten on every load)
        mutable_id_tracker.mappings / .versions       point ids
        payload_storage/page_0.dat, tracker.dat, gaps.dat, bitmask.dat, config.json   payloads (LZ4 pages)
        vector_storage-node/vectors/chunk_0.mmap      the dense node vectors
        vector_storage-subchunks/vectors/chunk_0.mmap, offsets/chunk_0.mmap   the multivector
        payload_index/config.json, version.info
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from qdrant_tools.store import open_store
from tests.qdrant_tools.store.conftest import fill

COLLECTION = "c"


def make_store(root: Path) -> Path:
    """A store at ``root`` with collection ``c`` (60 points, ``node`` and ``subchunks`` vectors), closed twice so
    Edge's load-time rewrites are done."""
    with open_store(root) as store:
        fill(store, COLLECTION)
    with open_store(root) as store:
        assert store.count(COLLECTION).count == 60
    return root


def segment(root: Path) -> Path:
    """The collection's one segment folder."""
    (seg,) = (root / "collections" / COLLECTION / "shard" / "segments").iterdir()
    return seg


def overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def contents(root: Path) -> dict[str, object]:
    """Every file's content: JSON files parsed (Edge rewrites them with another key order on load), others'
    sha256; the lock file left out (it holds the pid of its last holder)."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name == ".store.lock":
            continue
        data = path.read_bytes()
        rel = os.fspath(path.relative_to(root))
        try:
            out[rel] = json.loads(data) if path.suffix == ".json" else hashlib.sha256(data).hexdigest()
        except ValueError:  # a damaged JSON file: compare its bytes
            out[rel] = hashlib.sha256(data).hexdigest()
    return out
