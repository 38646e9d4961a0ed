"""Several opens of one folder in one process share its engine; the last close closes it."""

from __future__ import annotations

import gc

import pytest

from qdrant_tools.store import StoreError, open_store
from qdrant_tools.store.shared import open_here
from tests.qdrant_tools.store.conftest import fill, make_points


def test_two_opens_share_collections_and_writes(tmp_path):
    a = open_store(tmp_path / "s")
    b = open_store(tmp_path / "s")
    try:
        fill(a)
        assert b.collection_exists("c") and b.count("c").count == 60
        b.upsert("c", make_points(n=70, seed=1))
        assert a.count("c").count == 70
        assert a._open["c"] is b._open["c"]  # one shard, not two
    finally:
        a.close()
        b.close()


def test_the_engine_closes_with_the_last_store(tmp_path):
    a = open_store(tmp_path / "s")
    fill(a)
    b = open_store(tmp_path / "s")
    a.close()
    assert open_here(tmp_path / "s") and b.count("c").count == 60  # a's close left b working
    with pytest.raises(StoreError, match="is closed"):
        a.count("c")
    b.close()
    assert not open_here(tmp_path / "s")
    with open_store(tmp_path / "s") as c:  # reopened from disk, the data kept
        assert c.count("c").count == 60


def test_a_path_spelled_differently_is_the_same_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open_store(tmp_path / "s") as a, open_store("s") as b, open_store(f"{tmp_path}/x/../s") as c:
        fill(a)
        assert b.count("c").count == c.count("c").count == 60


def test_closing_twice_leaves_once(tmp_path):
    a, b = open_store(tmp_path / "s"), open_store(tmp_path / "s")
    a.close()
    a.close()
    assert open_here(tmp_path / "s")  # b still holds it
    b.close()
    assert not open_here(tmp_path / "s")


def test_a_store_never_closed_leaves_when_collected(tmp_path):
    a = open_store(tmp_path / "s")
    fill(a)
    del a
    gc.collect()
    assert not open_here(tmp_path / "s")


def test_a_later_open_with_auto_index_starts_the_indexer(tmp_path):
    with open_store(tmp_path / "s", auto_index=False) as a:
        fill(a)
        assert a._indexer is None
        with open_store(tmp_path / "s") as b:
            assert b._indexer is not None and a._indexer is b._indexer
            assert b.wait_for_index("c", timeout=60)


def test_temporary_stores_are_not_shared():
    with open_store(":memory:") as a, open_store(":memory:") as b:
        fill(a)
        assert not b.collection_exists("c") and a.path != b.path


def test_two_vector_stores_on_one_path_share_it(tmp_path, fake_encoder_factory):
    from llama_index.core.schema import TextNode

    from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore

    embed = PosFairEmbedding(encoder=fake_encoder_factory(dimension=64, max_length=64, calibration=None))
    path = str(tmp_path / "s")
    writer = PosFairVectorStore("docs", path=path, embed_model=embed)
    reader = PosFairVectorStore("docs", path=path, embed_model=embed)
    try:
        node = TextNode(text="Honeybees dance to share the direction of flowers.", id_="bees-0")
        node.embedding = embed.get_text_embedding(node.text)
        writer.add([node])
        writer.close()  # the reader keeps the folder open
        assert [n.node_id for n in reader.get_nodes()] == ["bees-0"]
    finally:
        reader.close()
    assert not open_here(path)
