"""Ingestion on the Edge store: the search index is built when the run finishes, not on the first query."""

from __future__ import annotations

import pytest

from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.store import open_store

CFG = IngestConfig(batch_size=4, show_progress=False, layout=NodeLayout(chunk_tokens=12, overlap_tokens=2))
PROGRESS = IngestConfig(layout=NodeLayout(chunk_tokens=12, overlap_tokens=2))  # with the progress bar


@pytest.fixture
def counted_builds(monkeypatch):
    from qdrant_tools.store.edge_store import EdgeStore

    calls = []
    original = EdgeStore.build_index

    def build_index(self, collection_name, *, show_progress=False):
        calls.append((collection_name, self.count(collection_name).count))
        return original(self, collection_name, show_progress=show_progress)

    monkeypatch.setattr(EdgeStore, "build_index", build_index)
    return calls


def test_ingestion_builds_the_index_once_after_every_point_is_written(tmp_path, encoder, corpus, counted_builds):
    with open_store(tmp_path / "s") as store:
        report = ingest_path(store, "c", corpus, {"calibrated": encoder}, CFG)
        n = store.count("c").count
    assert counted_builds == [("c", n)] and report.chunks_written == n and report.index_seconds > 0


def test_an_unchanged_rerun_does_not_rebuild(tmp_path, encoder, corpus, counted_builds):
    with open_store(tmp_path / "s") as store:
        ingest_path(store, "c", corpus, {"calibrated": encoder}, CFG)
        again = ingest_path(store, "c", corpus, {"calibrated": encoder}, CFG)
    assert len(counted_builds) == 1 and again.chunks_written == 0 and again.index_seconds == 0


def test_local_mode_has_no_index_step(encoder, corpus):
    client = open_store(":memory:", engine="local")
    try:
        report = ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    finally:
        client.close()
    assert report.chunks_written > 0 and report.index_seconds == 0


def test_progress_lines_announce_the_index(tmp_path, encoder, corpus, capsys, monkeypatch):
    monkeypatch.setattr("qdrant_tools.store.edge_store.ANNOUNCE_INDEX_FROM", 1)
    with open_store(tmp_path / "s") as store:
        ingest_path(store, "c", corpus, {"calibrated": encoder}, PROGRESS)
    err = capsys.readouterr().err
    assert "building the search index of 'c'" in err and "ready in" in err


def test_a_small_collection_is_indexed_without_progress_lines(tmp_path, encoder, corpus, capsys):
    with open_store(tmp_path / "s") as store:
        ingest_path(store, "c", corpus, {"calibrated": encoder}, PROGRESS)
    assert "search index" not in capsys.readouterr().err
