"""Migration of a folder written by qdrant-client's local mode into the Edge store (library and CLI)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from qdrant_client import QdrantClient

from llamaindex_posfair.cli import main
from qdrant_tools.store import LegacyStorageError, NotAStoreError, migrate_local_storage, open_store
from tests.qdrant_tools.store.conftest import fill


def legacy(path):
    client = QdrantClient(path=str(path))
    fill(client)
    fill(client, name="second")
    client.close()
    return path


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def snapshot(store, name="c"):
    points, _ = store.scroll(name, limit=1000, with_payload=True, with_vectors=True)
    return {p.id: p for p in points}


def test_in_place_migration_keeps_every_point_payload_and_vector(tmp_path):
    legacy(tmp_path / "q")
    reader = QdrantClient(path=str(tmp_path / "q"))
    before = snapshot(reader)
    reader.close()
    counts = migrate_local_storage(tmp_path / "q")
    with open_store(tmp_path / "q", must_exist=True) as store:
        after = snapshot(store)
        names = [c.name for c in store.get_collections().collections]
    assert counts == {"c": 60, "second": 60} and names == ["c", "second"]
    assert set(after) == set(before)
    for pid, p in before.items():  # cosine vectors: a reopened local-mode folder returns them unnormalised
        assert after[pid].payload == p.payload
        assert np.allclose(after[pid].vector["node"], unit(p.vector["node"]), atol=1e-6)
        assert np.allclose(after[pid].vector["subchunks"], unit(p.vector["subchunks"]), atol=1e-6)


def test_in_place_migration_keeps_the_old_folder_as_a_backup(tmp_path):
    legacy(tmp_path / "q")
    migrate_local_storage(tmp_path / "q")
    client = open_store(tmp_path / "q.local-backup", backend="local", must_exist=True)
    try:
        assert client.count("c").count == 60
    finally:
        client.close()


def test_migrated_collection_keeps_its_multivector_config(tmp_path):
    legacy(tmp_path / "q")
    migrate_local_storage(tmp_path / "q", tmp_path / "new")
    with open_store(tmp_path / "new") as store:
        sub = store.get_collection("c").config.params.vectors["subchunks"]
    assert sub.multivector_config is not None and sub.size == 8


def test_migrating_into_a_non_empty_folder_is_refused(tmp_path):
    legacy(tmp_path / "q")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "f").write_text("x")
    with pytest.raises(NotAStoreError, match="not empty"):
        migrate_local_storage(tmp_path / "q", tmp_path / "taken")


def test_a_folder_that_is_not_local_mode_is_refused(tmp_path):
    open_store(tmp_path / "s").close()
    with pytest.raises(NotAStoreError, match="not a folder of qdrant-client's local mode"):
        migrate_local_storage(tmp_path / "s")


def test_cli_query_on_an_old_folder_says_how_to_migrate_and_migrate_fixes_it(tmp_path, capsys):
    legacy(tmp_path / "q")
    rc = main(["query", "x", "--collection", "c", "--path", str(tmp_path / "q")])
    err = capsys.readouterr().err
    assert rc == 2 and "posfair storage migrate --path" in err
    rc = main(["storage", "migrate", "--path", str(tmp_path / "q"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["collections"] == {"c": 60, "second": 60}
    with open_store(tmp_path / "q") as store:
        assert store.count("second").count == 60


def test_cli_migrate_of_a_store_reports_the_error(tmp_path, capsys):
    open_store(tmp_path / "s").close()
    rc = main(["storage", "migrate", "--path", str(tmp_path / "s")])
    assert rc == 2 and "nothing to migrate" in capsys.readouterr().err


def test_legacy_detection_does_not_modify_the_folder(tmp_path):
    legacy(tmp_path / "q")
    before = sorted(p.name for p in (tmp_path / "q").iterdir())
    with pytest.raises(LegacyStorageError):
        open_store(tmp_path / "q")
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == before
