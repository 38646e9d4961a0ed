"""One collection of the embedded store: a Qdrant Edge shard plus its :class:`CollectionRecord`.

A collection is created in a hidden temporary folder (record written, shard
created and closed) and renamed into place in one step, so a crash during
creation leaves no half-made collection; it is opened lazily on first use.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from qdrant_client import models
    >>> rec = CollectionRecord.from_create_kwargs({"vectors_config": models.VectorParams(size=2,
    ...                                            distance=models.Distance.DOT)})
    >>> col = EdgeCollection.create(Path(tempfile.mkdtemp()) / "demo", rec)
    >>> col.shard.info().points_count
    0
    >>> col.close()
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qdrant_edge as E
from pydantic import ValidationError
from qdrant_client import models

from qdrant_tools.store.config import CollectionRecord
from qdrant_tools.store.enums import from_edge, to_edge
from qdrant_tools.store.errors import StorageDamagedError, recovery_hint, storage_errors
from qdrant_tools.store.folder import (
    COLLECTION_META,
    SHARD,
    fsync_dir,
    read_record_data,
    record_damage,
    write_json_atomic,
)
from qdrant_tools.store.warm import WarmReport, warm_files

#: How far a shard's write-ahead log may grow (bytes, the files' lengths) between two flushes while points are
#: written. Qdrant Edge deletes the log segments a flush has persisted, but it does not flush while points are
#: written, so without these flushes a bulk load keeps its whole log, larger than its segments, until the shard
#: closes.
WAL_FLUSH_BYTES = 256 * 2**20
WAL = "wal"


@dataclass
class EdgeCollection:
    """An open collection: its folder, its record and its Edge shard."""

    folder: Path
    record: CollectionRecord
    shard: E.EdgeShard
    #: The log's bytes after the last flush by :meth:`bound_wal` (0: none yet).
    _wal_floor: int = field(default=0, init=False, repr=False)

    @classmethod
    def create(cls, folder: Path, record: CollectionRecord) -> EdgeCollection:
        """Create the collection at ``folder`` (which must not exist) and open it."""
        tmp = folder.with_name(f".creating-{folder.name}-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        write_json_atomic(tmp / COLLECTION_META, record.model_dump(mode="json", exclude_none=True))
        E.EdgeShard.create(str(tmp / SHARD), record.edge_config()).close()
        os.rename(tmp, folder)
        fsync_dir(folder.parent)
        return cls.open(folder)

    @classmethod
    def open(cls, folder: Path) -> EdgeCollection:
        """Open an existing collection (replays its WAL if the last process did not close it).

        Raises:
            StorageDamagedError: ``collection.json`` or a file of the shard cannot be read (the message names
                it and the fix).
        """
        return cls(folder, read_record(folder), load_shard(folder))

    def add_vector(self, name: str, params: models.VectorParams) -> None:
        """Add a named dense vector (existing points lack it until re-written); idempotent.

        The shard learns it first, then ``collection.json``: a crash in between
        leaves a vector the record does not show yet, and a retry completes it.
        """
        multi = params.multivector_config
        self.shard.update(
            E.UpdateOperation.create_dense_vector(
                name,
                params.size,
                to_edge(E.Distance, params.distance),
                multivector_config=E.MultiVectorConfig(to_edge(E.MultiVectorComparator, multi.comparator))
                if multi
                else None,
                datatype=to_edge(E.VectorStorageDatatype, params.datatype) if params.datatype else None,
            )
        )
        vectors = {**self.record.named, name: params}
        self.record = self.record.model_copy(update={"vectors": vectors})
        write_json_atomic(self.folder / COLLECTION_META, self.record.model_dump(mode="json", exclude_none=True))

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the collection's metadata by top-level key, as ``update_collection`` does."""
        merged = {**(self.record.metadata or {}), **metadata}
        self.record = self.record.model_copy(update={"metadata": merged})
        write_json_atomic(self.folder / COLLECTION_META, self.record.model_dump(mode="json", exclude_none=True))

    def info(self) -> models.CollectionInfo:
        """``get_collection``'s answer: the record's configuration and the shard's live counts and indexes."""
        live = self.shard.info()
        schema = {
            key: models.PayloadIndexInfo(data_type=from_edge(models.PayloadSchemaType, i.data_type), points=i.points)
            for key, i in live.payload_schema.items()
        }
        rec = self.record
        return models.CollectionInfo(
            status=models.CollectionStatus.GREEN,
            optimizer_status=models.OptimizersStatusOneOf.OK,
            points_count=live.points_count,
            indexed_vectors_count=live.indexed_vectors_count,
            segments_count=live.segments_count,
            config=models.CollectionConfig(
                params=rec.params(),
                hnsw_config=rec.hnsw(),
                optimizer_config=rec.optimizers(),
                quantization_config=rec.quantization_config,
                metadata=rec.metadata,
            ),
            payload_schema=schema,
        )

    def close(self) -> None:
        """Flush and close the shard (a closed shard reopens without replaying its WAL)."""
        self.shard.flush()
        self.shard.close()

    def wal_bytes(self) -> int:
        """Bytes of the shard's write-ahead log (the lengths of its files; Edge opens its segments at full length)."""
        total = 0
        try:
            entries = list(os.scandir(self.folder / SHARD / WAL))
        except FileNotFoundError:  # a shard without a log
            return 0
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):  # a segment renamed or deleted by Edge meanwhile
                total += entry.stat().st_size
        return total

    def bound_wal(self, budget_bytes: int = WAL_FLUSH_BYTES) -> bool:
        """Flush the shard if its write-ahead log grew by more than ``budget_bytes`` since the last such flush.

        A flush persists the segments, and Edge then deletes the log segments they cover (all but the last
        closed one), so calling this after each write bounds the log at about ``budget_bytes`` plus three of
        its 32 MiB segments. Returns whether it flushed.
        """
        if self.wal_bytes() - self._wal_floor <= budget_bytes:
            return False
        self.shard.flush()
        self._wal_floor = self.wal_bytes()
        return True

    def warm(self, budget_bytes: int | None = None) -> WarmReport:
        """Read the shard's files into the page cache, as its searches use them (:mod:`qdrant_tools.store.warm`):
        the raw sparse vectors never, a vector searched neither through a graph nor a quantized copy last."""
        rec = self.record
        skip = {f"vector_storage-{name}" for name in rec.sparse}
        last = {f"vector_storage-{name}" for name, params in rec.named.items() if _scanned_only(params, rec)}
        return warm_files(self.folder / SHARD, skip, last, budget_bytes)


