"""A folder written by qdrant-client's local mode: recognised, never modified, and the message says what to do."""

from __future__ import annotations

import pytest
from qdrant_client import QdrantClient

from llamaindex_posfair.cli import main
from qdrant_tools.store import LegacyStorageError, open_store
from tests.qdrant_tools.store.conftest import fill


def legacy(path):
    client = QdrantClient(path=str(path))
    fill(client)
    fill(client, name="second")
    client.close()
    return path


def test_cli_query_on_a_local_mode_folder_says_how_to_read_it(tmp_path, capsys):
    legacy(tmp_path / "q")
    rc = main(["query", "x", "--collection", "c", "--path", str(tmp_path / "q")])
    err = capsys.readouterr().err
    assert rc == 2 and "open_store(path, engine='local')" in err and "posfair ingest PATH" in err


def test_storage_migrate_needs_a_collection_and_a_target(tmp_path, capsys):
    open_store(tmp_path / "s").close()
    rc = main(["storage", "migrate", "--path", str(tmp_path / "s")])
    assert rc == 2 and "needs both --collection NAME and --to NEW" in capsys.readouterr().err


def test_legacy_detection_does_not_modify_the_folder(tmp_path):
    legacy(tmp_path / "q")
    before = sorted(p.name for p in (tmp_path / "q").iterdir())
    with pytest.raises(LegacyStorageError):
        open_store(tmp_path / "q")
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == before
