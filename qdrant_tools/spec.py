"""Declarative collection specs: create, validate and apply changes to a Qdrant collection.

A :class:`CollectionSpec` says everything an operator decides about a collection (named vectors, HNSW,
quantization, on-disk settings, payload indexes, shards, replication), kept in a JSON or TOML file:
:func:`create_collection` creates it (or checks an existing one), :func:`validate_collection` lists every
difference and what the store does not report, and :func:`plan_changes` / :func:`apply_changes` bring an
existing collection to the spec online, refusing before any write a change that needs a rebuild
(docs/scale-out.md, "Collection specs").

Example:
    >>> from qdrant_client import QdrantClient
    >>> from qdrant_tools.spec import CollectionSpec, VectorConfig, create_collection, validate_collection
    >>> spec = CollectionSpec(name="docs", vectors=[VectorConfig(name="calibrated", size=384)])
    >>> client = QdrantClient(":memory:")
    >>> create_collection(client, spec)
    True
    >>> validate_collection(client, spec).ok
    True
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from qdrant_client import models

from qdrant_tools.store.protocol import StoreLike, store_traits

logger = logging.getLogger(__name__)


class CollectionMismatchError(ValueError):
    """The collection cannot be used as asked: by a run that writes to it
    (:func:`qdrant_tools.compat.check_writable`), against its spec (:func:`validate_collection`), or with a
    setting that contradicts the recipe it records (llamaindex-posfair's ``Recipe``).

    The message names the collection's side, this run's side and the fix.
    """


Distance = Literal["cosine", "dot", "euclid", "manhattan"]
IndexType = Literal["keyword", "integer", "float", "bool", "text", "uuid", "datetime"]
_DISTANCE = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclid": models.Distance.EUCLID,
    "manhattan": models.Distance.MANHATTAN,
}


class SpecError(ValueError):
    """A spec file or value is invalid."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HnswSpec(_Frozen):
    """HNSW index settings (``None`` = the server default).

    Example:
        >>> HnswSpec(m=32, ef_construct=200).to_qdrant().m
        32
    """

    m: int | None = Field(default=None, ge=0, le=128, description="edges per node; 0 disables the graph; 16 is typical")
    ef_construct: int | None = Field(default=None, ge=4, le=4096, description="build-time beam width; 100-512 typical")
    full_scan_threshold: int | None = Field(default=None, ge=0, description="KB below which a segment is scanned")
    on_disk: bool | None = Field(default=None, description="keep the graph on disk (memory-mapped)")

    def to_qdrant(self) -> models.HnswConfigDiff:
        return models.HnswConfigDiff(**self.model_dump(exclude_none=True))


class QuantizationSpec(_Frozen):
    """Vector quantization.

    Args:
        kind: ``"int8"`` (scalar, 4x smaller, ~1% recall loss), ``"binary"`` (32x smaller; for >= 1024-dim
            models), ``"product"``: the spelling of ``posfair ingest --node-quantization`` /
            ``--fused-quantization``. Qdrant's name ``"scalar"`` (spec files written before) reads as ``"int8"``.
        always_ram: keep the quantized vectors in RAM while originals are on disk.
        quantile: int8 only; clip outliers (0.99 typical).
        compression: product only; ``"x4"`` ... ``"x64"``.

    Example:
        >>> type(QuantizationSpec(kind="int8").to_qdrant()).__name__
        'ScalarQuantization'
        >>> QuantizationSpec(kind="scalar").kind
        'int8'
    """

    kind: Literal["int8", "binary", "product"]
    always_ram: bool | None = True
    quantile: float | None = Field(default=None, gt=0.5, le=1.0)
    compression: Literal["x4", "x8", "x16", "x32", "x64"] | None = None

    @field_validator("kind", mode="before")
    @classmethod
    def _int8_is_scalar(cls, value: Any) -> Any:
        """Qdrant's name for the int8 copy, ``"scalar"``, reads as ``"int8"``."""
        return "int8" if value == "scalar" else value

    @model_validator(mode="after")
    def _check(self) -> QuantizationSpec:
        if self.quantile is not None and self.kind != "int8":
            raise ValueError(f"quantile applies to kind='int8' only, got kind={self.kind!r}; remove quantile")
        if self.kind == "product" and self.compression is None:
            raise ValueError("kind='product' needs compression ('x4'...'x64'); e.g. compression='x16'")
        if self.kind != "product" and self.compression is not None:
            raise ValueError(f"compression applies to kind='product' only, got kind={self.kind!r}; remove compression")
        return self

    def to_qdrant(self) -> Any:
        if self.kind == "int8":
            return models.ScalarQuantization(
                scalar=models.ScalarQuantizationConfig(
                    type=models.ScalarType.INT8, quantile=self.quantile, always_ram=self.always_ram
                )
            )
        if self.kind == "binary":
            return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=self.always_ram))
        return models.ProductQuantization(
            product=models.ProductQuantizationConfig(
                compression=models.CompressionRatio(self.compression), always_ram=self.always_ram
            )
        )

    @staticmethod
    def describe(q: Any) -> str | None:
        """Comparable description of a qdrant quantization config (or None)."""
        if q is None:
            return None
        if isinstance(q, models.ScalarQuantization):
            return f"int8(quantile={q.scalar.quantile}, always_ram={q.scalar.always_ram})"
        if isinstance(q, models.BinaryQuantization):
            return f"binary(always_ram={q.binary.always_ram})"
        if isinstance(q, models.ProductQuantization):
            return f"product({q.product.compression.value}, always_ram={q.product.always_ram})"
        return repr(q)  # pragma: no cover - future quantization kinds


