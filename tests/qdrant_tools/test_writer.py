"""QdrantWriter: collection + payload indexes from the spec, schema check before writes, retries, state, deletes.

Embedded local mode keeps no payload indexes, so index creation is observed
through a ``Mock(wraps=client)`` that records every call and passes it on.
"""

from __future__ import annotations

from unittest.mock import DEFAULT, Mock

import httpx
import numpy as np
import pytest
from qdrant_client import models
from qdrant_client.http.exceptions import UnexpectedResponse

from qdrant_tools.plan import StoredVersion
from qdrant_tools.retry import RetryingClient, RetryPolicy
from qdrant_tools.schema import ensure_collection
from qdrant_tools.spec import CollectionMismatchError, CollectionSpec, VectorConfig
from qdrant_tools.store.protocol import store_traits
from qdrant_tools.writer import PointBatch, QdrantWriter, spec_for_vectors

FAST = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)
WRITES = ("create_collection", "create_payload_index", "upsert", "delete")
KEYWORD, INTEGER = models.PayloadSchemaType.KEYWORD, models.PayloadSchemaType.INTEGER


def spec(size: int = 4, name: str = "c") -> CollectionSpec:
    return CollectionSpec(name=name, vectors=[VectorConfig(name="calibrated", size=size)])


def pid(i: int) -> str:
    return f"00000000-0000-0000-0000-{i:012d}"


def payload(doc_id: str, version: str, index: int, n_chunks: int, *, user_version: str | None = None) -> dict:
    """A payload of format 2 (posfair's fields under ``_posfair``; ``user_version``: a user key ``version``)."""
    fields = {"doc_id": doc_id, "version": version, "chunk_index": index, "n_chunks": n_chunks, "truncated": False,
              "format": 2}  # fmt: skip
    top = {} if user_version is None else {"version": user_version}
    return {**top, "doc_id": doc_id, "_posfair": fields}


def payload_v1(doc_id: str, version: str, index: int, n_chunks: int) -> dict:
    """A payload of format 1 (posfair's fields flat at the top level), as collections written before hold."""
    return {"doc_id": doc_id, "version": version, "chunk_index": index, "n_chunks": n_chunks, "truncated": False,
            "posfair_payload_format": 1}  # fmt: skip


def batch(payloads: list[dict], start: int = 0, size: int = 4) -> PointBatch:
    ids = [pid(start + i) for i in range(len(payloads))]
    return PointBatch(ids=ids, payloads=payloads, vectors={"calibrated": np.ones((len(payloads), size), np.float32)})


def failing(n: int, exc: BaseException):
    """side_effect raising ``exc`` for the first ``n`` calls, then passing the call on to the wrapped client."""
    left = [n]

    def effect(*args, **kwargs):
        if left[0]:
            left[0] -= 1
            raise exc
        return DEFAULT

    return effect


@pytest.fixture
def recorded(client):
    return Mock(wraps=client)


def test_ensure_creates_the_collection_with_the_spec_payload_indexes(recorded):
    assert QdrantWriter(recorded, spec()).ensure() is True
    calls = [c.args for c in recorded.create_payload_index.call_args_list]
    assert calls == [("c", "doc_id", KEYWORD), ("c", "_posfair.version", KEYWORD), ("c", "_posfair.format", INTEGER)]
    params = recorded.get_collection("c").config.params.vectors
    assert params["calibrated"].size == 4 and params["calibrated"].distance == models.Distance.COSINE


async def test_aensure_creates_the_same_collection_and_indexes_through_an_async_client(client, recorded):
    from qdrant_tools.store.async_store import AsyncStore

    writer = QdrantWriter(client, spec())
    assert await writer.aensure(AsyncStore(recorded)) is True and await writer.aensure(AsyncStore(recorded)) is False
    calls = [c.args for c in recorded.create_payload_index.call_args_list]
    assert calls == [("c", "doc_id", KEYWORD), ("c", "_posfair.version", KEYWORD), ("c", "_posfair.format", INTEGER)]
    assert recorded.create_collection.call_count == 1 and writer.check() is True  # the spec's collection


