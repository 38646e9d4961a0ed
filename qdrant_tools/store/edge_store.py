"""The embedded store: Qdrant Edge shards behind qdrant-client's method names and models.

:class:`EdgeStore` is what :func:`qdrant_tools.store.open_store` returns for a
folder. It answers the qdrant-client calls posfair (and LlamaIndex's
``QdrantVectorStore``) make, with ``qdrant_client.models`` in and out:

=========================  ================================================================
collections                ``collection_exists``, ``get_collections``, ``create_collection``
                           (named vectors, multivectors, sparse vectors with IDF, HNSW,
                           quantization, optimizers),
                           ``get_collection``, ``delete_collection``, ``create_vector_name``
points                     ``upsert`` (``Batch`` or ``PointStruct`` s), ``upload_points``,
                           ``retrieve``, ``scroll``, ``count``, ``delete`` (ids or filter)
payload indexes            ``create_payload_index``, ``delete_payload_index``
queries                    ``query_points`` (vector / multivector / sparse vector, ``using``,
                           nested ``prefetch``, filter, RRF / DBSF fusion, formulas),
                           ``query_batch_points``,
                           ``query_points_groups``
=========================  ================================================================

Anything else qdrant-client offers raises :class:`UnsupportedCallError` naming the method and the
alternative. Each collection is one Edge shard under ``<folder>/collections/<name>``; every write is in
Edge's write-ahead log when the call returns. One process opens a folder at a time
(:mod:`qdrant_tools.store.lock`); within it, every open of one folder shares one engine (:mod:`.shared`).
A file Qdrant Edge cannot read raises :class:`StorageDamagedError` naming the file and the fix. New points
are searched exactly until they are indexed: in the background with ``auto_index``
(:mod:`qdrant_tools.store.indexer`), or at once by :meth:`EdgeStore.build_index`.

Example:
    >>> import tempfile
    >>> from qdrant_client import models
    >>> store = EdgeStore.open(tempfile.mkdtemp())
    >>> store.create_collection("demo", vectors_config={"node": models.VectorParams(size=2,
    ...                         distance=models.Distance.COSINE)})
    True
    >>> _ = store.upsert("demo", models.Batch(ids=[1, 2], vectors={"node": [[1, 0], [0, 1]]},
    ...                  payloads=[{"doc_id": "a"}, {"doc_id": "b"}]))
    >>> [p.id for p in store.query_points("demo", query=[0.9, 0.1], using="node").points]
    [1, 2]
    >>> store.close()
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import qdrant_edge as E
from qdrant_client import QdrantClient, models
from qdrant_client.http.models import QueryResponse  # models.QueryResponse is fastembed's

from qdrant_tools.store import folder as folders
from qdrant_tools.store import shared as sharing
from qdrant_tools.store.collection import WAL_FLUSH_BYTES, EdgeCollection
from qdrant_tools.store.config import CLUSTER_SETTINGS, CollectionRecord
from qdrant_tools.store.enums import to_edge
from qdrant_tools.store.errors import (
    LegacyStorageError,
    NotAStoreError,
    StorageDamagedError,
    StoreError,
    StoreNotFoundError,
    UnsupportedCallError,
    recovery_hint,
    storage_errors,
)
from qdrant_tools.store.filters import to_edge_filter
from qdrant_tools.store.groups import group_hits, payload_request
from qdrant_tools.store.ids import from_edge_id, to_edge_id
from qdrant_tools.store.indexer import DEFAULT_QUIET_S, AutoIndexer
from qdrant_tools.store.lock import FolderLock
from qdrant_tools.store.points import edge_points
from qdrant_tools.store.requests import batch_request, edge_order_by, edge_with_payload, query_request
from qdrant_tools.store.results import record, scored_point
from qdrant_tools.store.warm import WarmReport

logger = logging.getLogger(__name__)

_COMPLETED = models.UpdateResult(operation_id=None, status=models.UpdateStatus.COMPLETED)
_ALTERNATIVES = {
    "search": "query_points",
    "search_batch": "query_batch_points",
    "search_groups": "query_points_groups",
    "upload_collection": "upsert(models.Batch(...)) or upload_points",
    "update_collection": "create a new collection with the new settings and re-ingest",  # all but metadata
    "create_snapshot": "close the store and copy its folder",
    "recreate_collection": "delete_collection then create_collection",
    "recommend": "query_points",
}
#: Collections smaller than this are indexed in well under a second: no progress lines for them.
ANNOUNCE_INDEX_FROM = 5_000
_DEFAULT_ALTERNATIVE = "use a Qdrant server (url=...) or qdrant-client's local mode (open_store(path, engine='local'))"


def legacy_message(path: str | Path) -> str:
    """What to do with a folder written by qdrant-client's local mode."""
    path = Path(path)
    return (
        f"{str(path)!r} was written by qdrant-client's local mode (QdrantClient(path=...)), not by posfair's "
        "embedded store, Qdrant Edge. Read it as it is with open_store(path, engine='local'), or re-ingest into "
        "a new folder: `posfair ingest PATH --collection NAME --path NEW_FOLDER`"
    )