class VectorConfig(_Frozen):
    """One named vector: dense (one vector per point) or a multivector (several, scored by MaxSim).

    The one type posfair describes a vector it writes with: a :class:`CollectionSpec` holds them,
    and :func:`qdrant_tools.compat.check_writable` checks a live collection against them.
    A multivector holds e.g. the sub-chunk vectors of a node; it is only used to
    re-score candidates, so give it ``hnsw=HnswSpec(m=0)`` (no graph) unless it is
    searched on its own.

    Example:
        >>> VectorConfig(name="calibrated", size=384, on_disk=True).to_qdrant().on_disk
        True
        >>> VectorConfig(name="subchunks", size=384, multivector=True).to_qdrant().multivector_config.comparator.value
        'max_sim'
    """

    name: str = Field(min_length=1, description="vector name, e.g. 'vanilla' or 'calibrated'")
    size: int = Field(gt=0, description="embedding dimension of the encoder (384 for all-MiniLM-L6-v2)")
    distance: Distance = "cosine"
    on_disk: bool | None = Field(default=None, description="memory-map the original vectors")
    hnsw: HnswSpec | None = None
    quantization: QuantizationSpec | None = None
    multivector: bool = Field(default=False, description="several vectors per point, scored by MaxSim")

    def to_qdrant(self) -> models.VectorParams:
        multi = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM) if self.multivector else None
        return models.VectorParams(
            size=self.size,
            distance=_DISTANCE[self.distance],
            on_disk=self.on_disk,
            hnsw_config=self.hnsw.to_qdrant() if self.hnsw else None,
            quantization_config=self.quantization.to_qdrant() if self.quantization else None,
            multivector_config=multi,
        )

    def params_diff(self) -> models.VectorParamsDiff:
        """The settings of this vector an existing collection can change (HNSW, quantization, on-disk)."""
        return models.VectorParamsDiff(
            hnsw_config=self.hnsw.to_qdrant() if self.hnsw else None,
            quantization_config=self.quantization.to_qdrant() if self.quantization else None,
            on_disk=self.on_disk,
        )

    @property
    def qdrant_distance(self) -> models.Distance:
        """The distance as ``models.Distance`` (``"cosine"`` -> ``Distance.COSINE``)."""
        return _DISTANCE[self.distance]


