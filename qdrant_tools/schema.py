"""Check (and create) a collection's named-vector schema before any write.

posfair stores *named* dense vectors, so one collection can hold e.g. a
``vanilla`` and a ``calibrated`` vector for every chunk. Before the first
write, every vector an ingestion will write is checked against the
collection: it must exist under that name with the encoder's size and
distance. A mismatch raises :class:`SchemaMismatchError` naming both sides and
the fix, and nothing is written.

Example:
    >>> from qdrant_client import QdrantClient
    >>> from qdrant_tools.schema import VectorSpec, ensure_collection
    >>> client = QdrantClient(":memory:")
    >>> ensure_collection(client, "demo", [VectorSpec("calibrated", 384)])
    True
    >>> ensure_collection(client, "demo", [VectorSpec("calibrated", 384)])
    False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client import models

DISTANCES = {d.value.lower(): d for d in models.Distance}


class SchemaMismatchError(ValueError):
    """The collection's vectors do not match the encoder(s) about to write to it."""


@dataclass(frozen=True)
class VectorSpec:
    """One named vector an ingestion writes.

    Args:
        name: the Qdrant vector name (e.g. ``"calibrated"``).
        size: the encoder's output dimension.
        distance: Qdrant distance; cosine by default (embeddings are normalised).
        encoder: human-readable description of the encoder, used in errors.
        multivector: several vectors per point (MaxSim), e.g. a node's sub-chunks.
    """

    name: str
    size: int
    distance: models.Distance = models.Distance.COSINE
    encoder: str = ""
    multivector: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"vector name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.size, int) or self.size <= 0:
            raise ValueError(f"vector size must be a positive integer, got {self.size!r}")


def _describe(vectors: Any) -> str:
    if isinstance(vectors, dict):
        return ", ".join(f"{n!r}: size {p.size}, {p.distance.value}" for n, p in sorted(vectors.items())) or "none"
    return f"one unnamed vector (size {vectors.size}, {vectors.distance.value})"


def check_collection(client: Any, collection: str, specs: Sequence[VectorSpec]) -> bool:
    """Check ``collection`` against ``specs``; return whether it exists.

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
        who = f"encoder {spec.encoder} " if spec.encoder else "the encoder "
        params = vectors.get(spec.name)
        if params is None and spec.multivector:
            raise SchemaMismatchError(
                f"collection {collection!r} was written without the multivector {spec.name!r} (the single-vector "
                "layout, no sub-chunks), and layouts never mix in one collection; ingest with --no-subchunks "
                "(subchunks=None) to add to it, or into a new collection (--collection NEW_NAME) for the sub-chunk layout"
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
        if params.distance != spec.distance:
            raise SchemaMismatchError(
                f"vector {spec.name!r} of collection {collection!r} uses distance {params.distance.value}, "
                f"but {who}needs {spec.distance.value}; {fix}"
            )
        if (getattr(params, "multivector_config", None) is not None) != spec.multivector:
            kind = "a multivector" if spec.multivector else "a dense vector"
            raise SchemaMismatchError(
                f"vector {spec.name!r} of collection {collection!r} is not {kind} as this ingestion writes it; {fix}"
            )
    return True


def ensure_collection(client: Any, collection: str, specs: Sequence[VectorSpec]) -> bool:
    """Check the collection, creating it with ``specs`` if missing.

    Returns:
        True if the collection was created, False if it already existed and matched.

    Raises:
        SchemaMismatchError: see :func:`check_collection`.
    """
    if check_collection(client, collection, specs):
        return False
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"vector names must be distinct, got {names}")
    client.create_collection(
        collection,
        vectors_config={s.name: models.VectorParams(size=s.size, distance=s.distance) for s in specs},
    )
    return True
