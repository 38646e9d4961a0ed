"""Points to write (``models.Batch`` or ``PointStruct`` s) -> Qdrant Edge ``Point`` s.

A point's vectors may be dense (a list), multivectors (a list of lists) and
sparse (``models.SparseVector``), by name. Given the collection's
:class:`~qdrant_tools.store.config.CollectionRecord`, every name is checked
against the collection first, so a sparse vector sent to a dense name (or the
reverse, or an unknown name) raises a ``ValueError`` naming the vector and
the fix before anything is written.

Example:
    >>> from qdrant_client import models
    >>> pts = edge_points(models.Batch(ids=[1], vectors={"node": [[0.5, 0.5]]}, payloads=[{"k": "v"}]))
    >>> pts[0].id, pts[0].payload
    (1, {'k': 'v'})
    >>> edge_points([models.PointStruct(id=2, vector={"bm25": models.SparseVector(indices=[7], values=[1.5])})])[
    ...     0].vector["bm25"].indices
    [7]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import qdrant_edge as E
from qdrant_client import models

from qdrant_tools.store.config import UNNAMED, CollectionRecord
from qdrant_tools.store.errors import UnsupportedCallError
from qdrant_tools.store.ids import to_edge_id


def edge_sparse_vector(name: str, v: models.SparseVector) -> E.SparseVector:
    """A qdrant-client ``SparseVector`` as Qdrant Edge's.

    Raises:
        ValueError: indices and values of different lengths, or an index twice (Qdrant refuses both;
            Qdrant Edge 0.9.0 would store a repeated index as it is).
    """
    indices = [int(i) for i in v.indices]
    if len(indices) != len(v.values):
        raise ValueError(
            f"sparse vector {name!r} has {len(indices)} indices but {len(v.values)} values; give one value per index"
        )
    if len(set(indices)) != len(indices):
        twice = sorted({i for i in indices if indices.count(i) > 1})[:5]
        raise ValueError(
            f"sparse vector {name!r} has repeated indices {twice}; give each index once (add up its values)"
        )
    return E.SparseVector(indices, [float(x) for x in v.values])


def _vec(name: str, v: Any) -> Any:
    if isinstance(v, models.SparseVector):
        return edge_sparse_vector(name, v)
    if isinstance(v, np.ndarray):
        return v.astype(np.float32, copy=False).tolist()
    if isinstance(v, list):
        return v
    raise UnsupportedCallError(
        f"vector {name!r} of type {type(v).__name__} is not supported by the embedded store (dense vectors, "
        "multivectors and models.SparseVector only); server-side inference (models.Document) needs a Qdrant "
        "server: compute the vector client-side instead, e.g. BM25 with qdrant_tools.sparse.Bm25Sparse"
    )


def _struct(vector: Any) -> Any:
    """A point's vector(s): a bare list (the unnamed vector) or ``{name: vector, multivector or sparse vector}``."""
    if isinstance(vector, dict):
        return {name: _vec(name, v) for name, v in vector.items() if v is not None}
    return _vec(UNNAMED, vector)


def _check_names(vectors: Iterable[Any], record: CollectionRecord | None) -> None:
    """Check each (name, sparse or not) that ``vectors`` use against the collection, once per pair."""
    if record is None:
        return
    seen: set[tuple[str, bool]] = set()
    for vector in vectors:
        items = vector.items() if isinstance(vector, dict) else [(UNNAMED, vector)]
        for name, v in items:
            key = (name, isinstance(v, models.SparseVector))
            if v is not None and key not in seen:
                seen.add(key)
                record.check_vector(name, sparse=key[1], where="upsert")


def _batch_points(batch: models.Batch, record: CollectionRecord | None) -> list[E.Point]:
    n = len(batch.ids)
    payloads = list(batch.payloads) if batch.payloads is not None else [None] * n
    if isinstance(batch.vectors, dict):
        columns = {name: list(rows) for name, rows in batch.vectors.items()}
        for name, rows in columns.items():
            if len(rows) != n:
                raise ValueError(f"Batch has {n} ids but {len(rows)} vectors named {name!r}; give one per id")
        per_point = [{name: rows[i] for name, rows in columns.items()} for i in range(n)]
    else:
        per_point = list(batch.vectors)
    if len(per_point) != n or len(payloads) != n:
        raise ValueError(f"Batch has {n} ids, {len(per_point)} vectors and {len(payloads)} payloads; give one each")
    _check_names(per_point, record)
    return [E.Point(to_edge_id(i), _struct(v), p) for i, v, p in zip(batch.ids, per_point, payloads)]


def edge_points(
    points: models.Batch | Iterable[models.PointStruct], record: CollectionRecord | None = None
) -> list[E.Point]:
    """The Edge points of an ``upsert`` argument.

    Args:
        points: a columnar ``models.Batch`` or ``PointStruct`` s.
        record: the collection's record; if given, every vector name is checked against it first.

    Raises:
        UnsupportedCallError: inference objects (``models.Document`` ...).
        ValueError: ids, vectors and payloads of different lengths; a vector name the collection lacks,
            or a sparse vector sent to a dense name (or the reverse).
    """
    if isinstance(points, models.Batch):
        return _batch_points(points, record)
    points = list(points)
    for p in points:
        if not isinstance(p, models.PointStruct):
            raise UnsupportedCallError(f"upsert takes models.Batch or models.PointStruct, got {type(p).__name__}")
    _check_names((p.vector for p in points), record)
    return [E.Point(to_edge_id(p.id), _struct(p.vector), p.payload) for p in points]
