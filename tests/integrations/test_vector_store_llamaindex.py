"""PosFairVectorStore inside plain LlamaIndex code: VectorStoreIndex, retrievers with filters, query engines,
delete_ref_doc, IngestionPipeline with a docstore, and PosFairNodeParser's nodes against the CLI's chunks."""

from __future__ import annotations

import pytest
from llama_index.core import Document, Settings, SimpleDirectoryReader, StorageContext, VectorStoreIndex
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llamaindex_posfair import PosFairEmbedding, PosFairNodeParser, PosFairRetriever, PosFairVectorStore
from llamaindex_posfair.integrations.recipe import Recipe
from qdrant_tools.chunking import ChunkingConfig, chunk_text
from qdrant_tools.encoding import spans_for
from qdrant_tools.ingest import IngestConfig, ingest_path

QUERY = "How far can the water level change in the Bay of Fundy?"


@pytest.fixture
def encoder(make_fake):
    return make_fake(dimension=64, max_length=64, calibration=None)


@pytest.fixture
def embed(encoder):
    return PosFairEmbedding(encoder=encoder)


@pytest.fixture
def index(client, embed, example_data):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    docs = SimpleDirectoryReader(str(example_data), filename_as_id=True).load_data()
    return VectorStoreIndex.from_documents(
        docs,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed,
        transformations=[PosFairNodeParser.from_embed_model(embed)],
    )


def _files(nodes):
    return [n.node.metadata["file_name"] for n in nodes]


def test_vector_store_index_retrieves_the_file_that_answers(index):
    assert _files(index.as_retriever(similarity_top_k=3).retrieve(QUERY))[0] == "tides.md"


def test_as_retriever_filters_to_the_matching_files(index):
    only = MetadataFilters(filters=[MetadataFilter(key="file_name", value="sourdough.txt")])
    got = index.as_retriever(similarity_top_k=5, filters=only).retrieve(QUERY)
    assert got and set(_files(got)) == {"sourdough.txt"}


def test_as_query_engine_answers_with_source_nodes(index, monkeypatch):
    monkeypatch.setattr(Settings, "_llm", MockLLM())
    response = index.as_query_engine(similarity_top_k=2, response_mode="no_text").query(QUERY)
    assert _files(response.source_nodes)[0] == "tides.md"


def test_delete_ref_doc_removes_that_file_only(index, client):
    store = index.vector_store
    before = {n.metadata["file_name"] for n in store.get_nodes()}
    tides = next(n.ref_doc_id for n in store.get_nodes() if n.metadata["file_name"] == "tides.md")
    index.delete_ref_doc(tides)
    after = {n.metadata["file_name"] for n in store.get_nodes()}
    assert after == before - {"tides.md"}


def test_returned_nodes_carry_their_document_and_neighbours(index):
    node = index.as_retriever(similarity_top_k=1).retrieve(QUERY)[0].node
    assert node.ref_doc_id.endswith("tides.md")
    assert node.prev_node is not None or node.next_node is not None


def _pipeline(embed, store, docstore):
    return IngestionPipeline(
        transformations=[PosFairNodeParser.from_embed_model(embed), embed],
        vector_store=store,
        docstore=docstore,
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )


