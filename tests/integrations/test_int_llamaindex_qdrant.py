"""PosFairEmbedding / PosFairRerank inside LlamaIndex with QdrantVectorStore (embedded Qdrant).

``QdrantVectorStore`` is handed each embedded engine of ``open_store``: the
Qdrant Edge store (the default, which speaks qdrant-client's method names)
and qdrant-client's local mode (a real ``QdrantClient``).
"""

from __future__ import annotations

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient

from llamaindex_posfair import PosFairEmbedding, PosFairRerank
from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.store import open_store

DOCS = [
    Document(text="honeybees dance to share the direction of flowers", metadata={"name": "bees"}),
    Document(text="the moon raises two tidal bulges in the ocean", metadata={"name": "tides"}),
    Document(text="a sourdough starter is flour water yeast and bacteria", metadata={"name": "bread"}),
]


@pytest.fixture(params=["edge", "local"])
def qdrant(request):
    c = open_store(":memory:", engine=request.param)
    yield c
    c.close()


def test_vector_store_index_retrieves_with_posfair_embedding(qdrant, make_fake):
    fake_encoder = make_fake(dimension=256)
    store = QdrantVectorStore(client=qdrant, collection_name="li", dense_vector_name="calibrated")
    index = VectorStoreIndex.from_documents(
        DOCS,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=PosFairEmbedding(encoder=fake_encoder),
    )
    got = index.as_retriever(similarity_top_k=1).retrieve("why does the ocean have tidal bulges")
    assert got[0].node.metadata["name"] == "tides"
    assert qdrant.get_collection("li").config.params.vectors.size == 256  # QdrantVectorStore: unnamed vector


def test_query_engine_with_position_fair_rerank(qdrant, make_fake, monkeypatch):
    from llama_index.core import Settings

    monkeypatch.setattr(Settings, "_llm", MockLLM())  # no_text synthesizer still resolves Settings.llm
    fake_encoder = make_fake(dimension=256)
    store = QdrantVectorStore(client=qdrant, collection_name="li", dense_vector_name="calibrated")
    index = VectorStoreIndex.from_documents(
        DOCS,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=PosFairEmbedding(encoder=fake_encoder),
    )
    engine = index.as_query_engine(
        similarity_top_k=3,
        response_mode="no_text",
        node_postprocessors=[PosFairRerank(top_n=1, encoder=fake_encoder)],
    )
    response = engine.query("sourdough starter flour yeast")
    assert [n.node.metadata["name"] for n in response.source_nodes] == ["bread"]


async def test_async_pipeline_and_retrieval_with_async_qdrant(fake_encoder):
    aclient = AsyncQdrantClient(location=":memory:")
    store = QdrantVectorStore(aclient=aclient, collection_name="li", dense_vector_name="calibrated")
    embed = PosFairEmbedding(encoder=fake_encoder)
    await IngestionPipeline(transformations=[embed], vector_store=store).arun(documents=DOCS)
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed, use_async=True)
    got = await index.as_retriever(similarity_top_k=1).aretrieve("honeybees dance flowers")
    reranked = await PosFairRerank(top_n=1, encoder=fake_encoder).apostprocess_nodes(got, query_str="honeybees")
    assert got[0].node.metadata["name"] == "bees" and reranked[0].node.node_id == got[0].node.node_id
    await aclient.close()


def test_posfair_ingested_collection_is_readable_by_qdrant_vector_store(qdrant, fake_encoder, example_data):
    ingest_path(qdrant, "demo", example_data, {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
    store = QdrantVectorStore(client=qdrant, collection_name="demo", dense_vector_name="calibrated")
    index = VectorStoreIndex.from_vector_store(store, embed_model=PosFairEmbedding(encoder=fake_encoder))
    top = index.as_retriever(similarity_top_k=1).retrieve("waggle dance of honeybees and the sun")[0]
    source = (example_data / top.node.ref_doc_id).read_text()
    assert top.node.ref_doc_id == "honeybees.txt" and top.node.metadata["file_name"] == "honeybees.txt"
    assert source[top.node.start_char_idx : top.node.end_char_idx] == top.node.get_content()
