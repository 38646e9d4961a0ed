"""The one scroll loop: every point once, page by page, filtered, cut at a limit, sync and async alike."""

from __future__ import annotations

from qdrant_client import models

from qdrant_tools.scroll import ascroll_pages, scroll_pages
from qdrant_tools.store.async_store import AsyncStore


def _fill(client, n=11):
    client.create_collection("c", vectors_config={"v": models.VectorParams(size=2, distance=models.Distance.DOT)})
    points = [models.PointStruct(id=i, vector={"v": [1.0, float(i)]}, payload={"odd": i % 2}) for i in range(n)]
    if points:
        client.upsert("c", points, wait=True)


def _ids(pages):
    return [[p.id for p in page] for page in pages]


def test_every_point_comes_once_a_page_at_a_time(client):
    _fill(client)
    pages = list(scroll_pages(client, "c", page=4))
    assert _ids(pages) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    assert pages[0][0].payload == {"odd": 0} and pages[0][0].vector is None


def test_a_filter_selects_and_a_limit_cuts_the_last_page(client):
    _fill(client)
    odd = models.Filter(must=[models.FieldCondition(key="odd", match=models.MatchValue(value=1))])
    assert _ids(scroll_pages(client, "c", page=2, scroll_filter=odd, with_payload=False)) == [[1, 3], [5, 7], [9]]
    assert _ids(scroll_pages(client, "c", page=4, limit=6)) == [[0, 1, 2, 3], [4, 5]]
    [[first]] = scroll_pages(client, "c", limit=1, with_vectors=["v"], with_payload=False)
    assert first.vector == {"v": [1.0, 0.0]} and not first.payload


def test_an_empty_collection_gives_no_page(client):
    _fill(client, n=0)
    assert list(scroll_pages(client, "c")) == []


async def test_the_async_loop_reads_the_same_pages(client):
    _fill(client)
    odd = models.Filter(must=[models.FieldCondition(key="odd", match=models.MatchValue(value=1))])
    for kwargs in ({"page": 4}, {"page": 2, "scroll_filter": odd, "limit": 3}):
        got = [page async for page in ascroll_pages(AsyncStore(client), "c", **kwargs)]
        assert _ids(got) == _ids(scroll_pages(client, "c", **kwargs))