def test_ingestion_pipeline_rerun_writes_nothing_new_and_replaces_a_changed_document(client, embed):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    docstore = SimpleDocumentStore()
    docs = [Document(text=f"Document {i}. " + "The tide rises and falls. " * 30, id_=f"d{i}") for i in range(3)]
    assert len(_pipeline(embed, store, docstore).run(documents=docs)) > 0
    stored = sorted(n.node_id for n in store.get_nodes())
    assert _pipeline(embed, store, docstore).run(documents=docs) == []
    assert sorted(n.node_id for n in store.get_nodes()) == stored
    changed = [docs[0], Document(text="Document 1 now speaks of bread and flour only.", id_="d1"), docs[2]]
    _pipeline(embed, store, docstore).run(documents=changed)
    texts = [n.text for n in store.get_nodes() if n.ref_doc_id == "d1"]
    assert texts == ["Document 1 now speaks of bread and flour only."]
    assert client.count("docs", exact=True).count == len(stored) - (len(stored) // 3) + 1


def test_node_parser_cuts_documents_as_ingestion_does(encoder, example_data):
    parser = PosFairNodeParser.from_encoder(encoder)
    encoding = Recipe.for_encoder(encoder.spec).ingest_settings().point_encoding({"vanilla": encoder})
    text = (example_data / "tides.md").read_text()
    nodes = parser.get_nodes_from_documents([Document(text=text, id_="tides.md")])
    chunks = chunk_text(
        text, ChunkingConfig(encoding.chunking.chunk_tokens, encoding.chunking.overlap_tokens), spans_for(encoder)[0]
    )
    assert [(n.text, n.start_char_idx, n.end_char_idx) for n in nodes] == [
        (c.text, c.start_char, c.end_char) for c in chunks
    ]
    assert nodes[0].get_content(metadata_mode="embed") == nodes[0].text


def test_node_ids_are_deterministic(encoder):
    parser = PosFairNodeParser.from_encoder(encoder)
    doc = Document(text="One sentence. " * 80, id_="a.md")
    assert [n.node_id for n in parser.get_nodes_from_documents([doc])] == [
        n.node_id for n in parser.get_nodes_from_documents([doc])
    ]


def _ingest_as_the_cli(client, encoder, example_data):
    config = Recipe.for_encoder(encoder.spec).ingest_settings(IngestConfig, show_progress=False)
    ingest_path(client, "cli", example_data, {"vanilla": encoder}, config)


def test_the_store_ranks_as_posfair_ingest_on_the_same_files(client, encoder, embed, example_data):
    _ingest_as_the_cli(client, encoder, example_data)
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    docs = SimpleDirectoryReader(str(example_data)).load_data()
    index = VectorStoreIndex.from_documents(
        docs,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed,
        transformations=[PosFairNodeParser.from_embed_model(embed)],
    )
    cli = PosFairRetriever(client, "cli", encoder=encoder, similarity_top_k=5)
    for query in (QUERY, "sourdough starter", "lighthouse keeper lamp", "honeybee waggle dance"):
        want = [(n.node.text, round(n.score, 6)) for n in cli.retrieve(query)]
        got = [(n.node.text, round(n.score, 6)) for n in index.as_retriever(similarity_top_k=5).retrieve(query)]
        assert got == want


def test_the_retriever_takes_metadata_filters(client, encoder, example_data):
    _ingest_as_the_cli(client, encoder, example_data)
    only = MetadataFilters(filters=[MetadataFilter(key="file_name", value="printing.md")])
    got = PosFairRetriever(client, "cli", encoder=encoder, similarity_top_k=5, filters=only).retrieve(QUERY)
    assert got and set(_files(got)) == {"printing.md"}


async def test_the_retriever_answers_concurrent_async_queries_as_sync_ones(client, encoder, example_data):
    import asyncio

    _ingest_as_the_cli(client, encoder, example_data)
    r = PosFairRetriever(client, "cli", encoder=encoder, similarity_top_k=3)
    queries = [QUERY, "sourdough starter", "lighthouse keeper lamp"]
    got = await asyncio.gather(*(r.aretrieve(q) for q in queries))
    assert [[n.node.node_id for n in g] for g in got] == [[n.node.node_id for n in r.retrieve(q)] for q in queries]


def test_a_filter_on_the_readers_file_name_works_with_random_document_ids(client, embed, example_data):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    docs = SimpleDirectoryReader(str(example_data)).load_data()  # ids are random UUIDs, not paths
    index = VectorStoreIndex.from_documents(
        docs, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    only = MetadataFilters(filters=[MetadataFilter(key="file_name", value="tides.md")])
    got = index.as_retriever(similarity_top_k=3, filters=only).retrieve(QUERY)
    assert got and set(_files(got)) == {"tides.md"}
