"""Adopting a LlamaIndex ``QdrantVectorStore`` collection, and LlamaIndex's store reading posfair's collections."""

from __future__ import annotations

import json

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery
from llama_index.vector_stores.qdrant import QdrantVectorStore

from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
from llamaindex_posfair.integrations.adopt import NotALlamaIndexCollectionError, adopt_llamaindex_collection
from qdrant_tools.store import open_store

DOCS = [
    Document(text="Honeybees dance to share the direction of flowers. " * 8, id_="bees", metadata={"kind": "insect"}),
    Document(text="The moon raises two tidal bulges in the ocean. " * 8, id_="tides", metadata={"kind": "sea"}),
    Document(text="A sourdough starter is flour and water. " * 8, id_="bread", metadata={"kind": "food"}),
]
ONLY_SEA = MetadataFilters(filters=[MetadataFilter(key="kind", value="sea")])


@pytest.fixture
def embed(make_fake):
    return PosFairEmbedding(encoder=make_fake(dimension=64, max_length=64, calibration=None))


@pytest.fixture
def llamaindex_collection(client, embed):
    store = QdrantVectorStore(client=client, collection_name="li")
    VectorStoreIndex.from_documents(
        DOCS, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    return {n.node_id: n for n in store.get_nodes()}


def test_adoption_keeps_node_ids_metadata_and_relationships(client, embed, llamaindex_collection):
    n = adopt_llamaindex_collection(client, "li", "adopted", embed_model=embed)
    assert n == len(llamaindex_collection)
    adopted = {node.node_id: node for node in PosFairVectorStore("adopted", client=client).get_nodes()}
    assert sorted(adopted) == sorted(llamaindex_collection)
    for node_id, node in adopted.items():
        assert node.metadata == llamaindex_collection[node_id].metadata
        assert node.ref_doc_id == llamaindex_collection[node_id].ref_doc_id


def test_the_apps_filters_keep_working_after_adoption(client, embed, llamaindex_collection):
    adopt_llamaindex_collection(client, "li", "adopted", embed_model=embed)
    store = PosFairVectorStore("adopted", client=client, embed_model=embed)
    query = VectorStoreQuery(query_embedding=embed.get_query_embedding("moon"), query_str="moon", filters=ONLY_SEA)
    assert {node.metadata["kind"] for node in store.query(query).nodes} == {"sea"}


def test_a_rerun_stores_every_node_once(client, embed, llamaindex_collection):
    adopt_llamaindex_collection(client, "li", "adopted", embed_model=embed)
    adopt_llamaindex_collection(client, "li", "adopted", embed_model=embed)
    assert client.count("adopted", exact=True).count == len(llamaindex_collection)


def test_a_collection_that_is_not_llamaindex_is_refused_before_any_write(client, embed):
    from qdrant_client import models

    plain = "plain"
    client.create_collection(plain, vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE))
    client.upsert(plain, points=[models.PointStruct(id=1, vector=[1.0, 0, 0, 0], payload={"text": "x"})])
    with pytest.raises(NotALlamaIndexCollectionError, match="posfair ingest"):
        adopt_llamaindex_collection(client, plain, "adopted", embed_model=embed)
    assert not client.collection_exists("adopted")


def test_a_missing_source_is_named(client, embed):
    with pytest.raises(LookupError, match="'nope'"):
        adopt_llamaindex_collection(client, "nope", "adopted", embed_model=embed)


def test_qdrant_vector_store_reads_a_posfair_collection(client, embed):
    store = PosFairVectorStore("posfair", client=client, embed_model=embed)
    VectorStoreIndex.from_documents(
        DOCS, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    reader = QdrantVectorStore(client=client, collection_name="posfair", dense_vector_name=store.layout.node_vector())
    index = VectorStoreIndex.from_vector_store(reader, embed_model=embed)
    nodes = index.as_retriever(similarity_top_k=1, filters=ONLY_SEA).retrieve("why does the ocean have tides")
    assert nodes[0].node.metadata["kind"] == "sea"
    assert nodes[0].node.ref_doc_id == "tides"


def run(capsys, *argv):
    from llamaindex_posfair.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _li_store_on_disk(path, make_fake):
    client = open_store(path)
    embed = PosFairEmbedding(encoder=make_fake(dimension=64, max_length=64, calibration=None))
    store = QdrantVectorStore(client=client, collection_name="li")
    VectorStoreIndex.from_documents(
        DOCS, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    client.close()


def test_cli_adopts_a_llamaindex_collection(tmp_path, capsys, fake_cli, make_fake):
    path = str(tmp_path / "q")
    _li_store_on_disk(path, make_fake)
    rc, out, err = run(capsys, "storage", "migrate", "--from-llamaindex", "li", "--to", "new", "--path", path, "--json")
    assert rc == 0, err
    assert json.loads(out) == {"from_llamaindex": "li", "to": "new", "points": 3}


def test_cli_refuses_adoption_without_to(tmp_path, capsys, fake_cli, make_fake):
    path = str(tmp_path / "q")
    _li_store_on_disk(path, make_fake)
    rc, _, err = run(capsys, "storage", "migrate", "--from-llamaindex", "li", "--path", path)
    assert rc != 0 and "--to NEW" in err


def test_qdrant_vector_store_reads_a_collection_posfair_ingest_wrote(client, make_fake, example_data):
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.ingest import IngestConfig, ingest_path

    encoder = make_fake(dimension=64, max_length=64, calibration=None)
    recipe = Recipe.for_encoder(encoder.spec)
    ingest_path(
        client, "demo", example_data, recipe.bind(encoder), recipe.ingest_settings(IngestConfig, show_progress=False)
    )
    reader = QdrantVectorStore(client=client, collection_name="demo", dense_vector_name=recipe.node_vector())
    index = VectorStoreIndex.from_vector_store(reader, embed_model=PosFairEmbedding(encoder=encoder))
    node = index.as_retriever(similarity_top_k=1).retrieve("How far can the water level change in the Bay of Fundy?")[0]
    assert node.node.metadata["file_name"] == "tides.md"
    assert "Fundy" in node.node.get_content()