def test_schema_mismatch_raises_before_any_write(client, recorded):
    ensure_collection(client, "c", [VectorConfig(name="calibrated", size=8)])
    writer = QdrantWriter(recorded, spec(size=4), descriptions={"calibrated": "tiny-bert (fingerprint f1)"})
    with pytest.raises(
        CollectionMismatchError, match=r"size 8, but encoder tiny-bert \(fingerprint f1\) produces size 4"
    ):
        writer.ensure()
    assert [name for name in WRITES if getattr(recorded, name).called] == []


def test_transient_upsert_errors_are_retried_inside_the_writer(client, recorded):
    recorded.upsert.side_effect = failing(2, ConnectionError("connection reset"))
    slept: list[float] = []
    writer = QdrantWriter(recorded, spec(), retry=FAST, sleep=slept.append)
    writer.ensure()
    assert writer.upsert(batch([payload("a", "v", 0, 1)])) == 1
    assert recorded.upsert.call_count == 3 and len(slept) == 2
    assert client.count("c").count == 1
    assert all(c.kwargs["wait"] is True for c in recorded.upsert.call_args_list)


def test_a_client_error_is_raised_at_once_without_retry(recorded):
    bad = UnexpectedResponse(400, "Bad Request", b'{"status":{"error":"bad"}}', httpx.Headers())
    recorded.upsert.side_effect = failing(5, bad)
    writer = QdrantWriter(recorded, spec(), retry=FAST, sleep=lambda s: None)
    writer.ensure()
    with pytest.raises(UnexpectedResponse):
        writer.upsert(batch([payload("a", "v", 0, 1)]))
    assert recorded.upsert.call_count == 1


def test_a_retrying_client_passed_in_is_unwrapped_so_retries_do_not_nest(recorded):
    recorded.upsert.side_effect = failing(100, ConnectionError("down"))
    wrapped = RetryingClient(recorded, RetryPolicy(max_attempts=5, base_delay=0.0, max_delay=0.0), sleep=lambda s: None)
    writer = QdrantWriter(wrapped, spec(), retry=FAST, sleep=lambda s: None)
    writer.ensure()
    with pytest.raises(ConnectionError):
        writer.upsert(batch([payload("a", "v", 0, 1)]))
    assert recorded.upsert.call_count == FAST.max_attempts  # 3, not 5 x 3


def test_read_state_gives_chunks_and_counts_per_version_in_one_scroll(client, recorded):
    writer = QdrantWriter(recorded, spec())
    writer.ensure()
    writer.upsert(batch([payload("a", "v1", 0, 3), payload("a", "v1", 2, 3), payload("a", "v2", 0, 1)]))
    client.upsert("c", [models.PointStruct(id=99, vector={"calibrated": [1.0] * 4}, payload={"doc_id": "x"})])
    recorded.scroll.reset_mock()
    assert writer.read_state() == {
        "a": {"v1": StoredVersion(frozenset({0, 2}), 3), "v2": StoredVersion(frozenset({0}), 1)}
    }  # the foreign point (no payload format) is not posfair state
    assert recorded.scroll.call_count == 1


def test_read_state_of_a_missing_collection_is_empty_and_writes_nothing(recorded):
    assert QdrantWriter(recorded, spec()).read_state() == {}
    assert [name for name in WRITES if getattr(recorded, name).called] == []


def test_delete_stale_keeps_the_given_version_other_documents_and_foreign_points(client):
    writer = QdrantWriter(client, spec())
    writer.ensure()
    writer.upsert(batch([payload("a", "old", 0, 2), payload("a", "old", 1, 2), payload("a", "new", 0, 1),
                         payload("b", "old", 0, 1)]))  # fmt: skip
    client.upsert("c", [models.PointStruct(id=99, vector={"calibrated": [1.0] * 4}, payload={"doc_id": "a"})])
    assert writer.delete_stale("a", "new") == 2
    assert set(writer.read_state()) == {"a", "b"} and set(writer.read_state()["a"]) == {"new"}
    assert client.retrieve("c", [99])[0].payload == {"doc_id": "a"}
    assert writer.delete_documents(["a", "b"]) == 2 and writer.read_state() == {}


