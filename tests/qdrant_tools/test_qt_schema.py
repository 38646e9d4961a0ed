import pytest
from qdrant_client import models

from qdrant_tools.schema import SchemaMismatchError, check_collection, ensure_collection
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


def test_size_mismatch_names_both_sizes_and_fix(client):
    ensure_collection(client, "c", [VectorConfig(name="calibrated", size=8)])
    with pytest.raises(SchemaMismatchError, match=r"size 8.*MiniLM.*size 384.*fix: ingest into a new collection"):
        check_collection(client, "c", [VectorConfig(name="calibrated", size=384)], {"calibrated": "MiniLM"})


def test_missing_vector_name_lists_existing_names(client):
    ensure_collection(client, "c", [VectorConfig(name="vanilla", size=8)])
    with pytest.raises(SchemaMismatchError, match=r"no vector named 'calibrated'.*'vanilla': size 8"):
        check_collection(client, "c", [VectorConfig(name="calibrated", size=8)])


def test_distance_mismatch_is_reported(client):
    client.create_collection(
        "c", vectors_config={"calibrated": models.VectorParams(size=8, distance=models.Distance.DOT)}
    )
    with pytest.raises(SchemaMismatchError, match=r"distance Dot.*needs Cosine"):
        check_collection(client, "c", [VectorConfig(name="calibrated", size=8)])


def test_unnamed_vector_collection_is_rejected(client):
    client.create_collection("c", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE))
    with pytest.raises(SchemaMismatchError, match="one unnamed vector"):
        check_collection(client, "c", [VectorConfig(name="calibrated", size=8)])


def test_invalid_spec_is_rejected_early():
    with pytest.raises(ValueError, match="size\n  Input should be greater than 0"):
        VectorConfig(name="x", size=0)