def store_root(folder: Path) -> Path:
    """The store folder of a collection folder (``<root>/collections/<name>``)."""
    return folder.parent.parent


def read_record(folder: Path) -> CollectionRecord:
    """A collection's :class:`CollectionRecord`, from its ``collection.json``.

    Raises:
        StorageDamagedError: the file is missing, not JSON, or not a record this version reads.
    """
    root = store_root(folder)
    data = read_record_data(folder, root)
    try:
        return CollectionRecord.model_validate(data)
    except ValidationError as exc:
        path = folder / COLLECTION_META
        problem = f"{exc.error_count()} invalid field(s), first {_first_error(exc)}"
        raise StorageDamagedError(record_damage(path, root, folder.name, problem), path) from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'the record'}: {err['msg']}"


def load_shard(folder: Path) -> E.EdgeShard:
    """Load a collection's Edge shard.

    Raises:
        StorageDamagedError: Qdrant Edge cannot read a file of it (the message names the file Edge names).
    """
    shard = folder / SHARD
    if not shard.is_dir():
        raise StorageDamagedError(
            f"{shard} is missing: collection {folder.name!r} has its record but no data. To recover, "
            f"{recovery_hint(store_root(folder), folder.name)}",
            shard,
        )
    with storage_errors(f"open collection {folder.name!r}", shard, store_root(folder), folder.name):
        return E.EdgeShard.load(str(shard))


def _scanned_only(params: models.VectorParams, record: CollectionRecord) -> bool:
    """Whether a vector has neither an HNSW graph (``m=0``) nor a quantized copy: only exact scans read it."""
    no_graph = params.hnsw_config is not None and params.hnsw_config.m == 0
    return no_graph and params.quantization_config is None and record.quantization_config is None
