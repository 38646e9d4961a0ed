"""A collection's configuration: the ``create_collection`` arguments as given, kept next to its Edge shard.

Qdrant Edge persists what it needs to run (``edge_config.json``), but not in
qdrant-client's terms, so each collection keeps :class:`CollectionRecord` in
``collection.json``: the named vectors (multivector config included), the
sparse vectors (IDF modifier included), HNSW, quantization and optimizer
settings exactly as ``create_collection`` received them. From it the store
builds the shard's ``EdgeConfig`` once, and answers ``get_collection`` with
qdrant-client's ``CollectionInfo``.

Example:
    >>> from qdrant_client import models
    >>> rec = CollectionRecord.from_create_kwargs(
    ...     {"vectors_config": {"node": models.VectorParams(size=4, distance=models.Distance.COSINE)}})
    >>> sorted(rec.edge_config().vectors)
    ['node']
"""

from __future__ import annotations

from typing import Any

import qdrant_edge as E
from pydantic import BaseModel, ConfigDict
from qdrant_client import models

from qdrant_tools.store.enums import to_edge
from qdrant_tools.store.errors import UnsupportedCallError

#: Qdrant's HNSW defaults (a server uses the same).
HNSW_DEFAULTS = {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000}
UNNAMED = ""

#: create_collection arguments that have no meaning for one embedded shard; recorded, never applied.
CLUSTER_SETTINGS = ("shard_number", "replication_factor", "write_consistency_factor")
_UNSUPPORTED = {
    "sharding_method": "custom sharding",
    "init_from": "init_from",
    "strict_mode_config": "strict mode",
}


