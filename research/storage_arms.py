"""How a collection's vectors are kept: the rows of the compact-layout sweep.

Every arm stores the same vectors as the float layout (arm 0, the default before the compact one); only where they
live changes: a quantized copy kept
in RAM (int8 scalar, or binary) that searches scan, with the float32 originals memory-mapped (``on_disk``),
which re-score the best of every ranking (:func:`qdrant_tools.search.ranking_params`). :func:`copy_as`
writes an existing collection into a new one stored as an arm, from its stored vectors (nothing is encoded).

Example:
    >>> from research.storage_arms import ARMS
    >>> ARMS[0].label
    'former default: fused float32 in RAM, node float32 + int8 copy, plain sub-chunks memory-mapped'
    >>> ARMS[SHIPPED].fused_copy, ARMS[SHIPPED].node_on_disk
    ('int8', True)
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from qdrant_client import models

from qdrant_tools.encoding import BINARY_COPY, INT8_COPY
from qdrant_tools.scroll import scroll_pages
from qdrant_tools.sparse import SPARSE_VECTOR
from qdrant_tools.subchunks import FUSED_VECTOR, SUBCHUNK_VECTOR

Copy = Literal["int8", "binary", "none"] | None  # None: as the float layout keeps it


class Arm(NamedTuple):
    """One row: the quantized copy and the originals' place of the fused multivector and of the node vector."""

    label: str
    fused_copy: Copy = None
    fused_on_disk: bool | None = None
    node_copy: Copy = None
    node_on_disk: bool | None = None


ARMS = (
    Arm("former default: fused float32 in RAM, node float32 + int8 copy, plain sub-chunks memory-mapped"),
    Arm("fused int8 copy, originals memory-mapped", "int8", True),
    Arm("fused binary copy, originals memory-mapped", "binary", True),
    Arm("fused int8 copy, originals memory-mapped; node originals memory-mapped", "int8", True, None, True),
    Arm(
        "fused int8 copy, originals memory-mapped; node binary copy, originals memory-mapped",
        "int8",
        True,
        "binary",
        True,
    ),
    Arm("fused int8 copy, originals memory-mapped; node without a copy", "int8", True, "none"),
)

#: The arm the shipped default layout is (``NodeLayout()``'s ``fused_quantization`` and ``node_on_disk``), chosen by
#: research/bench/compact_sweep.py's rule.
SHIPPED = 3

_QUANTIZATION = {"int8": INT8_COPY.to_qdrant(), "binary": BINARY_COPY.to_qdrant(), "none": None}


def _kept(params: models.VectorParams, copy: Copy, on_disk: bool | None) -> models.VectorParams:
    update: dict[str, Any] = {}
    if copy is not None:
        update["quantization_config"] = _QUANTIZATION[copy]
    if on_disk is not None:
        update["on_disk"] = on_disk
    return params.model_copy(update=update)


def arm_vectors(vectors: dict[str, models.VectorParams], arm: Arm) -> dict[str, models.VectorParams]:
    """``vectors`` (a collection's ``vectors_config``) kept as ``arm`` says."""
    out = dict(vectors)
    node = [n for n in vectors if n not in (SUBCHUNK_VECTOR, FUSED_VECTOR, SPARSE_VECTOR)]
    if FUSED_VECTOR in out:
        out[FUSED_VECTOR] = _kept(out[FUSED_VECTOR], arm.fused_copy, arm.fused_on_disk)
    for n in node:
        out[n] = _kept(out[n], arm.node_copy, arm.node_on_disk)
    return out


def copy_as(client: Any, source: str, target: str, arm: Arm, batch_size: int = 256, index_all: bool = False) -> int:
    """Write ``source`` into the new collection ``target`` kept as ``arm`` (same points, ids and payloads), build
    its index; returns the points copied. ``index_all``: index (and quantize) every segment however small, as
    the segments of a large collection are (Qdrant leaves segments below ``indexing_threshold`` unindexed)."""
    config = client.get_collection(source).config
    optimizers = models.OptimizersConfigDiff(indexing_threshold=1) if index_all else None
    client.create_collection(
        target,
        vectors_config=arm_vectors(dict(config.params.vectors), arm),
        sparse_vectors_config=dict(config.params.sparse_vectors or {}),
        metadata=config.metadata,
        optimizers_config=optimizers,
    )
    copied = 0
    for page in scroll_pages(client, source, page=batch_size, with_vectors=True):
        points = [models.PointStruct(id=p.id, vector=dict(p.vector), payload=p.payload) for p in page]
        client.upsert(target, points, wait=True)
        copied += len(page)
    if hasattr(client, "build_index"):
        client.build_index(target)
    return copied
