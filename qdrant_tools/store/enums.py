"""Translate enums between ``qdrant_client.models`` (``ONE_AND_HALF_BITS``) and ``qdrant_edge`` (``OneAndHalfBits``).

Both libraries spell the same members; names are compared without case and
underscores, so a member added to both needs no code here.

Example:
    >>> import qdrant_edge
    >>> from qdrant_client import models
    >>> to_edge(qdrant_edge.Distance, models.Distance.COSINE) == qdrant_edge.Distance.Cosine
    True
    >>> from_edge(models.PayloadSchemaType, qdrant_edge.PayloadSchemaType.Keyword)
    <PayloadSchemaType.KEYWORD: 'keyword'>
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from qdrant_tools.store.errors import UnsupportedCallError


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def _members(edge_enum: type) -> dict[str, Any]:
    return {_key(k): v for k, v in vars(edge_enum).items() if isinstance(v, edge_enum)}


def to_edge(edge_enum: type, value: Enum | str) -> Any:
    """The ``qdrant_edge`` member of ``edge_enum`` spelling ``value`` (a qdrant-client enum member or its value).

    Raises:
        UnsupportedCallError: Qdrant Edge has no such member.
    """
    name = value.name if isinstance(value, Enum) else str(value)
    members = _members(edge_enum)
    try:
        return members[_key(name)]
    except KeyError:
        raise UnsupportedCallError(
            f"{edge_enum.__name__} {name!r} is not available in the embedded Qdrant Edge store "
            f"(it has {sorted(members)}); choose one of those or use a Qdrant server"
        ) from None


def from_edge(client_enum: type[Enum], value: Any) -> Any:
    """The qdrant-client member of ``client_enum`` spelling the ``qdrant_edge`` member ``value``."""
    name = str(value).rsplit(".", 1)[-1]
    for member in client_enum:
        if _key(member.name) == _key(name):
            return member
    raise ValueError(f"{client_enum.__name__} has no member for Qdrant Edge's {value!r}")
