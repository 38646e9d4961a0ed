"""AsyncStore: awaitable store calls, concurrent queries and retrieves sent as one batch."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools.store import open_store
from qdrant_tools.store.async_store import AsyncStore, as_query_request


@pytest.fixture(params=["edge", "local"])
def store(request):
    s = open_store(":memory:", engine=request.param)
    s.create_collection("c", vectors_config={"v": models.VectorParams(size=8, distance=models.Distance.COSINE)})
    rng = np.random.default_rng(0)
    points = [models.PointStruct(id=i, vector={"v": rng.normal(size=8).tolist()}, payload={"i": i}) for i in range(50)]
    s.upsert("c", points=points)
    yield s
    s.close()


class CountingStore:
    """A store wrapper counting the calls that reach it."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def query_batch_points(self, collection_name, requests):
        self.calls.append(("query_batch_points", len(requests)))
        return self.inner.query_batch_points(collection_name, requests=requests)

    def retrieve(self, collection_name, **kwargs):
        self.calls.append(("retrieve", len(kwargs["ids"])))
        return self.inner.retrieve(collection_name, **kwargs)


def _queries(n):
    rng = np.random.default_rng(1)
    return [rng.normal(size=8).tolist() for _ in range(n)]


async def test_concurrent_queries_answer_as_single_calls_in_one_batch(store):
    counting = CountingStore(store)
    a = AsyncStore(counting)
    qs = _queries(6)
    got = await asyncio.gather(*(a.query_points("c", query=q, using="v", limit=5) for q in qs))
    want = [store.query_points("c", query=q, using="v", limit=5).points for q in qs]
    assert [[p.id for p in r.points] for r in got] == [[p.id for p in w] for w in want]
    assert counting.calls == [("query_batch_points", 6)]


async def test_max_batch_splits_the_queue(store):
    counting = CountingStore(store)
    a = AsyncStore(counting, max_batch=4)
    await asyncio.gather(*(a.query_points("c", query=q, using="v", limit=3) for q in _queries(10)))
    assert [n for _, n in counting.calls] == [4, 4, 2]


async def test_concurrent_retrieves_share_one_call_and_each_gets_its_own_records(store):
    counting = CountingStore(store)
    a = AsyncStore(counting)
    got = await asyncio.gather(a.retrieve("c", ids=[1, 2]), a.retrieve("c", ids=[2, 3, 4]))
    assert [[r.payload["i"] for r in g] for g in got] == [[1, 2], [2, 3, 4]]
    assert counting.calls == [("retrieve", 4)]


async def test_an_error_reaches_every_waiting_caller(store):
    a = AsyncStore(store)
    results = await asyncio.gather(
        *(a.query_points("missing", query=q, using="v", limit=3) for q in _queries(3)), return_exceptions=True
    )
    assert all(isinstance(r, Exception) for r in results)


async def test_other_calls_run_in_a_worker_thread(store):
    assert await AsyncStore(store).collection_exists("c") is True


def test_a_query_argument_a_batch_cannot_carry_is_refused():
    with pytest.raises(TypeError, match="lookup_from"):
        as_query_request({"query": [0.0], "lookup_from": "x"})
