"""Qdrant Edge results -> ``qdrant_client.models`` (``ScoredPoint``, ``Record``), as qdrant-client returns them.

Ids come back as ``int`` or UUID ``str``; vectors of a collection with one
unnamed vector as a plain list, named vectors as ``{name: vector}``, sparse
vectors as ``models.SparseVector`` (indices ascending, as Qdrant stores them).

Example:
    >>> unpack_vector({"": [1.0, 2.0]})
    [1.0, 2.0]
    >>> unpack_vector({"node": [1.0]})
    {'node': [1.0]}
"""

from __future__ import annotations

from typing import Any

import qdrant_edge as E
from qdrant_client import models

from qdrant_tools.store.config import UNNAMED
from qdrant_tools.store.ids import from_edge_id


def _client_vector(v: Any) -> Any:
    if isinstance(v, E.SparseVector):
        return models.SparseVector(indices=list(v.indices), values=[float(x) for x in v.values])
    return v


def unpack_vector(vector: Any) -> Any:
    """Edge's vector field in qdrant-client's shape (an unnamed vector is returned bare, sparse ones as models)."""
    if isinstance(vector, dict) and set(vector) == {UNNAMED}:
        return vector[UNNAMED]
    if isinstance(vector, dict):
        return {name: _client_vector(v) for name, v in vector.items()} or None
    return vector or None


def scored_point(p: Any) -> models.ScoredPoint:
    """One Edge ``ScoredPoint`` as ``models.ScoredPoint`` (built without re-validating what Edge typed)."""
    return models.ScoredPoint.model_construct(
        id=from_edge_id(p.id),
        version=p.version,
        score=p.score,
        payload=p.payload,
        vector=unpack_vector(p.vector),
        order_value=p.order_value,
    )


def record(r: Any) -> models.Record:
    """One Edge ``Record`` as ``models.Record`` (built without re-validating what Edge typed)."""
    return models.Record.model_construct(
        id=from_edge_id(r.id), payload=r.payload, vector=unpack_vector(r.vector), order_value=r.order_value
    )
