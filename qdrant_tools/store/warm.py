"""Warm a collection's files into the page cache when a reader opens it, so its first queries are not slow.

Qdrant Edge memory-maps what it keeps on disk and drops those pages from the operating system's cache when it
closes a shard, so the first queries after an open would read them from disk one fault at a time.
:func:`warm_files` reads a shard's files once, in order, within a byte budget (by default half the memory the
kernel reports available): first what every search touches (HNSW graphs, quantized copies, the sparse inverted
index, id trackers, payload indexes, small metadata files), then the float originals and payloads that
re-scoring and results read, last the storages searched neither way; never the write-ahead log or the raw
sparse vectors. :class:`qdrant_tools.store.EdgeStore` runs it when a store opened with ``warm=True`` loads a
collection (docs/storage.md, "Warming on open").

Example:
    >>> report = warm_files(Path("store/collections/docs/shard"), skip=set(), last=set())  # doctest: +SKIP
    >>> report.bytes_read, report.skipped_bytes                                              # doctest: +SKIP
    (1843200000, 0)
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

__all__ = ["WarmReport", "available_memory", "warm_files", "warm_order"]

_READ = 8 << 20
_WAL = "wal"
#: Shard components every search touches (rank 0), by the start of their folder or file name.
_HOT = ("vector_index-", "id_tracker", "payload_index")


@dataclass(frozen=True)
class WarmReport:
    """What :func:`warm_files` did: bytes read into the page cache, bytes left out by the budget, seconds."""

    files: int
    bytes_read: int
    skipped_bytes: int
    seconds: float


def available_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """``MemAvailable`` in bytes (Linux), or ``None`` where the kernel does not report it."""
    try:
        with open(meminfo, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _rank(path: Path, shard: Path, last: Collection[str]) -> int:
    """0: every search touches it; 1: re-scoring and results read it; 2: read last (see the module docstring)."""
    parts = path.relative_to(shard).parts
    component = parts[2] if len(parts) > 2 and parts[0] == "segments" else ""
    if component.startswith(_HOT) or "quantized" in path.name or not component:
        return 0
    return 2 if component in last else 1


def warm_order(shard: Path, skip: Collection[str], last: Collection[str]) -> list[Path]:
    """The files of ``shard`` in the order :func:`warm_files` reads them (most used first, then smaller first).

    Args:
        shard: a Qdrant Edge shard folder (it holds ``segments/`` and ``wal/``).
        skip: segment components never read (``vector_storage-NAME`` of a raw sparse vector).
        last: segment components read after every other file.
    """
    files = []
    for path in shard.rglob("*"):
        parts = path.relative_to(shard).parts
        if parts[0] == _WAL or not path.is_file():
            continue
        if len(parts) > 2 and parts[0] == "segments" and parts[2] in skip:
            continue
        files.append(path)
    return sorted(files, key=lambda p: (_rank(p, shard, last), p.stat().st_size, str(p)))


def warm_files(
    shard: Path, skip: Collection[str], last: Collection[str], budget_bytes: int | None = None
) -> WarmReport:
    """Read the files of ``shard`` (:func:`warm_order`) into the page cache until ``budget_bytes`` are read.

    Args:
        shard: a Qdrant Edge shard folder.
        skip: segment components never read; ``last``: read after the rest (see :func:`warm_order`).
        budget_bytes: the most bytes read (default: half of :func:`available_memory`; nothing where it is
            unknown). A file that would pass the budget is left out, and the smaller ones after it still fit.

    Returns:
        A :class:`WarmReport`. A file that vanishes meanwhile (a segment merged away) is passed over.
    """
    if budget_bytes is None:
        budget_bytes = (available_memory() or 0) // 2
    t0 = time.perf_counter()
    read = skipped = files = 0
    for path in warm_order(shard, skip, last):
        try:
            size = path.stat().st_size
            if read + size > budget_bytes:
                skipped += size
                continue
            with open(path, "rb", buffering=0) as f:
                while chunk := f.read(_READ):
                    read += len(chunk)
            files += 1
        except FileNotFoundError:
            continue
    return WarmReport(files, read, skipped, time.perf_counter() - t0)
