"""The store accepts only the collection's encoder: any LlamaIndex embedding is checked by its vectors."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
from qdrant_tools.spec import CollectionMismatchError

TEXTS = ["Honeybees dance to share the direction of flowers.", "The moon raises two tidal bulges in the ocean."]


class Twin(BaseEmbedding):
    """A non-posfair LlamaIndex embedding that computes the same vectors as ``encoder`` (or a rotated copy)."""

    _encoder: object = PrivateAttr()
    _rotate: bool = PrivateAttr()

    def __init__(self, encoder, rotate=False):
        super().__init__(model_name="twin")
        self._encoder, self._rotate = encoder, rotate

    def _vec(self, texts, role):
        out = getattr(self._encoder, f"encode_{role}")(texts)
        return [list(np.roll(v, 7) if self._rotate else v) for v in out]

    def _get_query_embedding(self, query):
        return self._vec([query], "queries")[0]

    def _get_text_embedding(self, text):
        return self._vec([text], "documents")[0]

    async def _aget_query_embedding(self, query):
        return self._get_query_embedding(query)


@pytest.fixture
def fake(make_fake):
    return make_fake(dimension=64, max_length=64, calibration=None)


@pytest.fixture
def collection(client, fake, monkeypatch):
    """A collection written through a PosFairEmbedding of the fake encoder; the fake loads for its spec."""
    monkeypatch.setattr("llamaindex_posfair.encoders.spec.EncoderSpec.load", lambda self, *a, **k: fake)
    embed = PosFairEmbedding(encoder=fake)
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    nodes = [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(TEXTS)]
    for n in nodes:
        n.embedding = embed.get_text_embedding(n.get_content(metadata_mode="embed"))
    store.add(nodes)
    return embed


def _count(client):
    return client.count("docs", exact=True).count


def test_a_non_posfair_embedding_of_another_model_is_refused_naming_both(client, collection):
    with pytest.raises(
        CollectionMismatchError,
        match=r"MockEmbedding\('unknown'\) is not the encoder of collection 'docs' \(fake-model\)",
    ):
        PosFairVectorStore("docs", client=client, embed_model=MockEmbedding(embed_dim=64))
    with pytest.raises(CollectionMismatchError, match=r"gives 384-dimensional vectors.*64-dimensional"):
        PosFairVectorStore("docs", client=client, embed_model=MockEmbedding(embed_dim=384))
    assert _count(client) == 2


def test_a_non_posfair_embedding_of_the_same_model_is_accepted(client, collection, fake, monkeypatch):
    store = PosFairVectorStore("docs", client=client, embed_model=Twin(fake))
    node = TextNode(text="Sourdough rises overnight.", id_="n9")
    node.embedding = Twin(fake).get_text_embedding(node.get_content(metadata_mode="embed"))
    store.add([node])
    assert _count(client) == 3


def _store_without_embed_model(client, fake, monkeypatch):
    monkeypatch.setattr("llamaindex_posfair.encoders.spec.EncoderSpec.load", lambda self, *a, **k: fake, raising=True)
    return PosFairVectorStore("docs", client=client)


def test_an_index_with_another_model_never_writes_a_point(client, collection, fake, monkeypatch):
    store = _store_without_embed_model(client, fake, monkeypatch)
    other = Twin(fake, rotate=True)  # the same size, other vectors
    nodes = [TextNode(text="Sourdough rises overnight.", id_="n9"), TextNode(text="Bread needs flour.", id_="n8")]
    for n in nodes:
        n.embedding = other.get_text_embedding(n.get_content(metadata_mode="embed"))
    with pytest.raises(CollectionMismatchError, match=r"node 'n9'.*nothing was written"):
        store.add(nodes)
    assert _count(client) == 2
    query = VectorStoreQuery(query_embedding=other.get_query_embedding("tides"), query_str="tides", similarity_top_k=2)
    with pytest.raises(CollectionMismatchError, match="the query"):
        store.query(query)


def test_an_index_with_the_collections_encoder_writes_and_queries(client, collection, fake, monkeypatch):
    store = _store_without_embed_model(client, fake, monkeypatch)
    node = TextNode(text="Sourdough rises overnight.", id_="n9")
    node.embedding = collection.get_text_embedding(node.get_content(metadata_mode="embed"))
    store.add([node])
    query = VectorStoreQuery(
        query_embedding=collection.get_query_embedding("moon tides"), query_str="moon tides", similarity_top_k=2
    )
    assert store.query(query).nodes[0].node_id == "n1"
    assert _count(client) == 3
