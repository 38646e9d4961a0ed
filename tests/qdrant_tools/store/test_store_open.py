"""``open_store``: which engine a call gets, and the errors that name the fix."""

from __future__ import annotations

from typing import ClassVar

import pytest
import qdrant_client
from qdrant_client import QdrantClient, models

from qdrant_tools.snapshots import InsecureApiKeyError
from qdrant_tools.store import (
    LegacyStorageError,
    NotAStoreError,
    ServerUnreachableError,
    StoreNotFoundError,
    open_store,
)


def legacy_folder(path):
    c = QdrantClient(path=str(path))
    c.create_collection("old", vectors_config={"v": models.VectorParams(size=2, distance=models.Distance.COSINE)})
    c.upsert("old", models.Batch(ids=[1], vectors={"v": [[1.0, 0.0]]}, payloads=[{"doc_id": "a"}]))
    c.close()
    return path


@pytest.mark.parametrize("kwargs", [{}, {"path": "x", "url": "https://h:6333"}])
def test_exactly_one_of_path_and_url(kwargs):
    with pytest.raises(ValueError, match="exactly one of path="):
        open_store(**kwargs)


def test_an_unknown_engine_lists_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="engine must be 'edge'.*or 'local'.*got 'sqlite'"):
        open_store(tmp_path, engine="sqlite")


def test_a_folder_of_the_old_local_mode_is_detected_with_what_to_do(tmp_path):
    legacy_folder(tmp_path / "q")
    with pytest.raises(LegacyStorageError, match="qdrant-client's local mode.*engine='local'"):
        open_store(tmp_path / "q")


def test_the_old_local_mode_folder_still_opens_with_the_local_engine(tmp_path):
    legacy_folder(tmp_path / "q")
    client = open_store(tmp_path / "q", engine="local", must_exist=True)
    try:
        assert isinstance(client, QdrantClient) and client.count("old").count == 1
    finally:
        client.close()


def test_an_edge_folder_is_not_opened_by_local_mode(tmp_path):
    open_store(tmp_path / "s").close()
    with pytest.raises(NotAStoreError, match="is a Qdrant Edge store"):
        open_store(tmp_path / "s", engine="local")


def test_must_exist_says_to_ingest_first(tmp_path):
    with pytest.raises(StoreNotFoundError, match="no embedded Qdrant storage.*run `posfair ingest"):
        open_store(tmp_path / "none", must_exist=True)
    assert not (tmp_path / "none").exists()


def test_a_folder_with_other_files_is_not_taken_over(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(NotAStoreError, match="not an embedded Qdrant store"):
        open_store(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_memory_with_the_local_engine_is_a_qdrant_client():
    client = open_store(":memory:", engine="local")
    try:
        assert isinstance(client, QdrantClient) and not client.collection_exists("x")
    finally:
        client.close()


class _FakeServer:
    made: ClassVar[list[dict]] = []

    def __init__(self, **kwargs):
        _FakeServer.made.append(kwargs)

    def get_collections(self):
        return models.CollectionsResponse(collections=[])


def test_an_api_key_over_plain_http_is_refused_before_any_request(monkeypatch):
    _FakeServer.made = []
    monkeypatch.setattr(qdrant_client, "QdrantClient", _FakeServer)
    with pytest.raises(InsecureApiKeyError, match="refusing to send"):
        open_store(url="http://qdrant:6333", api_key="k")
    assert _FakeServer.made == []


def test_the_api_key_argument_reaches_the_client_over_https(monkeypatch):
    _FakeServer.made = []
    monkeypatch.setattr(qdrant_client, "QdrantClient", _FakeServer)
    monkeypatch.setenv("QDRANT_API_KEY", "from-env")
    open_store(url="https://qdrant:6333", api_key="given", timeout=7)
    assert _FakeServer.made == [{"url": "https://qdrant:6333", "api_key": "given", "timeout": 7, "https": True}]


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")
def test_an_unreachable_server_is_reported_with_the_fix(monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    with pytest.raises(ServerUnreachableError, match="cannot reach Qdrant at http://127.0.0.1:9.*embedded storage"):
        open_store(url="http://127.0.0.1:9", timeout=2)
