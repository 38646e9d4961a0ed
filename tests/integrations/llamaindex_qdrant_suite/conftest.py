"""Fixtures of the ``QdrantVectorStore`` suite, pointed at ``PosFairVectorStore`` on both embedded backends.

LlamaIndex's fixtures build a ``QdrantVectorStore("test", client=QdrantClient(":memory:"),
aclient=AsyncQdrantClient(":memory:"))``: two separate in-memory stores, the sync one filled by
``add`` and the async one by ``async_add``. Here the same store is a ``PosFairVectorStore``:

* ``backend="edge"``: two temporary Qdrant Edge stores (:func:`qdrant_tools.store.open_store`), the
  second behind :class:`~qdrant_tools.store.async_store.AsyncStore`;
* ``backend="local"``: ``QdrantClient(":memory:")`` and ``AsyncQdrantClient(":memory:")``, as upstream.

The nodes are upstream's (ids, texts, metadata, relationships), their 2-d embeddings padded with zeros
to the 384 dimensions of the bundled model; the store's embed model is the suite's fake encoder at 384
dimensions (it embeds the sub-chunks posfair stores beside each node vector). README.md lists what else
was adapted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from qdrant_client import AsyncQdrantClient, QdrantClient

from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
from qdrant_tools.store import open_store
from qdrant_tools.store.async_store import AsyncStore

#: The dimension of the bundled all-MiniLM-L6-v2; upstream's 2-d vectors are padded to it.
DIM = 384
IDS = (
    "11111111-1111-1111-1111-111111111111",
    "22222222-2222-2222-2222-222222222222",
    "33333333-3333-3333-3333-333333333333",
)


def pad(vector: list[float]) -> list[float]:
    """``vector`` padded with zeros to :data:`DIM` dimensions."""
    return [float(x) for x in vector] + [0.0] * (DIM - len(vector))


@pytest.fixture(params=["edge", "local"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def open_sync(backend: str) -> Any:
    """An empty in-memory store of ``backend``, synchronous."""
    return open_store(":memory:") if backend == "edge" else QdrantClient(":memory:")


def open_async(backend: str) -> Any:
    """An empty in-memory store of ``backend``, asynchronous (not the one :func:`open_sync` opens)."""
    return AsyncStore(open_store(":memory:")) if backend == "edge" else AsyncQdrantClient(":memory:")


async def close_async(aclient: Any) -> None:
    if isinstance(aclient, AsyncStore):
        aclient.store.close()
    else:
        await aclient.close()


@pytest.fixture
def embed(fake_encoder_factory: Any) -> PosFairEmbedding:
    return PosFairEmbedding(encoder=fake_encoder_factory(dimension=DIM, max_length=64, calibration=None))


def suite_nodes(with_metadata: bool = True) -> list[TextNode]:
    """Upstream's three nodes: ``test1`` / ``test2`` of document ``test-0``, ``test3`` without a source."""
    metadata = ({"some_key": 1}, {"some_key": 2}, {"some_key": "3"}) if with_metadata else ({}, {}, {})
    source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="test-0")}
    return [
        TextNode(text="test1", id_=IDS[0], embedding=pad([1.0, 0.0]), metadata=metadata[0], relationships=source),
        TextNode(text="test2", id_=IDS[1], embedding=pad([0.0, 1.0]), metadata=metadata[1], relationships=source),
        TextNode(text="test3", id_=IDS[2], embedding=pad([1.0, 1.0]), metadata=metadata[2]),
    ]


async def _filled_store(backend: str, embed: PosFairEmbedding, with_metadata: bool) -> AsyncIterator[Any]:
    client, aclient = open_sync(backend), open_async(backend)
    store = PosFairVectorStore("test", client=client, aclient=aclient, embed_model=embed)
    try:
        nodes = suite_nodes(with_metadata)
        store.add(nodes)
        await store.async_add(nodes)  # the two in-memory stores share nothing
        yield store
    finally:
        client.close()
        await close_async(aclient)


@pytest.fixture
async def vector_store(backend: str, embed: PosFairEmbedding) -> AsyncIterator[PosFairVectorStore]:
    async for store in _filled_store(backend, embed, with_metadata=True):
        yield store


@pytest.fixture
async def hybrid_vector_store(backend: str, embed: PosFairEmbedding) -> AsyncIterator[PosFairVectorStore]:
    """Upstream enables hybrid search with fastembed's ``Qdrant/bm25``; a posfair collection always stores BM25."""
    async for store in _filled_store(backend, embed, with_metadata=False):
        yield store
