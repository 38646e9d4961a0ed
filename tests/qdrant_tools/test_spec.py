"""Collection specs: parse, create, validate, apply changes (both embedded stores; server-only settings via a fake info)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from qdrant_client import models

from qdrant_tools.spec import (
    CollectionMismatchError,
    CollectionSpec,
    HnswSpec,
    PayloadIndex,
    QuantizationSpec,
    SpecError,
    VectorConfig,
    apply_changes,
    create_collection,
    is_embedded,
    plan_changes,
    validate_collection,
)
from qdrant_tools.store import open_store


@pytest.fixture(params=["edge", "local"])
def client(request):
    c = open_store(":memory:", engine=request.param)
    yield c
    c.close()


def vanilla_spec(**kw) -> CollectionSpec:
    return CollectionSpec(
        name="docs", vectors=[VectorConfig(name="vanilla", size=8, on_disk=True, hnsw=HnswSpec(m=32))], **kw
    )


def test_create_kwargs_carry_every_setting():
    spec = CollectionSpec(
        name="docs",
        vectors=[
            VectorConfig(
                name="calibrated",
                size=384,
                distance="dot",
                on_disk=True,
                quantization=QuantizationSpec(kind="int8", quantile=0.99),
            )
        ],
        shard_number=4,
        replication_factor=2,
        write_consistency_factor=1,
        on_disk_payload=True,
        hnsw=HnswSpec(m=16, ef_construct=200),
        quantization=QuantizationSpec(kind="binary"),
    )
    kw = spec.create_kwargs()
    vp = kw["vectors_config"]["calibrated"]
    assert (vp.size, vp.distance, vp.on_disk) == (384, models.Distance.DOT, True)
    assert vp.quantization_config.scalar.quantile == 0.99
    assert (kw["shard_number"], kw["replication_factor"], kw["write_consistency_factor"]) == (4, 2, 1)
    assert kw["on_disk_payload"] is True
    assert (kw["hnsw_config"].m, kw["hnsw_config"].ef_construct) == (16, 200)
    assert isinstance(kw["quantization_config"], models.BinaryQuantization)


def test_spec_file_roundtrip_json_and_toml(tmp_path):
    spec = vanilla_spec(shard_number=2)
    (tmp_path / "s.json").write_text(spec.to_json())
    assert CollectionSpec.from_file(tmp_path / "s.json") == spec
    (tmp_path / "s.toml").write_text(
        'name = "docs"\nshard_number = 2\n[[vectors]]\nname = "vanilla"\nsize = 8\non_disk = true\n'
        "[vectors.hnsw]\nm = 32\n"
    )
    assert CollectionSpec.from_file(tmp_path / "s.toml") == spec


def test_invalid_spec_file_names_path_field_and_value(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "docs", "vectors": [{"name": "v", "size": 8, "distance": "cos"}]}))
    with pytest.raises(SpecError) as err:
        CollectionSpec.from_file(bad)
    msg = str(err.value)
    assert "bad.json" in msg and "vectors.0.distance" in msg and "'cos'" in msg and "'cosine'" in msg


def test_spec_rejects_typos_duplicates_and_inconsistent_factors():
    with pytest.raises(ValidationError, match="replicaton_factor"):
        CollectionSpec.model_validate({"name": "d", "vectors": [{"name": "v", "size": 2}], "replicaton_factor": 2})
    with pytest.raises(ValidationError, match=r"vector names must be distinct, got duplicates \['v'\]"):
        CollectionSpec(name="d", vectors=[VectorConfig(name="v", size=2), VectorConfig(name="v", size=3)])
    with pytest.raises(ValidationError, match="write_consistency_factor=3 exceeds replication_factor=2"):
        CollectionSpec(
            name="d", vectors=[VectorConfig(name="v", size=2)], replication_factor=2, write_consistency_factor=3
        )
    with pytest.raises(ValidationError, match="needs compression"):
        QuantizationSpec(kind="product")


def test_a_spec_file_with_qdrants_name_scalar_reads_as_int8(tmp_path):
    record = {"name": "d", "vectors": [{"name": "v", "size": 8, "quantization": {"kind": "scalar", "quantile": 0.99}}]}
    (tmp_path / "s.json").write_text(json.dumps(record))
    spec = CollectionSpec.from_file(tmp_path / "s.json")
    assert spec.vectors[0].quantization == QuantizationSpec(kind="int8", quantile=0.99)
    assert json.loads(spec.to_json())["vectors"][0]["quantization"]["kind"] == "int8"
    with pytest.raises(ValidationError, match="kind") as err:
        QuantizationSpec(kind="int4")
    assert "'int8', 'binary' or 'product'" in str(err.value) and "int4" in str(err.value)


def test_create_then_validate_matches_and_lists_unverified_settings(client):
    spec = vanilla_spec(shard_number=2, replication_factor=2)
    assert create_collection(client, spec) is True
    report = validate_collection(client, spec)
    assert report.ok and report.differences == []
    unverified = {  # local mode keeps no payload indexes; the Edge store keeps them but is one shard
        "local": ["shard_number", "replication_factor", "payload_indexes"],
        "edge": ["shard_number", "replication_factor"],
    }
    assert report.unverified == unverified["local" if is_embedded(client) else "edge"]
    assert create_collection(client, spec) is False  # exists and matches


def test_validate_reports_size_distance_and_param_differences(client):
    create_collection(client, vanilla_spec())
    other = CollectionSpec(
        name="docs", vectors=[VectorConfig(name="vanilla", size=16, distance="dot", on_disk=False, hnsw=HnswSpec(m=8))]
    )
    report = validate_collection(client, other)
    got = {d.setting: (d.expected, d.actual, d.fixable) for d in report.differences}
    assert got == {
        "vectors.vanilla.size": (16, 8, False),
        "vectors.vanilla.distance": ("dot", "cosine", False),
        "vectors.vanilla.on_disk": (False, True, True),
        "vectors.vanilla.hnsw.m": (8, 32, True),
    }
    with pytest.raises(CollectionMismatchError, match="vectors.vanilla.size: spec 16, collection 8"):
        create_collection(client, other)


def test_apply_adds_calibrated_vector_and_keeps_points(client):
    spec = vanilla_spec()
    create_collection(client, spec)
    client.upsert("docs", points=[models.PointStruct(id=1, vector={"vanilla": [1.0] * 8}, payload={"a": 1})], wait=True)
    target = spec.model_copy(update={"vectors": spec.vectors + (VectorConfig(name="calibrated", size=8),)})
    plan = plan_changes(client, target)
    assert [v.name for v in plan.add_vectors] == ["calibrated"] and not plan.blocked
    apply_changes(client, target)
    vectors = client.get_collection("docs").config.params.vectors
    assert sorted(vectors) == ["calibrated", "vanilla"] and vectors["calibrated"].size == 8
    assert validate_collection(client, target).ok
    point = client.retrieve("docs", [1], with_vectors=True)[0]
    assert point.payload == {"a": 1} and list(point.vector) == ["vanilla"]
    client.upsert("docs", points=[models.PointStruct(id=1, vector={"vanilla": [1.0] * 8, "calibrated": [0.5] * 8})])
    assert sorted(client.retrieve("docs", [1], with_vectors=True)[0].vector) == ["calibrated", "vanilla"]


def test_apply_refuses_rebuild_changes_before_any_write(client):
    spec = vanilla_spec()
    create_collection(client, spec)
    target = CollectionSpec(
        name="docs", vectors=[VectorConfig(name="vanilla", size=16), VectorConfig(name="calibrated", size=16)]
    )
    with pytest.raises(CollectionMismatchError, match="BLOCKED vectors.vanilla.size: spec 16, collection 8"):
        apply_changes(client, target)
    assert list(client.get_collection("docs").config.params.vectors) == ["vanilla"]  # calibrated not added


def test_apply_missing_collection_says_create_first(client):
    with pytest.raises(CollectionMismatchError, match="does not exist.*posfair collection create"):
        apply_changes(client, vanilla_spec())


class ServerLike:
    """Answers get_collection like a Qdrant server (which reports collection-level settings)."""

    def __init__(self, info: models.CollectionInfo):
        self.info = info
        self.calls: list[tuple] = []

    def collection_exists(self, name):
        return True

    def get_collection(self, name):
        return self.info

    def create_payload_index(self, *a, **k):
        self.calls.append(("create_payload_index", a[1], a[2]))

    def update_collection(self, name, **kw):
        self.calls.append(("update_collection", sorted(kw)))

    def create_vector_name(self, *a, **k):  # pragma: no cover - not expected
        self.calls.append(("create_vector_name", a[1]))


def server_info(shards=1, replication=1, payload_schema=None) -> models.CollectionInfo:
    return models.CollectionInfo(
        status=models.CollectionStatus.GREEN,
        optimizer_status=models.OptimizersStatusOneOf.OK,
        segments_count=1,
        config=models.CollectionConfig(
            params=models.CollectionParams(
                vectors={
                    "vanilla": models.VectorParams(
                        size=8, distance=models.Distance.COSINE, on_disk=True, hnsw_config=models.HnswConfigDiff(m=32)
                    )
                },
                shard_number=shards,
                replication_factor=replication,
            ),
            hnsw_config=models.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10000),
            optimizer_config=models.OptimizersConfig(
                deleted_threshold=0.2, vacuum_min_vector_number=1000, default_segment_number=0, flush_interval_sec=5
            ),
            wal_config=models.WalConfig(wal_capacity_mb=32, wal_segments_ahead=0),
        ),
        payload_schema=payload_schema or {},
    )


def test_server_validation_checks_shards_replication_and_indexes():
    keyword = models.PayloadIndexInfo(data_type=models.PayloadSchemaType.KEYWORD, points=0)
    client = ServerLike(server_info(shards=1, replication=1, payload_schema={"doc_id": keyword}))
    spec = vanilla_spec(shard_number=3, replication_factor=2)
    report = validate_collection(client, spec)
    got = {d.setting: (d.expected, d.actual, d.fixable) for d in report.differences}
    assert got == {
        "shard_number": (3, 1, False),
        "replication_factor": (2, 1, True),
        "payload_indexes._posfair.version": ("keyword", "missing", True),
        "payload_indexes._posfair.format": ("integer", "missing", True),
    }
    assert report.unverified == []
    with pytest.raises(CollectionMismatchError, match="BLOCKED shard_number"):
        apply_changes(client, spec)
    assert client.calls == []  # refused before any write


def test_server_change_plan_updates_replication_and_adds_indexes():
    client = ServerLike(server_info(replication=1))
    spec = vanilla_spec(replication_factor=2, payload_indexes=[PayloadIndex(field="doc_id")])
    plan = plan_changes(client, spec)
    assert plan.collection_params == {"collection_params": {"replication_factor": 2}}
    assert [i.field for i in plan.add_indexes] == ["doc_id"] and not plan.blocked
    apply_changes(client, spec)
    assert client.calls == [
        ("update_collection", ["collection_params"]),
        ("create_payload_index", "doc_id", models.PayloadSchemaType.KEYWORD),
    ]
