"""The compact-layout arms keep the same points with other vector storage, and their copies are quantized."""

from __future__ import annotations

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools.search import collection_vectors, ranking_params
from qdrant_tools.store import open_store
from qdrant_tools.subchunks import FUSED_VECTOR, SUBCHUNK_VECTOR
from research.storage_arms import ARMS, SHIPPED, arm_vectors, copy_as

N, ROWS, DIM = 300, 4, 16


def _multi() -> models.VectorParams:
    return models.VectorParams(
        size=DIM,
        distance=models.Distance.DOT,
        multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
        hnsw_config=models.HnswConfigDiff(m=0),
    )


def _vectors() -> dict[str, models.VectorParams]:
    node = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    return {"vanilla": node, SUBCHUNK_VECTOR: _multi(), FUSED_VECTOR: _multi()}


def test_the_float_arm_changes_nothing():
    assert arm_vectors(_vectors(), ARMS[0]) == _vectors()


def test_the_shipped_arm_is_the_default_layouts_storage():
    from qdrant_tools.layout import NodeLayout

    layout, arm = NodeLayout(), ARMS[SHIPPED]
    assert (arm.fused_copy, arm.fused_on_disk, arm.node_on_disk) == (
        layout.fused_quantization,
        True,
        layout.node_on_disk,
    )


def test_an_arm_quantizes_the_fused_rows_and_maps_their_originals():
    kept = arm_vectors(_vectors(), ARMS[4])
    assert kept[FUSED_VECTOR].on_disk and kept[FUSED_VECTOR].quantization_config.scalar is not None
    assert kept["vanilla"].on_disk and kept["vanilla"].quantization_config.binary is not None
    assert kept[SUBCHUNK_VECTOR] == _vectors()[SUBCHUNK_VECTOR]


@pytest.fixture()
def store_with_source():
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(N, ROWS, DIM)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=-1, keepdims=True)
    store = open_store(":memory:", auto_index=False)
    store.create_collection("src", vectors_config=_vectors(), metadata={"fused_weight": 0.5})
    points = [
        models.PointStruct(
            id=i,
            vector={"vanilla": rows[i, 0].tolist(), SUBCHUNK_VECTOR: rows[i].tolist(), FUSED_VECTOR: rows[i].tolist()},
            payload={"i": i},
        )
        for i in range(N)
    ]
    store.upsert("src", points=points)
    yield store, rows
    store.close()


def test_a_copy_holds_every_point_and_ranks_by_the_originals(store_with_source):
    store, rows = store_with_source
    assert copy_as(store, "src", "arm", ARMS[1], index_all=True) == N
    vectors = collection_vectors(store, "arm")
    assert vectors.quantized == frozenset({FUSED_VECTOR})  # arm 1 leaves the node vector as the source keeps it
    q = rows[7, 2]
    params = ranking_params(vectors, FUSED_VECTOR)
    hits = store.query_points("arm", query=[q.tolist()], using=FUSED_VECTOR, limit=5, search_params=params).points
    exact = (rows @ q).max(axis=1)
    assert [h.id for h in hits] == [int(i) for i in np.argsort(-exact)[:5]]
