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
    node = nodes[0].node
    assert len(nodes) == 3 and node.ref_doc_id == "honeybees.txt" and node.metadata["file_name"] == "honeybees.txt"
    source_text = (example_data / node.ref_doc_id).read_text()
    assert node.get_content() == source_text[node.start_char_idx : node.end_char_idx]
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)


@pytest.mark.parametrize("settings", [None, SearchSettings(evidence=True)])
def test_evidence_offsets_point_into_the_node(store, fake_encoder, settings):
    r = PosFairRetriever(store, "demo", encoder=fake_encoder, settings=settings)  # default: evidence on
    node = r.retrieve("waggle dance")[0].node
    md = node.metadata
    assert node.start_char_idx <= md["evidence_start_char"] < md["evidence_end_char"] <= node.end_char_idx
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
    assert response.source_nodes[0].node.ref_doc_id == "honeybees.txt" and str(response)


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
        assert r.retrieve("waggle dance of honeybees")[0].node.ref_doc_id == "honeybees.txt"
    open_store(str(tmp_path / "s")).close()  # the lock was released


def _precision_store(make_fake, example_data, dtype):
    from llamaindex_posfair import EncoderSpec

    client = open_store(":memory:")
    writer = make_fake(spec=EncoderSpec(model="fake", calibration=None, dtype=dtype))
    ingest_path(client, "p", example_data, {"vanilla": writer}, IngestConfig(show_progress=False))
    return client, writer


def test_a_precision_difference_alone_is_accepted_with_one_notice(make_fake, example_data, caplog, monkeypatch):
    import logging

    from llamaindex_posfair import EncoderSpec
    from llamaindex_posfair.encoders import precision

    monkeypatch.setattr(precision, "_noticed", set())
    client, writer = _precision_store(make_fake, example_data, "bfloat16")
    reader = make_fake(spec=EncoderSpec(model="fake", calibration=None, dtype="float32"))
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        got = [PosFairRetriever(client, "p", encoder=reader).retrieve("waggle dance") for _ in range(2)][-1]
    want = PosFairRetriever(client, "p", encoder=writer).retrieve("waggle dance")
    assert [n.node.node_id for n in got] == [n.node.node_id for n in want]
    assert sum("rankings agree" in r.getMessage() for r in caplog.records) == 1
    client.close()


@pytest.mark.parametrize("change", [{"calibration": None, "query_prompt": "q: "}, {"model": "other"}])
def test_another_setting_beside_the_precision_is_still_refused(make_fake, example_data, change):
    from llamaindex_posfair import EncoderSpec

    client, _ = _precision_store(make_fake, example_data, "bfloat16")
    spec = EncoderSpec(**{"model": "fake", "calibration": None, "dtype": "float32", **change})
    with pytest.raises(FingerprintMismatchError, match="was written by an encoder with fingerprint"):
        PosFairRetriever(client, "p", encoder=make_fake(spec=spec))
    client.close()


def test_a_collection_recorded_as_saved_is_queried_in_float32_without_a_notice(make_fake, example_data, caplog):
    import logging

    from llamaindex_posfair import EncoderSpec
    from llamaindex_posfair.encoders import precision

    client, _ = _precision_store(make_fake, example_data, None)
    reader = make_fake(spec=EncoderSpec(model="fake", calibration=None, dtype="float32"))
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        assert PosFairRetriever(client, "p", encoder=reader).retrieve("tides")
    assert not [r for r in caplog.records if "rankings agree" in r.getMessage()]
    client.close()


@pytest.mark.parametrize("calibrated", [True, False], ids=["calibrated", "no-calibration"])
def test_a_collection_written_before_recipes_is_read_with_the_default_of_then(
    calibrated, make_fake, example_data, monkeypatch
):
    from llamaindex_posfair import CalibrationConfig, EncoderSpec
    from llamaindex_posfair.integrations.gate import UNRECORDED_CALIBRATION

    monkeypatch.setattr(EncoderSpec, "load", lambda spec, **_: make_fake(spec=spec))
    calibration = CalibrationConfig() if calibrated else None  # the default then, or --no-calibration
    writer = make_fake(spec=EncoderSpec(calibration=calibration))
    client = open_store(":memory:")
    ingest_path(client, "old", example_data, {"v": writer}, IngestConfig(show_progress=False))  # records no recipe
    r = PosFairRetriever(client, "old")  # neither spec nor encoder: calibrated as then, else its plain view
    assert r.encoder.calibration == calibration and CalibrationConfig() == UNRECORDED_CALIBRATION
    assert r.encoder.fingerprint() == writer.fingerprint()
    ranked = [n.node.node_id for n in r.retrieve("waggle dance of honeybees")]
    assert len(ranked) == 5 and ranked == [
        n.node.node_id for n in PosFairRetriever(client, "old", encoder=writer).retrieve("waggle dance of honeybees")
    ]
    client.close()
