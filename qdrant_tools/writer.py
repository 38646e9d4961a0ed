"""The one Qdrant writer of posfair ingestion (single-process and Ray alike).

:class:`QdrantWriter` owns every call ingestion makes to Qdrant: it creates the collection from a
:class:`qdrant_tools.spec.CollectionSpec` (payload indexes included), checks the named-vector schema before
any write (:func:`qdrant_tools.compat.check_writable`), reads the stored state in one scroll (the input of
:func:`qdrant_tools.plan.plan_ingestion`), writes columnar ``models.Batch`` upserts with ``wait=True``
through the transient-only retries of :mod:`qdrant_tools.retry` (a :class:`~qdrant_tools.retry.RetryingClient`
given is unwrapped, so retries never nest), and deletes a document's stale versions by filter once the
caller says its new version is complete.

It uses only ``collection_exists``, ``create_collection``, ``get_collection``, ``upsert``, ``scroll``,
``count``, ``delete`` and ``create_payload_index`` (and ``build_index`` where the store's traits say it
builds its index on request: :func:`qdrant_tools.store.protocol.store_traits`), so any store with
qdrant-client's method names can stand behind it (:func:`qdrant_tools.store.open_store`).
:class:`PointBatch` carries, per vector name, dense rows or multivectors, and sparse vectors beside them.

qdrant-client's ``upload_points`` / ``upload_collection`` are not used: they retry every exception (a 400
too) with their own count and give no hook after each confirmed batch, where completed documents drop their
stale versions.

Example:
    >>> import numpy as np
    >>> from qdrant_client import QdrantClient
    >>> from qdrant_tools.spec import CollectionSpec, VectorConfig
    >>> spec = CollectionSpec(name="demo", vectors=[VectorConfig(name="calibrated", size=4)])
    >>> writer = QdrantWriter(QdrantClient(":memory:"), spec)
    >>> writer.ensure()
    True
    >>> batch = PointBatch(ids=["00000000-0000-0000-0000-000000000001"], payloads=[{"text": "hi"}],
    ...                    vectors={"calibrated": np.ones((1, 4), dtype=np.float32)})
    >>> writer.upsert(batch)
    1
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from qdrant_client import models

from qdrant_tools import payload as P
from qdrant_tools.compat import check_writable
from qdrant_tools.metadata import read_metadata
from qdrant_tools.plan import StoredVersion
from qdrant_tools.retry import RetryingClient, RetryPolicy, acall_with_retry
from qdrant_tools.scroll import scroll_pages
from qdrant_tools.spec import (
    CollectionMismatchError,
    CollectionSpec,
    SparseVectorConfig,
    VectorConfig,
    create_payload_indexes,
)
from qdrant_tools.store.protocol import StoreLike, store_traits

_SCROLL_PAGE = 2048

#: Points written by posfair carry a payload format (format 1 top-level, format 2 in ``_posfair``); other
#: points in a collection are never touched.
_IS_POSFAIR = models.Filter(
    should=[
        models.FieldCondition(key=P.FORMAT_KEY, range=models.Range(gte=2)),
        models.FieldCondition(key=P.FORMAT_1, range=models.Range(gte=1)),
    ]
)


def _doc_filter(doc_id: str) -> list[Any]:
    return [models.FieldCondition(key=P.DOC_ID, match=models.MatchValue(value=doc_id)), _IS_POSFAIR]


@dataclass(frozen=True)
class PointBatch:
    """Points to write in one ``upsert``.

    Args:
        ids: point ids (:func:`qdrant_tools.ids.point_id`).
        payloads: one payload per point (:func:`qdrant_tools.payload.build_payload`).
        vectors: vector name -> an ``(n, size)`` array, or ``n`` per-point
            vectors, each 1-D (dense) or 2-D (a multivector: rows of ``size``).
        sparse: sparse vector name -> ``n`` ``models.SparseVector`` s (one per point).
    """

    ids: Sequence[str]
    payloads: Sequence[dict[str, Any]]
    vectors: Mapping[str, Any]
    sparse: Mapping[str, Sequence[models.SparseVector]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def written_chunks(self) -> list[tuple[str, int, int]]:
        """``(doc_id, chunk_index, n_chunks)`` of every point, for :class:`qdrant_tools.plan.CompletionTracker`."""
        fields = [P.posfair_fields(p) for p in self.payloads]
        return [(f[P.DOC_ID], int(f[P.CHUNK_INDEX]), int(f[P.N_CHUNKS])) for f in fields]


def vector_rows(name: str, value: Any, n: int, size: int) -> list[Any]:
    """The ``n`` vectors of vector ``name`` as lists (dense rows or multivectors), checked against ``size``.

    Raises:
        ValueError: wrong number of points or a vector whose last dimension is not ``size``.
    """
    if isinstance(value, np.ndarray) and value.dtype != object and value.ndim in (2, 3):
        rows = list(np.asarray(value, dtype=np.float32))
    else:
        rows = [np.asarray(v, dtype=np.float32) for v in value]
    if len(rows) != n:
        raise ValueError(f"vector {name!r} has {len(rows)} entries for {n} points; give one vector per point")
    for row in rows:
        if row.ndim not in (1, 2) or row.shape[-1] != size or row.size == 0:
            raise ValueError(
                f"vector {name!r} got an entry of shape {row.shape}, expected ({size},) for a dense vector "
                f"or (k, {size}) for a multivector; check the encoder behind {name!r}"
            )
    return [row.tolist() for row in rows]


def sparse_rows(name: str, value: Sequence[Any], n: int) -> list[models.SparseVector]:
    """The ``n`` sparse vectors of sparse vector ``name``, checked.

    Raises:
        ValueError: wrong number of points, or an entry that is not a ``models.SparseVector``.
    """
    rows = list(value)
    if len(rows) != n:
        raise ValueError(f"sparse vector {name!r} has {len(rows)} entries for {n} points; give one per point")
    bad = next((r for r in rows if not isinstance(r, models.SparseVector)), None)
    if bad is not None:
        raise ValueError(
            f"sparse vector {name!r} got a {type(bad).__name__}; give models.SparseVector(indices=..., values=...) "
            "per point, e.g. qdrant_tools.sparse.Bm25Sparse().embed_documents(texts)"
        )
    return rows


def spec_for_vectors(
    collection: str,
    vectors: Sequence[VectorConfig] | Mapping[str, int],
    base: CollectionSpec | None = None,
    metadata: Mapping[str, Any] | None = None,
    sparse: Sequence[SparseVectorConfig] = (),
) -> CollectionSpec:
    """The collection spec an ingestion writes to: ``base`` if given (checked), else one built from the encoders.

    Args:
        collection: collection name.
        vectors: the vectors the run writes (:meth:`qdrant_tools.encoding.PointEncoding.vector_configs`),
            or ``{name: size}`` for dense vectors only.
        base: an operator's spec (HNSW, quantization, shards, indexes ...); it
            must name ``collection`` and hold every vector with the encoder's size and kind.
        metadata: collection metadata the run records (merged over ``base``'s).
        sparse: the sparse vectors the run writes (added to ``base``'s).

    Raises:
        CollectionMismatchError: ``base`` lacks a vector or gives it another size or kind.
        ValueError: ``base`` names another collection.
    """
    if isinstance(vectors, Mapping):
        vectors = [VectorConfig(name=n, size=d) for n, d in vectors.items()]
    if base is None:
        return CollectionSpec(
            name=collection,
            vectors=tuple(vectors),
            metadata=dict(metadata) if metadata else None,
            sparse_vectors=tuple(sparse),
        )
    if metadata:
        base = base.model_copy(update={"metadata": {**(base.metadata or {}), **metadata}})
    missing = [v for v in sparse if v.name not in {s.name for s in base.sparse_vectors}]
    if missing:
        base = base.model_copy(update={"sparse_vectors": (*base.sparse_vectors, *missing)})
    if base.name != collection:
        raise ValueError(f"the spec describes collection {base.name!r} but the ingestion writes {collection!r}")
    have = {v.name: (v.size, v.multivector) for v in base.vectors}
    for v in vectors:
        if have.get(v.name) != (v.size, v.multivector):
            kind = "multivector" if v.multivector else "dense vector"
            raise CollectionMismatchError(
                f"spec {base.name!r} has vectors {sorted(have)}, but the run writes {v.name!r} as a {kind} of size "
                f"{v.size}; fix the spec's vectors or the vector names (--vector-name)"
            )
    return base


class QdrantWriter:
    """Every Qdrant call of an ingestion run (see the module docstring).

    Args:
        client: a ``QdrantClient`` (embedded or server), or a store with its method names.
        spec: the collection; its vectors are the ones this writer writes.
        descriptions: vector name -> encoder description, for schema errors.
        retry: backoff of every call (transient network errors only).
        ordering: write ordering of upserts (``"weak"``, ``"medium"``, ``"strong"``); None = server default.
        sleep: injectable sleep of the retries (tests).

    Example:
        >>> from qdrant_client import QdrantClient
        >>> from qdrant_tools.spec import CollectionSpec, VectorConfig
        >>> w = QdrantWriter(QdrantClient(":memory:"), CollectionSpec(name="d", vectors=[VectorConfig(name="v", size=8)]))
        >>> w.check(), w.ensure(), w.read_state()
        (False, True, {})
    """

    def __init__(
        self,
        client: StoreLike,
        spec: CollectionSpec,
        *,
        descriptions: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        ordering: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        inner = client.wrapped if isinstance(client, RetryingClient) else client
        self.retry = retry or RetryPolicy()
        self.client = RetryingClient(inner, self.retry, sleep=sleep)
        self.spec = spec
        self.descriptions = dict(descriptions or {})
        self.ordering = models.WriteOrdering(ordering) if ordering else None

    @property
    def collection(self) -> str:
        return self.spec.name

    def check(self) -> bool:
        """Check that this writer may use the live collection; return whether it exists.

        Raises:
            CollectionMismatchError: see :func:`qdrant_tools.compat.check_writable` (nothing is written).
        """
        return check_writable(self.client, self.spec, self.descriptions)

    def ensure(self) -> bool:
        """Check the collection, create it from the spec if missing, and create missing payload indexes.

        Returns:
            True if the collection was created.

        Raises:
            CollectionMismatchError: see :meth:`check` (raised before any write).
        """
        created = not self.check()
        if created:
            self.client.create_collection(self.collection, **self.spec.create_kwargs())
            missing = list(self.spec.payload_indexes)
        else:
            self._record_missing_metadata()
            schema = self.client.get_collection(self.collection).payload_schema or {}
            missing = [i for i in self.spec.payload_indexes if i.field not in schema]
        create_payload_indexes(self.client, self.collection, missing)
        return created

    def _record_missing_metadata(self) -> None:
        """A collection written before it recorded metadata (or by another writer) learns the missing keys."""
        stored = read_metadata(self.client, self.collection)
        missing = {k: v for k, v in (self.spec.metadata or {}).items() if k not in stored}
        if missing:
            self.client.update_collection(self.collection, metadata=missing)

    def read_state(self) -> dict[str, dict[str, StoredVersion]]:
        """``doc_id -> version -> StoredVersion`` of the posfair points, in one scroll ({} without a collection)."""
        if not self.client.collection_exists(self.collection):
            return {}
        chunks: dict[tuple[str, str], set[int]] = defaultdict(set)
        totals: dict[tuple[str, str], int] = {}
        sources: dict[tuple[str, str], str] = {}
        fields = P.payload_fields(P.DOC_ID, P.VERSION, P.N_CHUNKS, P.CHUNK_INDEX, P.SOURCE)
        pages = scroll_pages(
            self.client,
            self.collection,
            page=_SCROLL_PAGE,
            with_payload=models.PayloadSelectorInclude(include=fields),
            scroll_filter=models.Filter(must=[_IS_POSFAIR]),
        )
        for pl in (P.posfair_fields(p.payload) for page in pages for p in page):
            if P.DOC_ID not in pl or P.VERSION not in pl:
                continue
            key = (pl[P.DOC_ID], pl[P.VERSION])
            chunks[key].add(int(pl.get(P.CHUNK_INDEX, -1)))
            totals[key] = int(pl.get(P.N_CHUNKS, 0))
            if isinstance(pl.get(P.SOURCE), str):
                sources[key] = pl[P.SOURCE]
        state: dict[str, dict[str, StoredVersion]] = defaultdict(dict)
        for (doc_id, version), idx in chunks.items():
            key = (doc_id, version)
            state[doc_id][version] = StoredVersion(frozenset(idx), totals[key], sources.get(key))
        return dict(state)

    def upsert(self, batch: PointBatch) -> int:
        """Write ``batch`` with ``upsert(wait=True)`` (retried on transient errors); return its size.

        Raises:
            ValueError: a vector name the spec does not have, vectors of the wrong shape, or a sparse
                vector named like a dense one (before the call).
        """
        n = len(batch.ids)
        if n == 0:
            return 0
        self.client.upsert(
            self.collection,
            points=self.points_of(batch),
            wait=True,
            **({"ordering": self.ordering} if self.ordering else {}),
        )
        return n

    async def aupsert(self, aclient: Any, batch: PointBatch) -> int:
        """:meth:`upsert` through ``aclient`` (an ``AsyncQdrantClient`` or the async store), with the same retries.

        Raises:
            ValueError: see :meth:`upsert` (before the call).
        """
        n = len(batch.ids)
        if n == 0:
            return 0
        points = self.points_of(batch)
        ordering = {"ordering": self.ordering} if self.ordering else {}
        await acall_with_retry(aclient.upsert, self.collection, points=points, wait=True, policy=self.retry, **ordering)
        return n

    async def aensure(self, aclient: Any) -> bool:
        """Create the collection from the spec, with its payload indexes, in ``aclient``'s store if it lacks it (an
        app may give the async methods a store of their own); return whether it was created."""
        if await aclient.collection_exists(self.collection):
            return False
        await aclient.create_collection(self.collection, **self.spec.create_kwargs())
        with warnings.catch_warnings():  # local mode keeps no payload index and says so (create_payload_indexes)
            warnings.simplefilter("ignore")
            for index in self.spec.payload_indexes:
                kind = models.PayloadSchemaType(index.type)
                await aclient.create_payload_index(self.collection, index.field, kind, wait=True)
        return True

    def points_of(self, batch: PointBatch) -> models.Batch:
        """``batch`` as the ``points`` of an upsert (also sent by an ``AsyncQdrantClient``).

        Raises:
            ValueError: see :meth:`upsert`.
        """
        n = len(batch.ids)
        if len(batch.payloads) != n:
            raise ValueError(f"batch has {n} ids but {len(batch.payloads)} payloads; give one payload per point")
        sizes = {v.name: v.size for v in self.spec.vectors}
        unknown = sorted(set(batch.vectors) - set(sizes))
        if unknown:
            raise ValueError(f"vectors {unknown} are not in collection {self.collection!r} (it has {sorted(sizes)})")
        vectors = {name: vector_rows(name, value, n, sizes[name]) for name, value in batch.vectors.items()}
        clash = sorted(set(batch.sparse) & set(sizes))
        if clash:
            raise ValueError(f"sparse vectors {clash} are named like dense vectors of {self.collection!r}; rename them")
        vectors.update({name: sparse_rows(name, value, n) for name, value in batch.sparse.items()})
        return models.Batch(ids=list(batch.ids), vectors=vectors, payloads=list(batch.payloads))

    def delete_stale(self, doc_id: str, keep_version: str) -> int:
        """Delete a document's posfair points of every version but ``keep_version``; return how many."""
        keep = models.Filter(
            should=[
                models.FieldCondition(key=key, match=models.MatchValue(value=keep_version))
                for key in (P.VERSION_KEY, P.VERSION)  # format 2, format 1
            ]
        )
        return self._delete(models.Filter(must=_doc_filter(doc_id), must_not=[keep]))

    def delete_documents(self, doc_ids: Iterable[str]) -> int:
        """Delete every posfair point of ``doc_ids`` (prune); return how many."""
        return sum(self._delete(models.Filter(must=_doc_filter(d))) for d in doc_ids)

    def build_index(self, *, show_progress: bool = False) -> float:
        """Build the search index of what was written, where the store builds it on request; return seconds.

        A store whose traits say ``builds_index_on_request`` (the embedded Qdrant Edge store,
        :class:`qdrant_tools.store.EdgeStore`) indexes when asked, so an ingestion asks when it finishes;
        a server indexes in the background and local mode never does (both: 0.0, nothing called).
        See :func:`qdrant_tools.store.protocol.store_traits`.
        """
        if not store_traits(self.client).builds_index_on_request or not self.client.collection_exists(self.collection):
            return 0.0
        return float(self.client.wrapped.build_index(self.collection, show_progress=show_progress))

    def _delete(self, flt: models.Filter) -> int:
        n = self.client.count(self.collection, count_filter=flt, exact=True).count
        if n:
            self.client.delete(self.collection, points_selector=models.FilterSelector(filter=flt), wait=True)
        return n