def test_format_1_points_read_and_are_replaced_beside_format_2_ones(client):
    writer = QdrantWriter(client, spec())
    writer.ensure()
    writer.upsert(batch([payload_v1("a", "old", 0, 2), payload_v1("a", "old", 1, 2), payload_v1("b", "v", 0, 1)]))
    writer.upsert(batch([payload("a", "new", 0, 1, user_version="old")], start=10))
    assert writer.read_state() == {
        "a": {"old": StoredVersion(frozenset({0, 1}), 2), "new": StoredVersion(frozenset({0}), 1)},
        "b": {"v": StoredVersion(frozenset({0}), 1)},
    }
    assert writer.delete_stale("a", "new") == 2  # the user's top-level "version" is not posfair's
    assert writer.read_state()["a"] == {"new": StoredVersion(frozenset({0}), 1)}
    assert writer.delete_stale("b", "v") == 0 and writer.delete_documents(["b"]) == 1


def test_a_format_1_point_of_the_kept_version_is_kept(client):
    writer = QdrantWriter(client, spec())
    writer.ensure()
    writer.upsert(batch([payload_v1("a", "v", 0, 2), payload("a", "v", 1, 2)]))  # a resumed document
    assert writer.delete_stale("a", "v") == 0 and client.count("c").count == 2


def test_written_chunks_read_either_format():
    b = batch([payload("a", "v", 1, 3), payload_v1("b", "w", 0, 1)])
    assert b.written_chunks() == [("a", 1, 3), ("b", 0, 1)]


def test_a_point_may_carry_a_dense_and_a_multivector_named_vector(client):
    client.create_collection(
        "c",
        vectors_config={
            "dense": models.VectorParams(size=4, distance=models.Distance.COSINE),
            "subchunks": models.VectorParams(
                size=4,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            ),
        },
    )
    two = CollectionSpec(
        name="c", vectors=[VectorConfig(name="dense", size=4), VectorConfig(name="subchunks", size=4, multivector=True)]
    )
    writer = QdrantWriter(client, two)
    writer.ensure()
    rng = np.random.default_rng(0)
    multi = [rng.normal(size=(3, 4)), rng.normal(size=(1, 4))]  # a different number of sub-vectors per point
    payloads = [payload("a", "v", 0, 2), payload("a", "v", 1, 2)]
    writer.upsert(
        PointBatch(ids=[pid(0), pid(1)], payloads=payloads, vectors={"dense": np.ones((2, 4)), "subchunks": multi})
    )
    got = {str(p.id): p.vector for p in client.retrieve("c", [pid(0), pid(1)], with_vectors=True)}
    assert [np.asarray(got[pid(i)]["subchunks"]).shape for i in (0, 1)] == [(3, 4), (1, 4)]
    assert np.asarray(got[pid(0)]["dense"]).shape == (4,)


def test_vectors_of_the_wrong_size_are_refused_before_the_call(recorded):
    writer = QdrantWriter(recorded, spec(size=4))
    writer.ensure()
    with pytest.raises(ValueError, match=r"vector 'calibrated' got an entry of shape \(5,\), expected \(4,\)"):
        writer.upsert(batch([payload("a", "v", 0, 1)], size=5))
    with pytest.raises(ValueError, match=r"vectors \['other'\] are not in collection 'c'"):
        writer.upsert(PointBatch(ids=[pid(0)], payloads=[{}], vectors={"other": np.ones((1, 4))}))
    assert not recorded.upsert.called


def test_an_operator_spec_must_hold_every_encoder_vector_with_its_size():
    base = CollectionSpec(name="c", vectors=[VectorConfig(name="calibrated", size=384, on_disk=True)])
    assert spec_for_vectors("c", {"calibrated": 384}, base) is base
    with pytest.raises(CollectionMismatchError, match="the run writes 'vanilla' as a dense vector of size 384"):
        spec_for_vectors("c", {"vanilla": 384}, base)
    with pytest.raises(ValueError, match="spec describes collection 'c' but the ingestion writes 'd'"):
        spec_for_vectors("d", {"calibrated": 384}, base)


def test_build_index_is_called_only_on_stores_whose_traits_say_so(client):
    writer = QdrantWriter(Mock(wraps=client), spec())
    writer.ensure()
    assert writer.build_index() == 0.0  # a mock declares no traits: taken for a server, which indexes itself
    direct = QdrantWriter(client, spec()).build_index()
    assert (direct > 0.0) == store_traits(client).builds_index_on_request == (store_traits(client).kind == "edge")
