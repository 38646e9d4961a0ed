"""May this run write to this collection (its shape: vectors, sparse vectors, metadata)? One home, one error type.

Before the first write, :func:`check_writable` compares a live collection with the
:class:`~qdrant_tools.spec.CollectionSpec` a run writes: every named vector, the sub-chunk multivectors the
run would leave out, the sparse vectors and the recorded metadata. Whether an encoder may read or write a
vector is llamaindex-posfair's gate.

Example:
    >>> from qdrant_client import QdrantClient
    >>> from qdrant_tools.spec import CollectionSpec, VectorConfig
    >>> client = QdrantClient(":memory:")
    >>> spec = CollectionSpec(name="demo", vectors=[VectorConfig(name="v", size=4)])
    >>> check_writable(client, spec)
    False
    >>> client.create_collection("demo", vectors_config={"v": VectorConfig(name="v", size=8).to_qdrant()})
    True
    >>> check_writable(client, spec)
    Traceback (most recent call last):
    ...
    qdrant_tools.spec.CollectionMismatchError: vector 'v' of collection 'demo' has size 8, ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from qdrant_tools.metadata import metadata_conflicts, read_metadata
from qdrant_tools.spec import CollectionMismatchError

if TYPE_CHECKING:
    from qdrant_tools.spec import CollectionSpec, SparseVectorConfig, VectorConfig
    from qdrant_tools.store.protocol import StoreLike

__all__ = ["check_writable"]


def _describe(vectors: Any) -> str:
    if isinstance(vectors, dict):
        return ", ".join(f"{n!r}: size {p.size}, {p.distance.value}" for n, p in sorted(vectors.items())) or "none"
    return f"one unnamed vector (size {vectors.size}, {vectors.distance.value})"


def _fix(collection: str) -> str:
    return (
        f"fix: ingest into a new collection (--collection NEW_NAME), use the model that built "
        f"{collection!r}, or delete it to rebuild"
    )


def _vector_problem(collection: str, live: dict[str, Any], spec: VectorConfig, encoder: str) -> str | None:
    """What is wrong with the live vector ``spec.name`` for writing ``spec`` (None: nothing)."""
    who = f"encoder {encoder} " if encoder else "the encoder "
    fix = _fix(collection)
    params = live.get(spec.name)
    if params is None and spec.multivector:
        return (
            f"collection {collection!r} was written without the multivector {spec.name!r} (the single-vector "
            "layout, no sub-chunks), and layouts never mix in one collection; ingest with --no-subchunks "
            "(NodeLayout(subchunks=None)) to add to it, or into a new collection (--collection NEW_NAME) "
            "for the sub-chunk layout"
        )
    if params is None:
        return (
            f"collection {collection!r} has no vector named {spec.name!r} (it has {_describe(live)}); "
            f"pass one of its vector names (--vector-name) or {fix}"
        )
    if params.size != spec.size:
        return (
            f"vector {spec.name!r} of collection {collection!r} has size {params.size}, but "
            f"{who}produces size {spec.size}; {fix}"
        )
    if params.distance != spec.qdrant_distance:
        return (
            f"vector {spec.name!r} of collection {collection!r} uses distance {params.distance.value}, "
            f"but {who}needs {spec.qdrant_distance.value}; {fix}"
        )
    if (getattr(params, "multivector_config", None) is not None) != spec.multivector:
        kind = "a multivector" if spec.multivector else "a dense vector"
        return f"vector {spec.name!r} of collection {collection!r} is not {kind} as this ingestion writes it; {fix}"
    return None


def _vectors_problem(
    collection: str, live: Any, specs: Sequence[VectorConfig], descriptions: Mapping[str, str]
) -> str | None:
    """The first problem of the live named vectors for writing ``specs`` (None: nothing)."""
    if not isinstance(live, dict):
        return (
            f"collection {collection!r} has {_describe(live)}, but posfair writes named vectors "
            f"{[s.name for s in specs]}; {_fix(collection)}"
        )
    for spec in specs:
        problem = _vector_problem(collection, live, spec, descriptions.get(spec.name, ""))
        if problem:
            return problem
    return None


def _missing_multivectors_problem(collection: str, live: dict[str, Any], specs: Sequence[VectorConfig]) -> str | None:
    """A collection with sub-chunk (multi)vectors must not get points without them: layouts never mix."""
    written = {v.name for v in specs}
    extra = sorted(
        n for n, p in live.items() if getattr(p, "multivector_config", None) is not None and n not in written
    )
    if not extra:
        return None
    return (
        f"collection {collection!r} holds the multivector(s) {extra} (the sub-chunk layout), but this "
        "run writes points without them; ingest with the same sub-chunk settings, or into a new collection "
        "(--collection NEW_NAME) for the single-vector layout"
    )


def _missing_sparse_problem(
    collection: str, live: Mapping[str, Any], sparse: Sequence[SparseVectorConfig]
) -> str | None:
    """Sparse vectors this run writes must exist in the collection (they cannot be added to its points)."""
    missing = sorted(v.name for v in sparse if v.name not in live)
    if not missing:
        return None
    return (
        f"collection {collection!r} has no sparse vector {missing} (it was written without BM25), but "
        "this run writes it; ingest without sparse vectors, or into a new collection (--collection NEW_NAME)"
    )


def _metadata_problem(collection: str, recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> str | None:
    """The recorded metadata (the recipe) must agree with this run's wherever both say something."""
    clash = metadata_conflicts(recorded, wanted)
    if not clash:
        return None
    return (
        f"collection {collection!r} was written with other settings than this run's: "
        f"{'; '.join(clash)}; write with the collection's settings, or into a new collection "
        "(--collection NEW_NAME)"
    )


def check_writable(client: StoreLike, spec: CollectionSpec, descriptions: Mapping[str, str] | None = None) -> bool:
    """Check that a run writing ``spec`` may use its collection; return whether the collection exists.

    Args:
        client: a store (:func:`qdrant_tools.store.open_store`) or ``QdrantClient``.
        spec: the collection and the vectors (dense, sparse) and metadata the run writes.
        descriptions: vector name -> human-readable encoder description, named in errors.

    Raises:
        CollectionMismatchError: it exists and does not fit (raised before any write).
    """
    name = spec.name
    if not client.collection_exists(name):
        return False
    params = client.get_collection(name).config.params
    problem = _vectors_problem(name, params.vectors, spec.vectors, descriptions or {})
    problem = problem or _missing_multivectors_problem(name, params.vectors, spec.vectors)
    problem = problem or _missing_sparse_problem(name, params.sparse_vectors or {}, spec.sparse_vectors)
    if problem is None and spec.metadata:
        problem = _metadata_problem(name, read_metadata(client, name), spec.metadata)
    if problem:
        raise CollectionMismatchError(problem)
    return True
