"""Fixtures for the store tests: the same small collection in the Edge store and in qdrant-client's local mode.

The collection has the long-nodes layout: a dense ``node`` vector and a
``subchunks`` multivector (MaxSim, no HNSW graph), int and UUID point ids,
keyword / integer / list / nested payload fields.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools.store import open_store

DIM = 8
N_POINTS = 60


def vectors_config(quantized: bool = False) -> dict[str, models.VectorParams]:
    """``node`` (dense) and ``subchunks`` (MaxSim multivector, HNSW off, optionally int8-quantized)."""
    quant = (
        models.ScalarQuantization(scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, always_ram=True))
        if quantized
        else None
    )
    return {
        "node": models.VectorParams(size=DIM, distance=models.Distance.COSINE),
        "subchunks": models.VectorParams(
            size=DIM,
            distance=models.Distance.COSINE,
            multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            hnsw_config=models.HnswConfigDiff(m=0),
            quantization_config=quant,
        ),
    }


def point_id(i: int) -> int | str:
    return str(uuid.UUID(int=i * 7919 + 1)) if i % 3 else i


def make_points(n: int = N_POINTS, seed: int = 0, version: str = "v1") -> models.Batch:
    rng = np.random.default_rng(seed)
    subs = [rng.normal(size=(int(rng.integers(1, 5)), DIM)).astype(np.float32).tolist() for _ in range(n)]
    payloads = [
        {
            "doc_id": f"d{i % 5}",
            "version": version,
            "chunk_index": i,
            "tags": ["a", "b"] if i % 2 else ["c"],
            "meta": {"x": i % 3},
        }
        for i in range(n)
    ]
    node = rng.normal(size=(n, DIM)).astype(np.float32).tolist()
    return models.Batch(
        ids=[point_id(i) for i in range(n)], vectors={"node": node, "subchunks": subs}, payloads=payloads
    )


def fill(store, name: str = "c", quantized: bool = False):
    store.create_collection(name, vectors_config=vectors_config(quantized))
    store.upsert(name, make_points(), wait=True)
    return store


@pytest.fixture
def edge():
    s = fill(open_store(":memory:"))
    yield s
    s.close()


@pytest.fixture
def local():
    s = fill(open_store(":memory:", engine="local"))
    yield s
    s.close()


@pytest.fixture
def query_vector():
    return np.random.default_rng(42).normal(size=DIM).astype(np.float32).tolist()


def plain(value):
    """Results as plain data with floats rounded to 5 decimals, for comparison across engines."""
    if isinstance(value, models.BaseModel):
        return plain(value.model_dump(exclude={"version", "shard_key"}))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 5)
    return value
