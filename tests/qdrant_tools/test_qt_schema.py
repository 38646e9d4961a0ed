import pytest
from qdrant_client import models

from qdrant_tools.schema import ensure_collection
from qdrant_tools.spec import VectorConfig


def test_ensure_creates_named_vectors(client):
    assert (
        ensure_collection(client, "c", [VectorConfig(name="vanilla", size=8), VectorConfig(name="calibrated", size=8)])
        is True
    )
    vectors = client.get_collection("c").config.params.vectors
    assert {n: (p.size, p.distance) for n, p in vectors.items()} == {
        "vanilla": (8, models.Distance.COSINE),
        "calibrated": (8, models.Distance.COSINE),
    }


def test_matching_collection_is_accepted(client):
    ensure_collection(client, "c", [VectorConfig(name="calibrated", size=8)])
    assert ensure_collection(client, "c", [VectorConfig(name="calibrated", size=8)]) is False


def test_invalid_spec_is_rejected_early():
    with pytest.raises(ValueError, match="size\n  Input should be greater than 0"):
        VectorConfig(name="x", size=0)
