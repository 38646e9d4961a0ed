"""PosFairRetriever over a collection written by posfair ingestion."""

from __future__ import annotations

import pytest

from llamaindex_posfair.integrations.retriever import FingerprintMismatchError, PosFairRetriever
from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.search import SearchSettings
from qdrant_tools.store import open_store


@pytest.fixture
def store(fake_encoder, example_data):
    client = open_store(":memory:")
    ingest_path(client, "demo", example_data, {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
    yield client
    client.close()


def test_retrieves_stored_nodes_with_text_and_metadata(store, fake_encoder, example_data):
    nodes = PosFairRetriever(store, "demo", encoder=fake_encoder, similarity_top_k=3).retrieve(
        "waggle dance of honeybees"
    )
    assert len(nodes) == 3 and nodes[0].node.metadata["doc_id"] == "honeybees.txt"
    md = nodes[0].node.metadata
    source_text = (example_data / md["doc_id"]).read_text()
    assert nodes[0].node.get_content() == source_text[md["start_char"] : md["end_char"]]
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)


@pytest.mark.parametrize("settings", [None, SearchSettings(evidence=True)])
def test_evidence_offsets_point_into_the_node(store, fake_encoder, settings):
    r = PosFairRetriever(store, "demo", encoder=fake_encoder, settings=settings)  # default: evidence on
    md = r.retrieve("waggle dance")[0].node.metadata
    assert md["start_char"] <= md["evidence_start_char"] < md["evidence_end_char"] <= md["end_char"]
    assert "evidence_start_char" not in r.retrieve("waggle dance")[0].node.get_content(metadata_mode="llm")


async def test_async_retrieve_equals_sync(store, fake_encoder):
    r = PosFairRetriever(store, "demo", encoder=fake_encoder, similarity_top_k=4)
    sync = [n.node.node_id for n in r.retrieve("tides and the moon")]
    assert [n.node.node_id for n in await r.aretrieve("tides and the moon")] == sync


def test_works_in_a_retriever_query_engine(store, fake_encoder):
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    retriever = PosFairRetriever(store, "demo", encoder=fake_encoder)
    response = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query("waggle dance of honeybees")
    want = [n.node.node_id for n in retriever.retrieve("waggle dance of honeybees")]
    assert [n.node.node_id for n in response.source_nodes] == want
    assert response.source_nodes[0].node.metadata["doc_id"] == "honeybees.txt" and str(response)


def test_another_encoder_is_refused(store, make_fake):
    with pytest.raises(FingerprintMismatchError, match="was written by an encoder with fingerprint"):
        PosFairRetriever(store, "demo", encoder=make_fake(salt="other"))


def test_plain_vector_is_queried_with_the_plain_view(fake_encoder, example_data, make_fake):
    client = open_store(":memory:")
    plain = make_fake(calibration=None)
    ingest_path(client, "v", example_data, {"vanilla": plain}, IngestConfig(show_progress=False))
    calibrated = make_fake()  # same model, calibration on: its plain view wrote the vector
    r = PosFairRetriever(client, "v", encoder=calibrated)
    assert r.encoder.calibration is None and r.vector == "vanilla"
    client.close()


def test_missing_collection_is_named(fake_encoder):
    with pytest.raises(LookupError, match="collection 'nope' not found"):
        PosFairRetriever(open_store(":memory:"), "nope", encoder=fake_encoder)


def test_empty_query_is_refused(store, fake_encoder):
    with pytest.raises(ValueError, match="non-empty"):
        PosFairRetriever(store, "demo", encoder=fake_encoder).retrieve("  ")


def test_from_path_opens_and_closes_the_embedded_store(tmp_path, fake_encoder, example_data):
    client = open_store(str(tmp_path / "s"))
    ingest_path(client, "demo", example_data, {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
    client.close()
    with PosFairRetriever.from_path(str(tmp_path / "s"), "demo", encoder=fake_encoder) as r:
        assert r.retrieve("waggle dance of honeybees")[0].node.metadata["doc_id"] == "honeybees.txt"
    open_store(str(tmp_path / "s")).close()  # the lock was released