class CollectionRecord(BaseModel):
    """What ``collection.json`` holds (qdrant-client models, JSON round-trip)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: int = 1
    vectors: dict[str, models.VectorParams] | models.VectorParams
    sparse_vectors: dict[str, models.SparseVectorParams] | None = None
    hnsw_config: models.HnswConfigDiff | None = None
    optimizers_config: models.OptimizersConfigDiff | None = None
    quantization_config: models.QuantizationConfig | None = None
    wal_config: models.WalConfigDiff | None = None
    on_disk_payload: bool | None = None
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    metadata: dict[str, Any] | None = None

    @classmethod
    def from_create_kwargs(cls, kwargs: dict[str, Any]) -> CollectionRecord:
        """From ``create_collection``'s keyword arguments.

        Raises:
            UnsupportedCallError: custom sharding, ``init_from`` or strict mode.
            ValueError: neither ``vectors_config`` nor ``sparse_vectors_config``, or a name in both.
        """
        for key, what in _UNSUPPORTED.items():
            if kwargs.get(key):
                raise UnsupportedCallError(
                    f"create_collection({key}=...): {what} are not supported by the embedded Qdrant Edge store; "
                    "use a Qdrant server (url=...) or open_store(path, engine='local')"
                )
        vectors = kwargs.get("vectors_config")
        sparse = dict(kwargs.get("sparse_vectors_config") or {}) or None
        if not vectors and not sparse:
            raise ValueError(
                "create_collection needs vectors_config (a VectorParams or {name: VectorParams}) "
                "or sparse_vectors_config ({name: SparseVectorParams})"
            )
        dense = dict(vectors) if isinstance(vectors, dict) else (vectors or {})
        both = sorted(set(dense if isinstance(dense, dict) else {UNNAMED}) & set(sparse or {}))
        if both:
            raise ValueError(
                f"create_collection: {both} named in both vectors_config and sparse_vectors_config; "
                "a vector name is either dense or sparse, rename one of them"
            )
        skip = {"vectors", "sparse_vectors"}
        known = {k: v for k, v in kwargs.items() if k in cls.model_fields and k not in skip and v is not None}
        return cls(vectors=dense, sparse_vectors=sparse, **known)

    @property
    def named(self) -> dict[str, models.VectorParams]:
        """Vector name -> params (the unnamed vector is ``""``)."""
        return dict(self.vectors) if isinstance(self.vectors, dict) else {UNNAMED: self.vectors}

    @property
    def sparse(self) -> dict[str, models.SparseVectorParams]:
        """Sparse vector name -> params ({} without sparse vectors)."""
        return dict(self.sparse_vectors or {})

    def check_vector(self, name: str | None, *, sparse: bool, where: str) -> None:
        """Check that ``name`` is a vector of the kind a value or query needs, before it reaches Qdrant Edge.

        Args:
            name: the vector name (``using=``, or a key of a point's vectors); None is the unnamed vector.
            sparse: whether the value is a ``SparseVector``.
            where: the call, for the message (e.g. ``"query_points(using=...)"``).

        Raises:
            ValueError: no such vector, or a sparse value for a dense vector (or the reverse);
                the message names the vector, what the collection has, and the fix.
        """
        name = UNNAMED if name is None else name
        dense, sparse_names = sorted(self.named), sorted(self.sparse)
        if name in (sparse_names if sparse else dense):
            return
        have = f"the collection has dense vectors {dense} and sparse vectors {sparse_names}"
        if sparse and name in dense:
            raise ValueError(
                f"{where}: {name!r} is a dense vector but got a SparseVector; send it to a sparse vector "
                f"instead ({have})"
            )
        if not sparse and name in sparse_names:
            raise ValueError(
                f"{where}: {name!r} is a sparse vector but got a dense vector or multivector; send it a "
                "models.SparseVector(indices=..., values=...), e.g. from qdrant_tools.sparse.Bm25Sparse"
            )
        kind = "sparse vector" if sparse else "vector"
        what = f"{kind} named {name!r}" if name else f"unnamed {kind} (name it with using=...)"
        raise ValueError(
            f"{where}: no {what}; {have}. Use one of those names, or create the collection with it "
            "(sparse_vectors_config={name: models.SparseVectorParams(...)} for a sparse vector)"
        )

    # ------------------------------------------------------------------ to Qdrant Edge
    def edge_config(self) -> E.EdgeConfig:
        """The ``EdgeConfig`` of a new shard."""
        return E.EdgeConfig(
            vectors={name: self._edge_vector(p) for name, p in self.named.items()},
            sparse_vectors={name: edge_sparse(p) for name, p in self.sparse.items()} or None,
            on_disk_payload=self.on_disk_payload,
            hnsw_config=edge_hnsw(self.hnsw_config),
            quantization_config=edge_quantization(self.quantization_config),
            optimizers=self._edge_optimizers(),
        )

    def _edge_vector(self, p: models.VectorParams) -> E.EdgeVectorParams:
        multi = p.multivector_config
        return E.EdgeVectorParams(
            size=p.size,
            distance=to_edge(E.Distance, p.distance),
            on_disk=p.on_disk,
            multivector_config=E.MultiVectorConfig(to_edge(E.MultiVectorComparator, multi.comparator))
            if multi
            else None,
            datatype=to_edge(E.VectorStorageDatatype, p.datatype) if p.datatype else None,
            quantization_config=edge_quantization(p.quantization_config),
            hnsw_config=edge_hnsw(self.hnsw_config, p.hnsw_config) if p.hnsw_config else None,
            memory=to_edge(E.Memory, p.memory) if p.memory else None,
        )

    def _edge_optimizers(self) -> E.EdgeOptimizersConfig | None:
        o = self.optimizers_config
        if o is None:
            return None
        return E.EdgeOptimizersConfig(
            deleted_threshold=o.deleted_threshold,
            vacuum_min_vector_number=o.vacuum_min_vector_number,
            default_segment_number=o.default_segment_number,
            max_segment_size=o.max_segment_size,
            indexing_threshold=o.indexing_threshold,
            prevent_unoptimized=o.prevent_unoptimized,
        )

    # ------------------------------------------------------------------ to qdrant-client
    def hnsw(self) -> models.HnswConfig:
        """The collection's HNSW settings with Qdrant's defaults filled in."""
        given = self.hnsw_config.model_dump(exclude_none=True) if self.hnsw_config else {}
        return models.HnswConfig(**{**HNSW_DEFAULTS, **given})

    def params(self) -> models.CollectionParams:
        """``CollectionInfo.config.params``: the vectors as given, plus the recorded settings."""
        return models.CollectionParams(
            vectors=self.vectors,
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
            write_consistency_factor=self.write_consistency_factor,
            on_disk_payload=self.on_disk_payload,
            sparse_vectors=self.sparse_vectors,
        )

    def optimizers(self) -> models.OptimizersConfig:
        given = self.optimizers_config.model_dump(exclude_none=True) if self.optimizers_config else {}
        base = {"deleted_threshold": 0.2, "vacuum_min_vector_number": 1000, "default_segment_number": 0}
        return models.OptimizersConfig(**{**base, "flush_interval_sec": 5, **given})


def edge_sparse(p: models.SparseVectorParams) -> E.EdgeSparseVectorParams:
    """The Edge parameters of a sparse vector (index settings and the IDF modifier)."""
    index = p.index or models.SparseIndexParams()
    return E.EdgeSparseVectorParams(
        full_scan_threshold=index.full_scan_threshold,
        on_disk=index.on_disk,
        modifier=to_edge(E.Modifier, p.modifier) if p.modifier else None,
        datatype=to_edge(E.VectorStorageDatatype, index.datatype) if index.datatype else None,
        memory=to_edge(E.Memory, index.memory) if index.memory else None,
    )


def edge_hnsw(*diffs: models.HnswConfigDiff | None) -> E.HnswIndexConfig | None:
    """One ``HnswIndexConfig``: Qdrant's defaults, overridden by each diff in turn (None if every diff is None)."""
    if all(d is None for d in diffs):
        return None
    merged: dict[str, Any] = dict(HNSW_DEFAULTS)
    for d in diffs:
        if d is not None:
            merged.update(d.model_dump(exclude_none=True))
    memory = merged.pop("memory", None)
    return E.HnswIndexConfig(
        m=merged.pop("m"),
        ef_construct=merged.pop("ef_construct"),
        full_scan_threshold=merged.pop("full_scan_threshold"),
        max_indexing_threads=merged.pop("max_indexing_threads", 0),
        memory=to_edge(E.Memory, memory) if memory else None,
        **merged,
    )


def edge_quantization(q: Any) -> Any:
    """The Edge quantization config of a qdrant-client one (None stays None).

    Raises:
        UnsupportedCallError: a quantization kind Edge lacks.
    """
    if q is None:
        return None

    def memory(c: Any) -> Any:
        return to_edge(E.Memory, c.memory) if c.memory else None

    if isinstance(q, models.ScalarQuantization):
        c = q.scalar
        return E.ScalarQuantizationConfig(
            to_edge(E.ScalarType, c.type), quantile=c.quantile, always_ram=c.always_ram, memory=memory(c)
        )
    if isinstance(q, models.ProductQuantization):
        c = q.product
        return E.ProductQuantizationConfig(
            to_edge(E.CompressionRatio, c.compression), always_ram=c.always_ram, memory=memory(c)
        )
    if isinstance(q, models.BinaryQuantization):
        c = q.binary
        return E.BinaryQuantizationConfig(
            always_ram=c.always_ram,
            encoding=to_edge(E.BinaryQuantizationEncoding, c.encoding) if c.encoding else None,
            query_encoding=to_edge(E.BinaryQuantizationQueryEncoding, c.query_encoding) if c.query_encoding else None,
            memory=memory(c),
        )
    if isinstance(q, models.TurboQuantization):
        c = q.turbo
        bits = to_edge(E.TurboQuantBitSize, c.bits) if c.bits else None
        return E.TurboQuantQuantizationConfig(always_ram=c.always_ram, bits=bits, memory=memory(c))
    raise UnsupportedCallError(f"quantization {type(q).__name__} is not supported by the embedded store")