class EdgeStore:
    """Embedded Qdrant (one Qdrant Edge shard per collection) with qdrant-client's method names.

    Build it with :func:`qdrant_tools.store.open_store` (or :meth:`open` /
    :meth:`temporary`); close it with :meth:`close` or a ``with`` block.
    See the module docstring for the supported methods.

    Example:
        >>> with EdgeStore.temporary() as store:
        ...     store.collection_exists("demo")
        False
    """

    #: The store's traits (:class:`qdrant_tools.store.protocol.Store`): embedded Qdrant Edge, which keeps
    #: payload indexes and builds its search index when asked (:meth:`build_index`).
    kind = "edge"
    keeps_payload_indexes = True
    builds_index_on_request = True
    #: ``create_collection`` settings that a single embedded shard records but cannot honour.
    unverified_settings = CLUSTER_SETTINGS
    #: How far a collection's write-ahead log may grow between two flushes while points are written
    #: (:meth:`EdgeCollection.bound_wal`): a bulk load's log stays near this size instead of the data's.
    wal_flush_bytes = WAL_FLUSH_BYTES

    def __init__(self, shared: sharing.OpenFolder, *, warm: bool = False) -> None:
        self._shared = shared
        self._root = shared.root
        self._warm = warm
        self._closed = False
        self._leave = weakref.finalize(self, sharing.leave, shared)  # a handle never closed still leaves

    @property
    def _open(self) -> dict[str, EdgeCollection]:
        """The open collections of the folder's engine (shared by every handle on it)."""
        return self._shared.collections

    @property
    def _indexer(self) -> AutoIndexer | None:
        return self._shared.indexer

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        must_exist: bool = False,
        auto_index: bool = True,
        quiet_s: float = DEFAULT_QUIET_S,
        warm: bool = False,
    ) -> EdgeStore:
        """Open (or create) the store at ``path`` and lock it for this process.

        ``auto_index`` indexes collections in the background after writes (see
        :mod:`qdrant_tools.store.indexer`; ``quiet_s``: the pause in writes a build waits for).
        ``warm``: when a collection is first used, read its files into the page cache (:meth:`warm`), so
        the first queries do not wait on the disk; for readers.

        Raises:
            StoreNotFoundError: ``must_exist`` and nothing is there.
            LegacyStorageError: a folder of qdrant-client's local mode (the message says how to migrate).
            NotAStoreError: a folder with other files.
            StorageDamagedError: ``store.json`` is missing (the folder holds collections) or unreadable.
            StoreLockedError: another process has it open.

        A folder this process has open already is not opened twice: the new store shares its engine
        (:mod:`.shared`), and the engine closes with the last of them. The engine's background indexer
        starts with the first open that asks for it and then serves every store on the folder (an
        ``auto_index=False`` open beside an ``auto_index=True`` one does not stop it).
        """
        root = Path(path)
        kind = folders.folder_kind(root)
        if kind == "unmarked-store":
            raise StorageDamagedError(folders.missing_marker_message(root), root / folders.MARKER)
        if kind == "legacy-local":
            raise LegacyStorageError(legacy_message(path))
        if kind == "other":
            raise NotAStoreError(
                f"{str(path)!r} exists and is not an embedded Qdrant store (it holds other files); "
                "pass a new or empty folder (--path)"
            )
        if must_exist and kind != "store":
            raise StoreNotFoundError(
                f"no embedded Qdrant storage at {str(path)!r}; run `posfair ingest PATH --collection NAME` first "
                "(or pass --path / --qdrant-url)"
            )
        root.mkdir(parents=True, exist_ok=True)
        shared = sharing.join(root, lambda: _open_folder(root, kind))
        if auto_index:
            shared.start_indexer(quiet_s)
        return cls(shared, warm=warm)

    @classmethod
    def temporary(cls, *, auto_index: bool = True, quiet_s: float = DEFAULT_QUIET_S) -> EdgeStore:
        """A store in a fresh temporary folder, deleted by :meth:`close` (what ``open_store(":memory:")`` gives)."""
        root = Path(tempfile.mkdtemp(prefix="posfair-store-"))
        folders.init_store(root)
        shared = sharing.OpenFolder(root, FolderLock.acquire(root), temporary=True, users=1)
        if auto_index:
            shared.start_indexer(quiet_s)
        store = cls(shared)
        weakref.finalize(store, shutil.rmtree, root, True)  # removed even if never closed
        return store

    @property
    def path(self) -> Path:
        """The storage folder."""
        return self._root

    def close(self, **kwargs: Any) -> None:
        """Close this store (idempotent); the last store open on the folder in this process closes the engine:
        stops the background indexer, flushes and closes every shard, releases the folder.

        A background index build that is running is waited for (Qdrant Edge cannot
        cancel one); the shard is closed after it, whole.

        Raises:
            IndexBuildError: a background build failed and no call has raised it yet (the store is closed).
        """
        indexer = self._shared.indexer
        self._closed = True
        self._leave()  # once: a finalizer runs at most once
        if indexer is not None:
            indexer.raise_error()

    def __enter__(self) -> EdgeStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"EdgeStore({str(self._root)!r}, {state})"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or not (hasattr(QdrantClient, name) or name in _ALTERNATIVES):
            raise AttributeError(name)

        def unsupported(*args: Any, **kwargs: Any) -> Any:
            raise UnsupportedCallError(
                f"{name} is not supported by the embedded Qdrant Edge store; "
                f"{_ALTERNATIVES.get(name, _DEFAULT_ALTERNATIVE)}"
            )

        return unsupported

    def _collection(self, name: str, *, warm: bool | None = None) -> EdgeCollection:
        self._collection_guard()
        col = self._open.get(name)
        if col is not None:
            return col
        with self._shared.opening:
            col = self._open.get(name)
            if col is not None:  # opened by another store on the folder meanwhile
                return col
            col = self._open_collection(name)
        if self._warm if warm is None else warm:
            self._log_warm(name, col.warm())
        return col

    def _open_collection(self, name: str) -> EdgeCollection:
        """Open a collection of the folder into the engine.

        Raises:
            ValueError: no such collection.
            StorageDamagedError: its folder lacks ``collection.json``, or a file cannot be read.
        """
        folder = folders.collection_dir(self._root, name)
        if not self.collection_exists(name):
            if (folder / folders.SHARD).is_dir():
                path = folder / folders.COLLECTION_META
                raise StorageDamagedError(
                    f"{path} is missing: collection {name!r} has its data (shard/) but not its record. "
                    f"To recover, {recovery_hint(self._root, name)}",
                    path,
                )
            raise ValueError(f"Collection {name} not found (existing: {folders.list_collections(self._root)})")
        col = EdgeCollection.open(folder)
        if self._indexer is not None:
            try:
                with self._damage(name):
                    self._indexer.track(name, col.record, backlog=sharing.unindexed(col))
            except BaseException:
                col.shard.close()
                raise
        self._open[name] = col
        return col

    def _damage(self, name: str, what: str | None = None) -> Any:
        """Qdrant Edge's file failures in the block raised as :class:`StorageDamagedError` naming the file."""
        shard = folders.collection_dir(self._root, name) / folders.SHARD
        return storage_errors(what or f"read collection {name!r}", shard, self._root, name)

    def warm(self, collection_name: str, budget_bytes: int | None = None) -> WarmReport:
        """Read the collection's files into the operating system's page cache, most used first.

        Qdrant Edge memory-maps what it keeps on disk and drops it from the page cache when it closes, so
        the first queries after an open would read from disk page by page. See :mod:`qdrant_tools.store.warm`
        for what is read and in which order.

        Args:
            collection_name: an existing collection.
            budget_bytes: the most bytes read (default: half of the memory the kernel reports available).

        Returns:
            What was read and left out, and the seconds it took.
        """
        report = self._collection(collection_name, warm=False).warm(budget_bytes)
        self._log_warm(collection_name, report)
        return report

    @staticmethod
    def _log_warm(name: str, report: WarmReport) -> None:
        left = f", {report.skipped_bytes / 1e6:,.0f} MB left out by the budget" if report.skipped_bytes else ""
        logger.info("warmed collection %r: %.0f MB in %.1f s%s", name, report.bytes_read / 1e6, report.seconds, left)

    # ------------------------------------------------------------------ collections
    def get_collections(self, **kwargs: Any) -> models.CollectionsResponse:
        names = folders.list_collections(self._root)
        return models.CollectionsResponse(collections=[models.CollectionDescription(name=n) for n in names])

    def collection_exists(self, collection_name: str, **kwargs: Any) -> bool:
        folder = folders.collection_dir(self._root, collection_name)
        return (folder / folders.COLLECTION_META).is_file()

    def create_collection(self, collection_name: str, **kwargs: Any) -> bool:
        """Create a collection from qdrant-client's ``create_collection`` arguments (see :class:`CollectionRecord`).

        Raises:
            ValueError: it exists already, or neither ``vectors_config`` nor ``sparse_vectors_config``.
            UnsupportedCallError: custom sharding, ``init_from``, strict mode.
        """
        self._collection_guard()
        if self.collection_exists(collection_name):
            raise ValueError(f"Collection {collection_name} already exists; delete_collection it first")
        record = CollectionRecord.from_create_kwargs(kwargs)
        folder = folders.collection_dir(self._root, collection_name)
        self._open[collection_name] = EdgeCollection.create(folder, record)
        if self._indexer is not None:
            self._indexer.track(collection_name, record)
        return True

    def delete_collection(self, collection_name: str, **kwargs: Any) -> bool:
        self._collection_guard()
        if self._indexer is not None:
            self._indexer.forget(collection_name)  # waits for its running build
        col = self._open.pop(collection_name, None)
        if col is not None:
            col.close()
        folder = folders.collection_dir(self._root, collection_name)
        if not folder.exists():
            return False
        doomed = folder.with_name(f".deleting-{collection_name}")
        shutil.rmtree(doomed, ignore_errors=True)  # left by an interrupted earlier delete
        folder.rename(doomed)  # one rename: the collection is gone even if the removal is interrupted
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def create_vector_name(
        self, collection_name: str, vector_name: str, vector_name_config: Any, **kwargs: Any
    ) -> models.UpdateResult:
        """Add a named dense vector (or multivector) to a collection of named vectors; existing points lack it.

        Raises:
            UnsupportedCallError: a sparse vector, or a collection with one unnamed vector.
        """
        col = self._collection(collection_name)
        dense = getattr(vector_name_config, "dense", None)
        if dense is None or not isinstance(col.record.vectors, dict):
            raise UnsupportedCallError(
                "create_vector_name: the embedded store adds dense vectors to collections of named vectors only; "
                "create a new collection with every vector and re-ingest"
            )
        params = models.VectorParams(
            size=dense.size,
            distance=dense.distance,
            multivector_config=dense.multivector_config,
            datatype=dense.datatype,
        )
        col.add_vector(vector_name, params)
        return _COMPLETED

    def update_collection(self, collection_name: str, metadata: dict[str, Any] | None = None, **kwargs: Any) -> bool:
        """Update a collection's metadata (merged by top-level key, as a server does).

        Raises:
            UnsupportedCallError: any other setting (vectors, HNSW, optimizers, ...): the shard keeps its creation config.
        """
        changed = sorted(k for k, v in kwargs.items() if v is not None and k != "timeout")
        if changed:
            raise UnsupportedCallError(
                f"update_collection({', '.join(changed)}): the embedded Qdrant Edge store updates metadata only; "
                f"{_ALTERNATIVES['update_collection']}"
            )
        self._collection_guard()
        if metadata:
            self._collection(collection_name).set_metadata(dict(metadata))
        return True

    def get_collection(self, collection_name: str, **kwargs: Any) -> models.CollectionInfo:
        """The collection's configuration and counts; status YELLOW while a background index build is due or runs."""
        col = self._collection(collection_name)
        with self._damage(collection_name):
            info = col.info()
        if self._indexer is not None and self._indexer.busy(collection_name):
            info = info.model_copy(update={"status": models.CollectionStatus.YELLOW})
        return info

    def _collection_guard(self) -> None:
        if self._closed:
            raise StoreError(f"the store at {str(self._root)!r} is closed; open it again with open_store(path)")

    # ------------------------------------------------------------------ writes
    def _raise_index_error(self) -> None:
        if self._indexer is not None:
            self._indexer.raise_error()

    def _update(self, collection_name: str, op: Any) -> models.UpdateResult:
        self._raise_index_error()
        col = self._collection(collection_name)
        with self._damage(collection_name, f"write to collection {collection_name!r}"):
            col.shard.update(op)
        return _COMPLETED

    def upsert(
        self,
        collection_name: str,
        points: models.Batch | Iterable[models.PointStruct],
        wait: bool = True,
        update_filter: models.Filter | None = None,
        update_mode: models.UpdateMode | None = None,
        **kwargs: Any,
    ) -> models.UpdateResult:
        """Insert or replace points; in the WAL when it returns (``wait`` is always honoured).

        Once the collection's WAL has grown by :attr:`wal_flush_bytes` since the last flush, the shard is
        flushed, which lets Qdrant Edge delete the persisted part of the log (a bulk load's log stays bounded).

        Raises:
            ValueError: a vector name the collection lacks, or a sparse vector sent to a dense name
                (or the reverse); checked before anything is written.
        """
        self._raise_index_error()
        mode = to_edge(E.UpdateMode, update_mode) if update_mode is not None else None
        col = self._collection(collection_name)
        edge = edge_points(points, col.record)
        with self._damage(collection_name, f"write to collection {collection_name!r}"):
            col.shard.update(E.UpdateOperation.upsert_points(edge, to_edge_filter(update_filter), mode))
            col.bound_wal(self.wal_flush_bytes)
        if self._indexer is not None:
            self._indexer.written(collection_name, len(edge))
        return _COMPLETED

    def upload_points(
        self, collection_name: str, points: Iterable[models.PointStruct], batch_size: int = 64, **kwargs: Any
    ) -> None:
        """``upsert`` ``batch_size`` points at a time (``parallel``, ``max_retries`` are not needed here)."""
        batch: list[models.PointStruct] = []
        for p in points:
            batch.append(p)
            if len(batch) >= batch_size:
                self.upsert(collection_name, batch)
                batch = []
        if batch:
            self.upsert(collection_name, batch)

    def delete(
        self, collection_name: str, points_selector: Any, wait: bool = True, **kwargs: Any
    ) -> models.UpdateResult:
        """Delete points by ids (a list or ``PointIdsList``) or by filter (``Filter`` or ``FilterSelector``)."""
        if isinstance(points_selector, models.FilterSelector):
            points_selector = points_selector.filter
        if isinstance(points_selector, models.Filter):
            op = E.UpdateOperation.delete_points_by_filter(to_edge_filter(points_selector))
        else:
            ids = points_selector.points if isinstance(points_selector, models.PointIdsList) else points_selector
            op = E.UpdateOperation.delete_points([to_edge_id(i) for i in ids])
        return self._update(collection_name, op)

    def create_payload_index(
        self, collection_name: str, field_name: str, field_schema: Any = None, field_type: Any = None, **kwargs: Any
    ) -> models.UpdateResult:
        """Index a payload field (keyword, integer, float, geo, text, bool, datetime, uuid)."""
        schema = field_schema if field_schema is not None else field_type
        kind = getattr(schema, "type", schema)  # *IndexParams carry their type (their options are not applied)
        kind = getattr(kind, "value", kind)
        if kind is None:
            raise ValueError(f"create_payload_index({field_name!r}) needs field_schema, e.g. 'keyword'")
        op = E.UpdateOperation.create_field_index(
            field_name, to_edge(E.PayloadSchemaType, models.PayloadSchemaType(kind))
        )
        return self._update(collection_name, op)

    def delete_payload_index(self, collection_name: str, field_name: str, **kwargs: Any) -> models.UpdateResult:
        return self._update(collection_name, E.UpdateOperation.delete_field_index(field_name))

    # ------------------------------------------------------------------ reads
    def retrieve(
        self,
        collection_name: str,
        ids: Iterable[Any],
        with_payload: Any = True,
        with_vectors: Any = False,
        **kwargs: Any,
    ) -> list[models.Record]:
        shard = self._collection(collection_name).shard
        with self._damage(collection_name):
            found = shard.retrieve([to_edge_id(i) for i in ids], edge_with_payload(with_payload), with_vectors)
            return [record(r) for r in found]

    def scroll(
        self,
        collection_name: str,
        scroll_filter: models.Filter | None = None,
        limit: int = 10,
        order_by: Any = None,
        offset: Any = None,
        with_payload: Any = True,
        with_vectors: Any = False,
        **kwargs: Any,
    ) -> tuple[list[models.Record], Any]:
        """One page of points in id order (or ``order_by``); returns ``(points, next_page_offset)``."""
        request = E.ScrollRequest(
            offset=to_edge_id(offset) if offset is not None else None,
            limit=limit,
            filter=to_edge_filter(scroll_filter),
            with_payload=edge_with_payload(with_payload),
            with_vector=with_vectors,
            order_by=edge_order_by(order_by),
        )
        shard = self._collection(collection_name).shard
        with self._damage(collection_name):
            found, next_offset = shard.scroll(request)
        return [record(r) for r in found], (from_edge_id(next_offset) if next_offset is not None else None)

    def count(
        self, collection_name: str, count_filter: models.Filter | None = None, exact: bool = True, **kwargs: Any
    ) -> models.CountResult:
        request = E.CountRequest(exact=exact, filter=to_edge_filter(count_filter))
        shard = self._collection(collection_name).shard
        with self._damage(collection_name):
            return models.CountResult(count=shard.count(request))

    def query_points(self, collection_name: str, query: Any = None, **kwargs: Any) -> QueryResponse:
        """Score points with a vector, a multivector (MaxSim), a sparse vector, or a fusion / formula of prefetches.

        See :mod:`.requests`.

        Raises:
            ValueError: a ``using`` (here or in a prefetch) the collection lacks, or a sparse query on a
                dense vector (or the reverse).
            UnsupportedCallError: a query kind the embedded store lacks.
        """
        for ignored in ("shard_key_selector", "consistency", "timeout"):
            kwargs.pop(ignored, None)
        if kwargs.pop("lookup_from", None) is not None:
            raise UnsupportedCallError("query_points(lookup_from=...) is not supported by the embedded store")
        col = self._collection(collection_name)
        request = query_request(query=query, record=col.record, **kwargs)
        with self._damage(collection_name):
            hits = col.shard.query(request)
        return QueryResponse(points=[scored_point(p) for p in hits])

    def query_batch_points(
        self, collection_name: str, requests: Iterable[models.QueryRequest], **kwargs: Any
    ) -> list[QueryResponse]:
        col = self._collection(collection_name)
        batch = E.QueryBatchRequest([batch_request(r, col.record) for r in requests])
        with self._damage(collection_name):
            answers = col.shard.query_batch(batch)
        return [QueryResponse(points=[scored_point(p) for p in hits]) for hits in answers]

    def query_points_groups(
        self,
        collection_name: str,
        group_by: str,
        query: Any = None,
        limit: int = 10,
        group_size: int = 3,
        with_payload: Any = True,
        **kwargs: Any,
    ) -> models.GroupsResult:
        """The best ``limit`` groups of points sharing ``group_by``'s value, ``group_size`` hits each.

        Re-queries with a longer ranking until those groups are full or the ranking runs out (see :mod:`.groups`).
        """
        if kwargs.pop("with_lookup", None) is not None:
            raise UnsupportedCallError("query_points_groups(with_lookup=...) is not supported by the embedded store")
        selector, trim = payload_request(with_payload, group_by)
        fetch = max(limit * group_size, 1)
        while True:
            hits = self.query_points(collection_name, query, limit=fetch, with_payload=selector, **kwargs).points
            groups, complete = group_hits(hits, group_by, limit, group_size)
            if complete or len(hits) < fetch:
                break
            fetch *= 4
        for g in groups:
            for h in g.hits:
                h.payload = trim(h.payload)
        return models.GroupsResult(groups=groups)

    # ------------------------------------------------------------------ index
    def build_index(self, collection_name: str, *, show_progress: bool = False) -> float:
        """Build the HNSW index of points written since the last build (and merge small segments).

        Blocks until done (Qdrant Edge reports no progress while it works, so with
        ``show_progress`` a line on stderr says when it starts and ends, from
        :data:`ANNOUNCE_INDEX_FROM` points on). A background build of the same
        collection that is running is waited for first, never raced.
        Queries before it are exact; after it they use the index.

        Returns:
            Seconds taken (the wait for a running background build included).

        Raises:
            IndexBuildError: a background build failed before this call (raised once; call again to retry).
        """
        self._raise_index_error()
        col = self._collection(collection_name)
        lock = self._indexer.build_lock(collection_name) if self._indexer is not None else None
        if lock is None:
            return self._optimize(collection_name, col, show_progress)
        t0 = time.perf_counter()
        with lock:
            self._optimize(collection_name, col, show_progress)
        self._indexer.built(collection_name)  # type: ignore[union-attr]
        return time.perf_counter() - t0

    def wait_for_index(self, collection_name: str, timeout: float | None = None) -> bool:
        """Wait until the background indexer has no build running or due for a collection.

        Points below the collection's indexing threshold stay unindexed (searched exactly),
        as on a server. Without ``auto_index`` it returns at once.

        Returns:
            True when caught up, False when ``timeout`` seconds passed first.

        Raises:
            IndexBuildError: the background build failed.
        """
        self._collection(collection_name)
        done = self._indexer.wait(collection_name, timeout) if self._indexer is not None else True
        self._raise_index_error()
        return done

    def _optimize(self, collection_name: str, col: EdgeCollection, show_progress: bool) -> float:
        n = col.shard.info().points_count
        announce = show_progress and n >= ANNOUNCE_INDEX_FROM
        if announce:
            print(f"building the search index of {collection_name!r} ({n:,} points) ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        with self._damage(collection_name, f"index collection {collection_name!r}"):
            col.shard.optimize()
        seconds = time.perf_counter() - t0
        if announce:
            print(f"search index of {collection_name!r} ready in {seconds:.1f}s", file=sys.stderr, flush=True)
        return seconds


def _open_folder(root: Path, kind: str) -> sharing.OpenFolder:
    """Lock ``root`` for this process and check its marker (or create the store in an empty folder)."""
    lock = FolderLock.acquire(root)
    try:
        folders.read_marker(root) if kind == "store" else folders.init_store(root)
    except Exception:
        lock.release()
        raise
    return sharing.OpenFolder(root, lock)
