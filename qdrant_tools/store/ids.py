"""Point ids between qdrant-client (``int`` or UUID ``str``) and Qdrant Edge (``int`` or ``uuid.UUID``).

Example:
    >>> import uuid
    >>> from_edge_id(uuid.UUID(int=1))
    '00000000-0000-0000-0000-000000000001'
    >>> from_edge_id(7), to_edge_id("00000000-0000-0000-0000-000000000001")
    (7, '00000000-0000-0000-0000-000000000001')
"""

from __future__ import annotations

import uuid
from typing import Any


def to_edge_id(point_id: Any) -> int | str:
    """A point id as Qdrant Edge takes it (``int`` or UUID string).

    Raises:
        ValueError: not an unsigned integer or a UUID.
    """
    if isinstance(point_id, bool):
        raise ValueError(f"point ids are unsigned integers or UUIDs, got {point_id!r}")
    if isinstance(point_id, int):
        if point_id < 0:
            raise ValueError(f"point ids are unsigned integers or UUIDs, got {point_id}")
        return point_id
    if isinstance(point_id, uuid.UUID):
        return str(point_id)
    try:
        return str(uuid.UUID(str(point_id)))
    except ValueError:
        raise ValueError(f"point ids are unsigned integers or UUIDs, got {point_id!r}; see qdrant_tools.ids") from None


def from_edge_id(point_id: Any) -> int | str:
    """A point id as qdrant-client returns it (``int`` or UUID string)."""
    return str(point_id) if isinstance(point_id, uuid.UUID) else point_id
