"""Points to write (``models.Batch`` or ``PointStruct`` s) -> Qdrant Edge ``Point`` s.

Example:
    >>> from qdrant_client import models
    >>> pts = edge_points(models.Batch(ids=[1], vectors={"node": [[0.5, 0.5]]}, payloads=[{"k": "v"}]))
    >>> pts[0].id, pts[0].payload
    (1, {'k': 'v'})
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import qdrant_edge as E
from qdrant_client import models

from qdrant_tools.store.errors import UnsupportedCallError
from qdrant_tools.store.ids import to_edge_id


def _vec(name: str, v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.astype(np.float32, copy=False).tolist()
    if isinstance(v, list):
        return v
    raise UnsupportedCallError(
        f"vector {name!r} of type {type(v).__name__} is not supported by the embedded store (dense vectors and "
        "multivectors only; sparse vectors and server-side inference need a Qdrant server)"
    )


def _struct(vector: Any) -> Any:
    """A point's vector(s): a bare list (the unnamed vector) or ``{name: vector or multivector}``."""
    if isinstance(vector, dict):
        return {name: _vec(name, v) for name, v in vector.items() if v is not None}
    return _vec("", vector)


def _batch_points(batch: models.Batch) -> list[E.Point]:
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
    return [E.Point(to_edge_id(i), _struct(v), p) for i, v, p in zip(batch.ids, per_point, payloads)]


def edge_points(points: models.Batch | Iterable[models.PointStruct]) -> list[E.Point]:
    """The Edge points of an ``upsert`` argument.

    Raises:
        UnsupportedCallError: sparse vectors or inference objects.
        ValueError: ids, vectors and payloads of different lengths.
    """
    if isinstance(points, models.Batch):
        return _batch_points(points)
    out = []
    for p in points:
        if not isinstance(p, models.PointStruct):
            raise UnsupportedCallError(f"upsert takes models.Batch or models.PointStruct, got {type(p).__name__}")
        out.append(E.Point(to_edge_id(p.id), _struct(p.vector), p.payload))
    return out