class SparseVectorConfig(_Frozen):
    """One named sparse vector (e.g. BM25 term weights from :class:`qdrant_tools.sparse.Bm25Sparse`).

    Example:
        >>> SparseVectorConfig(name="bm25").to_qdrant().modifier.value
        'idf'
    """

    name: str = Field(min_length=1, description="sparse vector name, e.g. 'bm25'")
    modifier: Literal["idf", "none"] = Field("idf", description="'idf': Qdrant weights query terms by IDF (BM25)")

    def to_qdrant(self) -> models.SparseVectorParams:
        return models.SparseVectorParams(modifier=models.Modifier.IDF if self.modifier == "idf" else None)


class PayloadIndex(_Frozen):
    """A payload field index (filters on un-indexed fields scan every point on a server)."""

    field: str = Field(min_length=1)
    type: IndexType = "keyword"


#: Indexes on the fields posfair ingestion filters by: the document id (top-level), the version and the
#: payload format (in ``_posfair``: :mod:`qdrant_tools.payload`). Collections written in payload format 1
#: keep their indexes on the top-level ``version`` and ``posfair_payload_format``.
POSFAIR_PAYLOAD_INDEXES: tuple[PayloadIndex, ...] = (
    PayloadIndex(field="doc_id", type="keyword"),
    PayloadIndex(field="_posfair.version", type="keyword"),
    PayloadIndex(field="_posfair.format", type="integer"),
)


