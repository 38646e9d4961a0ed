"""check_writable: may a run writing this spec use the live collection? One error type, both sides and the fix."""

import pytest
from qdrant_client import models

from qdrant_tools.compat import check_writable
from qdrant_tools.schema import ensure_collection
from qdrant_tools.spec import CollectionMismatchError, CollectionSpec, SparseVectorConfig, VectorConfig


def _spec(*vectors: VectorConfig, **kwargs: object) -> CollectionSpec:
    return CollectionSpec(name="c", vectors=vectors, **kwargs)


def test_missing_collection_is_writable(client):
    assert check_writable(client, _spec(VectorConfig(name="calibrated", size=8))) is False


def test_matching_collection_is_writable(client):
    ensure_collection(client, "c", [VectorConfig(name="calibrated", size=8)])
    assert check_writable(client, _spec(VectorConfig(name="calibrated", size=8))) is True


def test_size_mismatch_names_both_sizes_and_fix(client):
    ensure_collection(client, "c", [VectorConfig(name="calibrated", size=8)])
    with pytest.raises(CollectionMismatchError, match=r"size 8.*MiniLM.*size 384.*fix: ingest into a new collection"):
        check_writable(client, _spec(VectorConfig(name="calibrated", size=384)), {"calibrated": "MiniLM"})


def test_missing_vector_name_lists_existing_names(client):
    ensure_collection(client, "c", [VectorConfig(name="vanilla", size=8)])
    with pytest.raises(CollectionMismatchError, match=r"no vector named 'calibrated'.*'vanilla': size 8"):
        check_writable(client, _spec(VectorConfig(name="calibrated", size=8)))


def test_distance_mismatch_is_reported(client):
    client.create_collection(
        "c", vectors_config={"calibrated": models.VectorParams(size=8, distance=models.Distance.DOT)}
    )
    with pytest.raises(CollectionMismatchError, match=r"distance Dot.*needs Cosine"):
        check_writable(client, _spec(VectorConfig(name="calibrated", size=8)))


def test_unnamed_vector_collection_is_rejected(client):
    client.create_collection("c", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE))
    with pytest.raises(CollectionMismatchError, match="one unnamed vector"):
        check_writable(client, _spec(VectorConfig(name="calibrated", size=8)))


def test_missing_sparse_vector_is_rejected(client):
    ensure_collection(client, "c", [VectorConfig(name="vanilla", size=8)])
    spec = _spec(VectorConfig(name="vanilla", size=8), sparse_vectors=(SparseVectorConfig(name="bm25"),))
    with pytest.raises(CollectionMismatchError, match=r"no sparse vector \['bm25'\].*--collection NEW_NAME"):
        check_writable(client, spec)


def test_points_without_the_stored_multivector_are_rejected(client):
    sub = VectorConfig(name="sub", size=8, multivector=True)
    ensure_collection(client, "c", [VectorConfig(name="vanilla", size=8), sub])
    with pytest.raises(CollectionMismatchError, match=r"holds the multivector\(s\) \['sub'\].*same sub-chunk settings"):
        check_writable(client, _spec(VectorConfig(name="vanilla", size=8)))


def test_missing_multivector_is_rejected(client):
    ensure_collection(client, "c", [VectorConfig(name="vanilla", size=8)])
    spec = _spec(VectorConfig(name="vanilla", size=8), VectorConfig(name="sub", size=8, multivector=True))
    with pytest.raises(CollectionMismatchError, match=r"without the multivector 'sub'.*--no-subchunks"):
        check_writable(client, spec)


def test_other_recorded_metadata_is_rejected(client):
    stored = _spec(VectorConfig(name="vanilla", size=8), metadata={"posfair_recipe": {"k": 1}})
    client.create_collection("c", **stored.create_kwargs())
    given = _spec(VectorConfig(name="vanilla", size=8), metadata={"posfair_recipe": {"k": 2}})
    with pytest.raises(CollectionMismatchError, match=r"other settings than this run's: posfair_recipe\.k: stored 1"):
        check_writable(client, given)


def test_matching_metadata_is_writable(client):
    stored = _spec(VectorConfig(name="vanilla", size=8), metadata={"posfair_recipe": {"k": 1}})
    client.create_collection("c", **stored.create_kwargs())
    assert check_writable(client, stored) is True
