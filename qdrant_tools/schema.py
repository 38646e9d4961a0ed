"""Check (and create) a collection's named-vector schema before any write.

posfair stores *named* dense vectors, so one collection can hold e.g. a
``vanilla`` and a ``calibrated`` vector for every chunk. Before the first
write, every vector an ingestion will write is checked against the
collection: it must exist under that name with the encoder's size and
distance. A mismatch raises :class:`qdrant_tools.spec.CollectionMismatchError`
naming both sides and the fix, and nothing is written. The vectors are
:class:`qdrant_tools.spec.VectorConfig` s.

Example:
    >>> from qdrant_client import QdrantClient
    >>> from qdrant_tools.spec import VectorConfig
    >>> client = QdrantClient(":memory:")
    >>> ensure_collection(client, "demo", [VectorConfig(name="calibrated", size=384)])
    True
    >>> ensure_collection(client, "demo", [VectorConfig(name="calibrated", size=384)])
    False
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from qdrant_tools.compat import check_writable
from qdrant_tools.spec import CollectionSpec, VectorConfig

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike


def ensure_collection(
    client: StoreLike, collection: str, specs: Sequence[VectorConfig], descriptions: Mapping[str, str] | None = None
) -> bool:
    """Check the collection, creating it with ``specs`` (:meth:`VectorConfig.to_qdrant`) if missing.

    Args:
        client: a store (:func:`qdrant_tools.store.open_store`) or ``QdrantClient``.
        collection: collection name.
        specs: the vectors about to be written.
        descriptions: vector name -> human-readable encoder description, named in errors.

    Returns:
        True if the collection was created, False if it already existed and matched.

    Raises:
        CollectionMismatchError: it exists and does not fit (see :func:`qdrant_tools.compat.check_writable`).
    """
    if not specs:
        raise ValueError("specs must name at least one vector to write")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"vector names must be distinct, got {names}")
    if check_writable(client, CollectionSpec(name=collection, vectors=tuple(specs)), descriptions):
        return False
    client.create_collection(
        collection,
        vectors_config={s.name: s.to_qdrant() for s in specs},
    )
    return True
