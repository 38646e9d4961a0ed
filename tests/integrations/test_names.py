"""Ecosystem names: ``PosFairRetriever(similarity_top_k=)`` and ``PosFairRerank``'s one name."""

from __future__ import annotations

import pytest

from llamaindex_posfair import PosFairRerank, PosFairRetriever
from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.search import SearchSettings
from qdrant_tools.store import open_store

QUERY = "waggle dance of honeybees"


@pytest.fixture
def store(fake_encoder, example_data):
    client = open_store(":memory:")
    ingest_path(client, "demo", example_data, {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
    yield client
    client.close()


def _ids(retriever):
    return [n.node.node_id for n in retriever.retrieve(QUERY)]


def test_similarity_top_k_sets_the_number_of_nodes(store, fake_encoder):
    assert len(_ids(PosFairRetriever(store, "demo", encoder=fake_encoder, similarity_top_k=2))) == 2
    assert len(_ids(PosFairRetriever(store, "demo", encoder=fake_encoder, similarity_top_k=7))) == 7


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_invalid_similarity_top_k_is_named(store, fake_encoder, bad):
    with pytest.raises(ValueError, match="similarity_top_k must be a positive integer"):
        PosFairRetriever(store, "demo", encoder=fake_encoder, similarity_top_k=bad)


def test_without_similarity_top_k_the_settings_limit_counts(store, fake_encoder):
    r = PosFairRetriever(store, "demo", encoder=fake_encoder, settings=SearchSettings(limit=6, evidence=True))
    assert r.settings.limit == 6 and len(_ids(r)) == 6
    assert PosFairRetriever(store, "demo", encoder=fake_encoder).settings.limit == 5


def test_from_path_takes_similarity_top_k(tmp_path, fake_encoder, example_data):
    client = open_store(str(tmp_path / "s"))
    ingest_path(client, "demo", example_data, {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
    client.close()
    with PosFairRetriever.from_path(str(tmp_path / "s"), "demo", encoder=fake_encoder, similarity_top_k=2) as r:
        assert len(_ids(r)) == 2


def test_pos_fair_rerank_serialises_under_its_own_name(fake_encoder):
    data = PosFairRerank(encoder=fake_encoder, top_n=2).to_dict()
    assert data["class_name"] == "PosFairRerank"
    assert PosFairRerank.from_dict(data, encoder=fake_encoder).to_dict() == data
