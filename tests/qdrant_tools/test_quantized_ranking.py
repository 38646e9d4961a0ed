"""A ranking over a quantized vector follows the original vectors (the quantized copy only shortlists)."""

from __future__ import annotations

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools.search import SearchSettings, collection_vectors, search
from qdrant_tools.store import open_store

N, DIM = 600, 32
INT8 = models.ScalarQuantization(
    scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def quantized_store():
    """One collection whose dense vector has an int8 copy, indexed so that searches read the copy."""
    rng = np.random.default_rng(3)
    vectors = _unit(rng.normal(size=(N, DIM)).astype(np.float32))
    store = open_store(":memory:", auto_index=False)
    store.create_collection(
        "q",
        vectors_config={"vanilla": models.VectorParams(size=DIM, distance=models.Distance.COSINE)},
        quantization_config=INT8,
        optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1),
    )
    points = [models.PointStruct(id=i, vector={"vanilla": vectors[i].tolist()}, payload={}) for i in range(N)]
    store.upsert("q", points=points)
    store.build_index("q")
    yield store, vectors
    store.close()


def test_layout_lists_the_quantized_vector(quantized_store):
    store, _ = quantized_store
    assert collection_vectors(store, "q").quantized == frozenset({"vanilla"})


def test_scores_are_those_of_the_original_vectors(quantized_store):
    store, vectors = quantized_store
    query = _unit(np.random.default_rng(4).normal(size=DIM).astype(np.float32))
    hits = search(store, "q", query, SearchSettings(limit=10, sparse=False))
    exact = vectors @ query
    assert [int(h.id) for h in hits] == [int(i) for i in np.argsort(-exact)[:10]]
    assert [h.score for h in hits] == pytest.approx([float(exact[int(h.id)]) for h in hits], abs=1e-5)