class CollectionSpec(_Frozen):
    """Everything an operator decides about one collection.

    Args:
        name: collection name.
        vectors: named dense vectors (distinct names).
        shard_number: shards (server/cluster; fixed at creation). ``None`` = server default.
        replication_factor: copies of each shard (cluster only; 2 survives one node).
        write_consistency_factor: replicas that must confirm a write.
        on_disk_payload: keep payloads on disk.
        hnsw: collection-wide HNSW defaults.
        quantization: collection-wide quantization default.
        payload_indexes: fields to index (defaults to the ones posfair filters by).
        sparse_vectors: named sparse vectors (BM25), beside the dense ones.
        metadata: collection metadata written at creation (e.g. the ingestion recipe,
            :mod:`qdrant_tools.metadata`); a server keeps it, so does the embedded store.

    Raises:
        pydantic.ValidationError: on an invalid or unknown field (names it and what is valid).

    Example:
        >>> spec = CollectionSpec.model_validate({"name": "docs", "vectors": [{"name": "v", "size": 8}]})
        >>> [i.field for i in spec.payload_indexes]
        ['doc_id', '_posfair.version', '_posfair.format']
    """

    name: str = Field(min_length=1, max_length=255)
    vectors: tuple[VectorConfig, ...] = Field(min_length=1)
    shard_number: int | None = Field(default=None, ge=1, le=1024)
    replication_factor: int | None = Field(default=None, ge=1, le=16)
    write_consistency_factor: int | None = Field(default=None, ge=1, le=16)
    on_disk_payload: bool | None = None
    hnsw: HnswSpec | None = None
    quantization: QuantizationSpec | None = None
    payload_indexes: tuple[PayloadIndex, ...] = POSFAIR_PAYLOAD_INDEXES
    metadata: dict[str, Any] | None = None
    sparse_vectors: tuple[SparseVectorConfig, ...] = ()

    @field_validator("vectors")
    @classmethod
    def _distinct(cls, v: tuple[VectorConfig, ...]) -> tuple[VectorConfig, ...]:
        names = [x.name for x in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"vector names must be distinct, got duplicates {dup}; rename one of them")
        return v

    @model_validator(mode="after")
    def _check(self) -> CollectionSpec:
        if (
            self.write_consistency_factor
            and self.replication_factor
            and self.write_consistency_factor > self.replication_factor
        ):
            raise ValueError(
                f"write_consistency_factor={self.write_consistency_factor} exceeds replication_factor="
                f"{self.replication_factor}; a write could never be confirmed. Lower it or raise replication_factor"
            )
        return self

    # ------------------------------------------------------------------ io
    @classmethod
    def from_file(cls, path: str | Path) -> CollectionSpec:
        """Load a spec from ``.json`` or ``.toml``.

        Raises:
            SpecError: unreadable file, unknown suffix or invalid content (with the path and the field).
        """
        path = Path(path)
        if not path.is_file():
            raise SpecError(f"spec file {str(path)!r} does not exist; write one with `posfair collection example-spec`")
        text = path.read_text(encoding="utf-8")
        try:
            if path.suffix.lower() == ".json":
                data = json.loads(text)
            elif path.suffix.lower() == ".toml":
                import tomllib

                data = tomllib.loads(text)
            else:
                raise SpecError(f"spec file {str(path)!r} must end in .json or .toml, got {path.suffix!r}")
        except (json.JSONDecodeError, ValueError) as exc:
            if isinstance(exc, SpecError):
                raise
            raise SpecError(f"spec file {str(path)!r} is not valid {path.suffix[1:]}: {exc}") from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            lines = [
                f"  {'.'.join(str(p) for p in e['loc'])}: {e['msg']} (got {e.get('input')!r})" for e in exc.errors()
            ]
            raise SpecError(f"spec file {str(path)!r} is invalid:\n" + "\n".join(lines)) from exc

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_none=True), indent=2)

    def vector(self, name: str) -> VectorConfig:
        for v in self.vectors:
            if v.name == name:
                return v
        raise KeyError(f"spec {self.name!r} has no vector {name!r}; it has {[v.name for v in self.vectors]}")

    def create_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``QdrantClient.create_collection`` for this spec."""
        kwargs: dict[str, Any] = {"vectors_config": {v.name: v.to_qdrant() for v in self.vectors}}
        for key in ("shard_number", "replication_factor", "write_consistency_factor", "on_disk_payload"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        if self.hnsw is not None:
            kwargs["hnsw_config"] = self.hnsw.to_qdrant()
        if self.quantization is not None:
            kwargs["quantization_config"] = self.quantization.to_qdrant()
        if self.metadata:
            kwargs["metadata"] = dict(self.metadata)
        if self.sparse_vectors:
            kwargs["sparse_vectors_config"] = {v.name: v.to_qdrant() for v in self.sparse_vectors}
        return kwargs


# ---------------------------------------------------------------------- validation
def is_embedded(client: StoreLike) -> bool:
    """Whether ``client`` is qdrant-client's embedded local mode (``:memory:`` or ``path=``).

    Read from the store's traits (:func:`qdrant_tools.store.protocol.store_traits`); a
    :class:`~qdrant_tools.retry.RetryingClient` forwards its client's.
    """
    return store_traits(client).kind == "local"


@dataclass(frozen=True)
class Difference:
    """One way a live collection differs from its spec."""

    setting: str
    expected: Any
    actual: Any
    fixable: bool  # can `apply` change it online?

    def __str__(self) -> str:
        how = "apply can fix it" if self.fixable else "needs a new collection (rebuild or snapshot restore)"
        return f"{self.setting}: spec {self.expected!r}, collection {self.actual!r} ({how})"


@dataclass
class ValidationReport:
    """Result of :func:`validate_collection`."""

    collection: str
    exists: bool
    differences: list[Difference] = field(default_factory=list)
    extra_vectors: list[str] = field(default_factory=list)  # in the collection, not in the spec (allowed)
    unverified: list[str] = field(default_factory=list)  # settings the store does not report

    @property
    def ok(self) -> bool:
        return self.exists and not self.differences

    def summary(self) -> str:
        if not self.exists:
            return f"collection {self.collection!r} does not exist; create it with `posfair collection create`"
        lines = [
            f"collection {self.collection!r}: "
            + ("matches the spec" if self.ok else f"{len(self.differences)} difference(s)")
        ]
        lines += [f"  - {d}" for d in self.differences]
        if self.extra_vectors:
            lines.append(f"  note: vectors not in the spec (left alone): {self.extra_vectors}")
        if self.unverified:
            lines.append(f"  not reported by this store, so not checked: {', '.join(self.unverified)}")
        return "\n".join(lines)


def _cmp_hnsw(prefix: str, want: HnswSpec | None, have: Any, out: list[Difference]) -> None:
    if want is None:
        return
    for key, value in want.model_dump(exclude_none=True).items():
        actual = getattr(have, key, None) if have is not None else None
        if actual != value:
            out.append(Difference(f"{prefix}hnsw.{key}", value, actual, True))


def _is_set(spec: CollectionSpec, key: str) -> bool:
    """Whether ``spec`` says something about setting ``key`` (no payload indexes says nothing)."""
    return bool(spec.payload_indexes) if key == "payload_indexes" else getattr(spec, key, None) is not None


def validate_collection(client: StoreLike, spec: CollectionSpec) -> ValidationReport:
    """Compare the live collection with ``spec``; never writes.

    Settings the spec leaves ``None`` are not compared. In qdrant-client's local
    mode collection-level HNSW/quantization, shards, replication, on-disk payload
    and payload indexes are not kept, so they are listed as ``unverified``; the
    embedded Qdrant Edge store keeps all of them but shards, replication and
    write consistency (one shard), which it lists as ``unverified``.
    """
    report = ValidationReport(collection=spec.name, exists=bool(client.collection_exists(spec.name)))
    if not report.exists:
        return report
    info = client.get_collection(spec.name)
    params = info.config.params
    live = params.vectors
    diffs = report.differences
    if not isinstance(live, dict):
        diffs.append(Difference("vectors", [v.name for v in spec.vectors], "one unnamed vector", False))
        return report
    report.extra_vectors = sorted(set(live) - {v.name for v in spec.vectors})
    for v in spec.vectors:
        have = live.get(v.name)
        if have is None:
            diffs.append(Difference(f"vectors.{v.name}", f"size {v.size}, {v.distance}", "missing", True))
            continue
        if have.size != v.size:
            diffs.append(Difference(f"vectors.{v.name}.size", v.size, have.size, False))
        if have.distance != _DISTANCE[v.distance]:
            diffs.append(Difference(f"vectors.{v.name}.distance", v.distance, have.distance.value.lower(), False))
        if (getattr(have, "multivector_config", None) is not None) != v.multivector:
            diffs.append(Difference(f"vectors.{v.name}.multivector", v.multivector, not v.multivector, False))
        if v.on_disk is not None and bool(have.on_disk) != v.on_disk:
            diffs.append(Difference(f"vectors.{v.name}.on_disk", v.on_disk, have.on_disk, True))
        _cmp_hnsw(f"vectors.{v.name}.", v.hnsw, have.hnsw_config, diffs)
        if v.quantization is not None:
            want_q = QuantizationSpec.describe(v.quantization.to_qdrant())
            have_q = QuantizationSpec.describe(have.quantization_config)
            if want_q != have_q:
                diffs.append(Difference(f"vectors.{v.name}.quantization", want_q, have_q, True))

    # settings the store does not keep or report (local mode: all but the vectors; the Edge store: one shard)
    skipped = store_traits(client).unverified_settings
    report.unverified = [k for k in skipped if _is_set(spec, k)]
    for key in ("shard_number", "replication_factor", "write_consistency_factor", "on_disk_payload"):
        want, have = getattr(spec, key), getattr(params, key, None)
        if key not in skipped and want is not None and have != want:
            diffs.append(Difference(key, want, have, key != "shard_number"))  # shards are fixed at creation
    if "hnsw" not in skipped:
        _cmp_hnsw("", spec.hnsw, info.config.hnsw_config, diffs)
    if spec.quantization is not None and "quantization" not in skipped:
        want_q = QuantizationSpec.describe(spec.quantization.to_qdrant())
        have_q = QuantizationSpec.describe(info.config.quantization_config)
        if want_q != have_q:
            diffs.append(Difference("quantization", want_q, have_q, True))
    schema = info.payload_schema or {}
    for idx in () if "payload_indexes" in skipped else spec.payload_indexes:
        have = schema.get(idx.field)
        have_type = getattr(getattr(have, "data_type", None), "value", None)
        if have_type != idx.type:
            diffs.append(Difference(f"payload_indexes.{idx.field}", idx.type, have_type or "missing", True))
    return report


def create_collection(client: StoreLike, spec: CollectionSpec, *, exist_ok: bool = True) -> bool:
    """Create the collection from ``spec``; if it exists, check it instead.

    Returns:
        True if created, False if it existed and matched.

    Raises:
        CollectionMismatchError: it exists and differs (nothing is written); the
            message lists the differences and says to run ``apply``.
        FileExistsError: it exists and ``exist_ok`` is False.
    """
    if client.collection_exists(spec.name):
        if not exist_ok:
            raise FileExistsError(f"collection {spec.name!r} already exists; pass exist_ok=True to validate it instead")
        report = validate_collection(client, spec)
        if not report.ok:
            raise CollectionMismatchError(
                f"collection {spec.name!r} exists but differs from the spec:\n{report.summary()}\n"
                "fix: `posfair collection apply` for the fixable ones, or use a new collection name"
            )
        return False
    client.create_collection(spec.name, **spec.create_kwargs())
    create_payload_indexes(client, spec.name, spec.payload_indexes)
    return True


def create_payload_indexes(client: StoreLike, collection: str, indexes: Sequence[PayloadIndex]) -> None:
    """Create payload indexes (``wait=True``); the one place posfair creates them.

    Embedded local mode accepts the call but keeps no index (it filters by
    scanning); its warning about that is muted, so every store receives the
    same calls.

    Args:
        client: a ``QdrantClient`` (or anything with its ``create_payload_index``).
        collection: collection name.
        indexes: the indexes to create.
    """
    if indexes and not store_traits(client).keeps_payload_indexes:
        logger.info("embedded local mode keeps no payload indexes; %s are recorded only", [i.field for i in indexes])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for idx in indexes:
            client.create_payload_index(collection, idx.field, models.PayloadSchemaType(idx.type), wait=True)


# ---------------------------------------------------------------------- changes
@dataclass
class ChangePlan:
    """What :func:`apply_changes` will do (or refuses to do)."""

    collection: str
    add_vectors: list[VectorConfig] = field(default_factory=list)
    update_vectors: dict[str, models.VectorParamsDiff] = field(default_factory=dict)
    add_indexes: list[PayloadIndex] = field(default_factory=list)
    collection_params: dict[str, Any] = field(default_factory=dict)
    blocked: list[Difference] = field(default_factory=list)
    not_applied: list[Difference] = field(default_factory=list)  # still different after applying

    @property
    def empty(self) -> bool:
        return not (self.add_vectors or self.update_vectors or self.add_indexes or self.collection_params)

    def summary(self) -> str:
        lines = [f"changes to {self.collection!r}:"]
        lines += [
            f"  add vector {v.name!r} (size {v.size}, {v.distance}); existing points get it on re-ingestion"
            for v in self.add_vectors
        ]
        lines += [f"  update vector {n!r}: {d.model_dump(exclude_none=True)}" for n, d in self.update_vectors.items()]
        lines += [f"  add payload index {i.field!r} ({i.type})" for i in self.add_indexes]
        lines += [f"  set {k} = {v!r}" for k, v in self.collection_params.items()]
        lines += [f"  BLOCKED {d}" for d in self.blocked]
        lines += [f"  NOT APPLIED by this store: {d}" for d in self.not_applied]
        if self.empty and not self.blocked:
            lines.append("  nothing to do")
        return "\n".join(lines)


def plan_changes(client: StoreLike, spec: CollectionSpec) -> ChangePlan:
    """Work out the online changes that bring the collection to ``spec`` (no writes).

    Raises:
        CollectionMismatchError: the collection does not exist.
    """
    report = validate_collection(client, spec)
    if not report.exists:
        raise CollectionMismatchError(
            f"collection {spec.name!r} does not exist, nothing to change; create it with `posfair collection create`"
        )
    plan = ChangePlan(collection=spec.name)
    for d in report.differences:
        if not d.fixable:
            plan.blocked.append(d)
            continue
        parts = d.setting.split(".")
        if parts[0] == "vectors" and len(parts) == 2:
            plan.add_vectors.append(spec.vector(parts[1]))
        elif parts[0] == "vectors":
            plan.update_vectors[parts[1]] = spec.vector(parts[1]).params_diff()
        elif parts[0] == "payload_indexes":  # a nested field's name has dots of its own ("_posfair.version")
            field_name = d.setting.split(".", 1)[1]
            plan.add_indexes.append(next(i for i in spec.payload_indexes if i.field == field_name))
        elif parts[0] == "hnsw":
            plan.collection_params["hnsw_config"] = spec.hnsw.to_qdrant()  # type: ignore[union-attr]
        elif parts[0] == "quantization":
            plan.collection_params["quantization_config"] = spec.quantization.to_qdrant()  # type: ignore[union-attr]
        else:
            plan.collection_params.setdefault("collection_params", {})[parts[0]] = getattr(spec, parts[0])
    return plan


def apply_changes(client: StoreLike, spec: CollectionSpec, *, dry_run: bool = False) -> ChangePlan:
    """Apply :func:`plan_changes` (all-or-nothing check first, then the writes).

    Adding a named vector leaves existing points without it; re-run ingestion
    with every encoder (e.g. ``{"vanilla": plain, "calibrated": cal}``) to fill it.

    Raises:
        CollectionMismatchError: a difference needs a rebuild; raised before any write.
    """
    plan = plan_changes(client, spec)
    if plan.blocked:
        raise CollectionMismatchError(
            plan.summary() + "\nthese changes cannot be made to an existing collection; nothing was changed. "
            "fix: create a new collection from the spec and re-ingest (or restore a snapshot into it)"
        )
    if dry_run or plan.empty:
        return plan
    for v in plan.add_vectors:
        client.create_vector_name(
            spec.name,
            v.name,
            models.DenseVectorNameConfig(dense=models.DenseVectorConfig(size=v.size, distance=_DISTANCE[v.distance])),
            wait=True,
        )
        if v.on_disk is not None or v.hnsw is not None or v.quantization is not None:
            plan.update_vectors[v.name] = v.params_diff()
    if plan.update_vectors or plan.collection_params:
        kwargs = dict(plan.collection_params)
        if "collection_params" in kwargs:
            kwargs["collection_params"] = models.CollectionParamsDiff(**kwargs["collection_params"])
        if plan.update_vectors:
            kwargs["vectors_config"] = plan.update_vectors
        client.update_collection(spec.name, **kwargs)
    create_payload_indexes(client, spec.name, plan.add_indexes)
    after = validate_collection(client, spec)
    plan.not_applied = list(after.differences)
    if plan.not_applied:
        logger.warning(
            "changes to %r left %d difference(s) the store did not apply%s: %s",
            spec.name,
            len(plan.not_applied),
            " (embedded local mode ignores HNSW/quantization/on-disk updates)" if is_embedded(client) else "",
            "; ".join(map(str, plan.not_applied)),
        )
    return plan
