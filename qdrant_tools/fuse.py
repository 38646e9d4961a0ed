"""Copy a collection into the fused layout from its stored vectors, without encoding anything again.

:func:`fuse_collection` copies a collection without fused rows (written before they were the default, or
with ``--fused-weight 0``) into a new one that also holds :data:`~qdrant_tools.subchunks.FUSED_VECTOR`, built
from the stored node and sub-chunk vectors (:func:`~qdrant_tools.encoding.fused_rows`): the layout
``posfair ingest`` writes today. Points are re-keyed as ingestion would key them, so ingesting the same files
into the copy encodes nothing. A collection with fused rows at that weight is copied into other storage
(:class:`qdrant_tools.layout.NodeLayout`'s ``fused_quantization``, ``node_on_disk``). The source is never
written; a rerun completes a partial target (docs/storage.md, "Any size").

Example:
    >>> from qdrant_tools.fuse import fuse_collection
    >>> fuse_collection(client, "docs", "docs_fused", 0.5)   # doctest: +SKIP
    1290
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from qdrant_client import models
from tqdm.auto import tqdm

from qdrant_tools import payload as P
from qdrant_tools.encoding import (
    QUANTIZED_COPIES,
    fused_chunking_key,
    fused_rows,
    fused_vector_config,
    subchunk_source_of,
)
from qdrant_tools.ids import document_version, point_id
from qdrant_tools.metadata import FUSED_WEIGHT_KEY, RECIPE_KEY, read_metadata, recorded_fused_weight
from qdrant_tools.scroll import scroll_pages
from qdrant_tools.spec import POSFAIR_PAYLOAD_INDEXES, create_payload_indexes
from qdrant_tools.subchunks import FUSED_VECTOR, SUBCHUNK_VECTOR

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

__all__ = ["FuseError", "fuse_collection"]


class FuseError(ValueError):
    """The collection cannot be copied into the fused layout (the message says why and what to do)."""


def fuse_collection(
    client: StoreLike,
    source: str,
    target: str,
    weight: float,
    *,
    node_quantization: str | None = "int8",
    fused_quantization: str | None = None,
    node_on_disk: bool = False,
    metadata: Mapping[str, Any] | None = None,
    batch_size: int = 256,
    show_progress: bool = False,
) -> int:
    """Copy ``source`` into ``target`` with the fused multivector at node weight ``weight``.

    Args:
        client: an embedded store or a ``QdrantClient`` (what :func:`qdrant_tools.store.open_store` returns).
        source: a posfair collection with node vectors and the sub-chunk multivector, without fused rows.
        target: a new collection (or the partial target of an interrupted run with the same weight).
        weight: the node weight of the fused rows, strictly between 0 and 1 (the search's ``node_weight``).
        node_quantization: ``"int8"``: also keep an int8 copy of the node vectors for their HNSW search (one the
            source keeps stays); ``None``: add none.
        fused_quantization: ``"int8"`` or ``"binary"``: the fused rows' quantized copy in RAM, the float rows
            memory-mapped; ``None``: float rows in RAM.
        node_on_disk: memory-map the float node vectors (needs ``node_quantization="int8"`` or a stored copy).
        metadata: collection metadata written over the source's: where the source records a recipe, the recipe of
            the copy (llamaindex-posfair's ``Recipe.with_fused_rows(...).metadata()``), whose layout records
            ``weight``; without a recipe the weight is recorded under
            :data:`~qdrant_tools.metadata.FUSED_WEIGHT_KEY`.
        batch_size: points per page read and per write.
        show_progress: a progress bar over the points.

    Returns:
        The number of points the target holds (the source's).

    Raises:
        FuseError: the source is missing, has no sub-chunks, holds fused rows at another weight or already
            stored as asked, the target exists with another layout, ``weight`` is outside (0, 1), a quantization
            is not one of the valid ones, or the recipe of the copy records another fused weight; raised before any
            write.
    """
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 < weight < 1.0:
        raise FuseError(f"the fused node weight must lie strictly between 0 and 1, got {weight!r}; e.g. 0.5")
    _check_quantization(node_quantization, fused_quantization)
    info, node = _check_source(client, source)
    vectors = _target_vectors(client, source, info, node, weight, node_quantization, fused_quantization, node_on_disk)
    meta = _target_metadata(client, source, metadata, weight)
    _create_target(client, target, info, vectors, weight, meta)
    total = client.count(source, exact=True).count
    bar = tqdm(total=total, desc=f"fusing {source!r} -> {target!r}", unit="point", disable=not show_progress)
    with bar:
        for page in scroll_pages(client, source, page=batch_size, with_vectors=True):
            client.upsert(target, [_fused_point(p, node, weight) for p in page], wait=True)
            bar.update(len(page))
    stored = client.count(target, exact=True).count
    if stored != total:
        raise FuseError(
            f"{target!r} holds {stored} points but {source!r} holds {total}: was {source!r} written to during the "
            "copy? Run the same command again (it completes the copy; nothing in the source changes)"
        )
    if hasattr(client, "build_index"):
        client.build_index(target, show_progress=show_progress)  # the embedded store: indexed before the first query
    return stored


def _check_quantization(node_quantization: Any, fused_quantization: Any) -> None:
    """Raise :class:`FuseError` unless both quantizations are valid (named as ``posfair ingest`` names them)."""
    if node_quantization not in (None, "int8"):
        raise FuseError(f'node_quantization must be "int8" or None, got {node_quantization!r}; e.g. "int8"')
    if fused_quantization not in (None, "int8", "binary"):
        raise FuseError(f'fused_quantization must be "int8", "binary" or None, got {fused_quantization!r}; e.g. "int8"')


def _target_metadata(
    client: StoreLike, source: str, metadata: Mapping[str, Any] | None, weight: float
) -> dict[str, Any]:
    """The target's metadata: the source's, ``metadata`` over it, and the fused weight recorded once: in the recipe's
    layout where there is a recipe (the key earlier versions wrote beside it dropped), else under
    :data:`~qdrant_tools.metadata.FUSED_WEIGHT_KEY`.

    Raises:
        FuseError: the recipe of the copy records another fused weight than ``weight``.
    """
    meta = {**read_metadata(client, source), **(metadata or {})}
    if RECIPE_KEY not in meta:
        return {**meta, FUSED_WEIGHT_KEY: weight}
    meta.pop(FUSED_WEIGHT_KEY, None)
    recorded = recorded_fused_weight(meta)
    if recorded is None or not math.isclose(recorded, weight):
        raise FuseError(
            f"collection {source!r} records a recipe ({RECIPE_KEY!r}) whose layout has fused weight {recorded}, "
            f"not {weight:g}; pass metadata= the copy's recipe (Recipe.with_fused_rows(...).metadata()), or copy it "
            "with `posfair storage migrate`, which records it"
        )
    return meta


def _check_source(client: StoreLike, source: str) -> tuple[Any, str]:
    """The source's collection info and node vector name (the vector the sub-chunks were embedded with)."""
    if not client.collection_exists(source):
        raise FuseError(f"collection {source!r} does not exist; list them with `posfair collection` or check --path")
    info = client.get_collection(source)
    vectors = info.config.params.vectors
    if not isinstance(vectors, Mapping) or SUBCHUNK_VECTOR not in vectors:
        raise FuseError(
            f"collection {source!r} has no sub-chunk multivector {SUBCHUNK_VECTOR!r}: fused rows fuse sub-chunks with "
            "the node vector; re-ingest it with sub-chunks instead (`posfair ingest` writes them by default)"
        )
    page, _ = client.scroll(source, limit=1, with_payload=P.payload_fields(P.CHUNKING))
    node = subchunk_source_of(str(P.posfair_fields(page[0].payload).get(P.CHUNKING, ""))) if page else None
    if node is None or node not in vectors:
        raise FuseError(
            f"cannot tell which vector of {source!r} the sub-chunks were embedded with (its points carry no posfair "
            "chunking key, or the collection is empty); re-ingest it with `posfair ingest` instead"
        )
    return info, node


def _target_vectors(
    client: StoreLike,
    source: str,
    info: Any,
    node: str,
    weight: float,
    node_quantization: str | None,
    fused_quantization: str | None,
    node_on_disk: bool,
) -> dict[str, Any]:
    """The target's named vectors: the source's, the fused rows added (or kept) and stored as asked.

    Raises:
        FuseError: the source's fused rows were written at another weight, or are already stored as asked.
    """
    vectors = dict(info.config.params.vectors)
    sub = vectors[SUBCHUNK_VECTOR]
    fused = fused_vector_config(sub.size, fused_quantization).to_qdrant()  # as ingestion writes it
    if FUSED_VECTOR in vectors:
        stored = recorded_fused_weight(read_metadata(client, source))
        if stored is None or not math.isclose(stored, weight):
            raise FuseError(
                f"collection {source!r} holds fused rows at node weight {stored}, not {weight:g}; "
                f"pass --fused-weight {stored} to copy them into other storage"
            )
        same = _kept(vectors[FUSED_VECTOR]) == _kept(fused) and bool(vectors[node].on_disk) == node_on_disk
        if same:
            raise FuseError(f"collection {source!r} already holds fused rows stored this way; nothing to do")
    vectors[SUBCHUNK_VECTOR] = sub.model_copy(update={"on_disk": True})  # default queries score the fused rows
    copy = QUANTIZED_COPIES[node_quantization]
    if copy is not None and vectors[node].quantization_config is None:
        vectors[node] = vectors[node].model_copy(update={"quantization_config": copy.to_qdrant()})
    if node_on_disk:
        if vectors[node].quantization_config is None:
            raise FuseError("memory-mapped node vectors need their int8 copy in RAM; keep --node-quantization int8")
        vectors[node] = vectors[node].model_copy(update={"on_disk": True})
    vectors[FUSED_VECTOR] = fused
    return vectors


def _kept(params: Any) -> tuple[str, bool]:
    """How a vector is stored: its quantized copy's kind (``""``: none) and whether its originals are mapped."""
    quant = params.quantization_config
    return (type(quant).__name__ if quant is not None else "", bool(params.on_disk))


def _create_target(
    client: StoreLike, target: str, info: Any, vectors: dict[str, Any], weight: float, metadata: dict[str, Any]
) -> None:
    """Create ``target`` with ``vectors`` (or accept an interrupted run's target)."""
    if client.collection_exists(target):
        have = client.get_collection(target).config.params.vectors
        stored = recorded_fused_weight(read_metadata(client, target))
        if isinstance(have, Mapping) and FUSED_VECTOR in have and stored is not None and math.isclose(stored, weight):
            return  # an interrupted run: the copy goes on (every write is idempotent)
        raise FuseError(
            f"collection {target!r} exists and is not a fused copy at node weight {weight:g}; "
            "pass a new --to name (or delete that collection first)"
        )
    params = info.config.params
    kwargs: dict[str, Any] = {"vectors_config": vectors, "metadata": metadata}
    if params.sparse_vectors:
        kwargs["sparse_vectors_config"] = dict(params.sparse_vectors)
    if params.on_disk_payload is not None:
        kwargs["on_disk_payload"] = params.on_disk_payload
    client.create_collection(target, **kwargs)
    create_payload_indexes(client, target, POSFAIR_PAYLOAD_INDEXES)


def _fused_point(point: Any, node: str, weight: float) -> models.PointStruct:
    """``point`` with its fused rows, re-keyed as ingestion keys a document of the fused layout."""
    vectors = dict(point.vector)
    payload = dict(point.payload or {})
    if FUSED_VECTOR in vectors:  # fused already (another storage of the same rows): copied as it is
        return models.PointStruct(id=point.id, vector=vectors, payload=payload)
    if node in vectors and SUBCHUNK_VECTOR in vectors:
        subs = np.asarray(vectors[SUBCHUNK_VECTOR], dtype=np.float32)
        vectors[FUSED_VECTOR] = fused_rows(np.asarray(vectors[node], dtype=np.float32), subs, weight).tolist()
    fields = P.posfair_fields(payload)
    if P.CHUNKING not in fields or P.CONTENT_HASH not in fields:
        return models.PointStruct(id=point.id, vector=vectors, payload=payload)  # not a posfair point: copied as is
    key = fused_chunking_key(fields[P.CHUNKING], weight)
    version = document_version(fields[P.CONTENT_HASH], key, fields[P.FINGERPRINTS])
    return models.PointStruct(
        id=point_id(fields[P.DOC_ID], version, int(fields[P.CHUNK_INDEX])),
        vector=vectors,
        payload=P.rekeyed(payload, key, version),
    )
