"""Check (and create) a collection's named-vector schema before any write.

posfair stores *named* dense vectors, so one collection can hold e.g. a
``vanilla`` and a ``calibrated`` vector for every chunk. Before the first
write, every vector an ingestion will write is checked against the
collection: it must exist under that name with the encoder's size and
distance. A mismatch raises :class:`SchemaMismatchError` naming both sides and
the fix, and nothing is written.

The vectors are described by :class:`qdrant_tools.spec.VectorConfig`, the one
type posfair describes a vector it writes with; the encoder behind each (for
the messages) is passed beside them as ``descriptions``.

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
from typing import TYPE_CHECKING, Any

from qdrant_client import models

from qdrant_tools.spec import VectorConfig

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

DISTANCES = {d.value.lower(): d for d in models.Distance}


class SchemaMismatchError(ValueError):
    """The collection's vectors do not match the encoder(s) about to write to it."""


def _describe(vectors: Any) -> str:
    if isinstance(vectors, dict):
        return ", ".join(f"{n!r}: size {p.size}, {p.distance.value}" for n, p in sorted(vectors.items())) or "none"
    return f"one unnamed vector (size {vectors.size}, {vectors.distance.value})"


def check_collection(
    client: StoreLike, collection: str, specs: Sequence[VectorConfig], descriptions: Mapping[str, str] | None = None
) -> bool:
    """Check ``collection`` against ``specs``; return whether it exists.

    Args:
        client: a store (:func:`qdrant_tools.store.open_store`) or ``QdrantClient``.
        collection: collection name.
        specs: the vectors about to be written.
        descriptions: vector name -> human-readable encoder description, named in errors.

    Raises:
        SchemaMismatchError: if it exists with an unnamed vector, without one of
            the vector names, or with another size or distance.
    """
    if not specs:
        raise ValueError("specs must name at least one vector to write")
    if not client.collection_exists(collection):
        return False
    vectors = client.get_collection(collection).config.params.vectors
    fix = (
        f"fix: ingest into a new collection (--collection NEW_NAME), use the model that built "
        f"{collection!r}, or delete it to rebuild"
    )
    if not isinstance(vectors, dict):
        raise SchemaMismatchError(
            f"collection {collection!r} has {_describe(vectors)}, but posfair writes named vectors "
            f"{[s.name for s in specs]}; {fix}"
        )
    for spec in specs:
        encoder = (descriptions or {}).get(spec.name, "")
        who = f"encoder {encoder} " if encoder else "the encoder "
        params = vectors.get(spec.name)
        if params is None and spec.multivector:
            raise SchemaMismatchError(
                f"collection {collection!r} was written without the multivector {spec.name!r} (the single-vector "
                "layout, no sub-chunks), and layouts never mix in one collection; ingest with --no-subchunks "
                "(NodeLayout(subchunks=None)) to add to it, or into a new collection (--collection NEW_NAME) "
                "for the sub-chunk layout"
            )
        if params is None:
            raise SchemaMismatchError(
                f"collection {collection!r} has no vector named {spec.name!r} (it has {_describe(vectors)}); "
                f"pass one of its vector names (--vector-name) or {fix}"
            )
        if params.size != spec.size:
            raise SchemaMismatchError(
                f"vector {spec.name!r} of collection {collection!r} has size {params.size}, but "
                f"{who}produces size {spec.size}; {fix}"
            )
        if params.distance != spec.qdrant_distance:
            raise SchemaMismatchError(
                f"vector {spec.name!r} of collection {collection!r} uses distance {params.distance.value}, "
                f"but {who}needs {spec.qdrant_distance.value}; {fix}"
            )
        if (getattr(params, "multivector_config", None) is not None) != spec.multivector:
            kind = "a multivector" if spec.multivector else "a dense vector"
            raise SchemaMismatchError(
                f"vector {spec.name!r} of collection {collection!r} is not {kind} as this ingestion writes it; {fix}"
            )
    return True


def ensure_collection(
    client: StoreLike, collection: str, specs: Sequence[VectorConfig], descriptions: Mapping[str, str] | None = None
) -> bool:
    """Check the collection, creating it with ``specs`` (:meth:`VectorConfig.to_qdrant`) if missing.

    Args: as :func:`check_collection`.

    Returns:
        True if the collection was created, False if it already existed and matched.

    Raises:
        SchemaMismatchError: see :func:`check_collection`.
    """
    if check_collection(client, collection, specs, descriptions):
        return False
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"vector names must be distinct, got {names}")
    client.create_collection(
        collection,
        vectors_config={s.name: s.to_qdrant() for s in specs},
    )
    return True
