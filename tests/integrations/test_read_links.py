"""Symbolic links under an ingested folder: ids from real paths, a file reached twice read once, links leading
out of the folder skipped unless asked (both readers: LlamaIndex's and qdrant_tools' own)."""

from __future__ import annotations

import pytest

from llamaindex_posfair.integrations.readers import read_path
from qdrant_tools.chunking import load_folder
from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.store import open_store

READERS = {"llamaindex": read_path, "qdrant_tools": load_folder}


@pytest.fixture
def linked(tmp_path):
    """root/a.txt, root/sub/b.txt, root/sub/again.txt -> a.txt, root/sublink -> sub, root/sub/up -> root,
    root/o_link.txt -> outside/o.txt, root/outdir -> outside (o.txt, p.txt)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "a.txt").write_text("alpha beta gamma")
    (root / "sub" / "b.txt").write_text("delta epsilon")
    (outside / "o.txt").write_text("outside one")
    (outside / "p.txt").write_text("outside two")
    (root / "sub" / "again.txt").symlink_to(root / "a.txt")
    (root / "sublink").symlink_to(root / "sub")
    (root / "sub" / "up").symlink_to(root)
    (root / "o_link.txt").symlink_to(outside / "o.txt")
    (root / "outdir").symlink_to(outside)
    return root


@pytest.mark.parametrize("reader", READERS)
def test_ids_are_real_paths_and_links_out_of_the_folder_are_skipped(linked, reader):
    docs, skipped, _ = READERS[reader](linked, [".txt"])
    assert [d.doc_id for d in docs] == ["a.txt", "sub/b.txt"]
    assert [d.source for d in docs] == [str(linked / "a.txt"), str(linked / "sub" / "b.txt")]
    why = {s.source: s.reason for s in skipped}
    assert set(why) == {str(linked / "o_link.txt"), str(linked / "outdir"), str(linked / "sub" / "again.txt")}
    assert "--follow-links" in why[str(linked / "o_link.txt")] and "--follow-links" in why[str(linked / "outdir")]
    assert "read once" in why[str(linked / "sub" / "again.txt")]


@pytest.mark.parametrize("reader", READERS)
def test_follow_links_reads_what_links_lead_to_once(linked, reader):
    docs, skipped, _ = READERS[reader](linked, [".txt"], follow_links=True)
    assert [d.doc_id for d in docs] == ["a.txt", "o_link.txt", "sub/b.txt", "outdir/p.txt"]
    assert [d.text for d in docs][1] == "outside one"
    # outdir/o.txt is o_link.txt's file, again.txt is a.txt
    assert sorted(s.source for s in skipped) == [str(linked / "outdir" / "o.txt"), str(linked / "sub" / "again.txt")]


@pytest.mark.parametrize("reader", READERS)
def test_a_linked_file_alone_has_its_real_name(linked, reader):
    docs, skipped, _ = READERS[reader](linked / "sub" / "again.txt", [".txt"])
    assert [(d.doc_id, d.text) for d in docs] == [("a.txt", "alpha beta gamma")] and skipped == []


def test_a_file_reached_through_a_link_is_stored_once(linked, fake_encoder_factory):
    config = IngestConfig(show_progress=False, layout=NodeLayout(chunk_tokens=8, overlap_tokens=2, subchunks=None))
    client = open_store(":memory:")
    try:
        report = ingest_path(client, "c", linked, {"calibrated": fake_encoder_factory()}, config)
        pts, _ = client.scroll("c", limit=100, with_payload=True)
        assert sorted(p.payload["doc_id"] for p in pts) == ["a.txt", "sub/b.txt"]
        assert report.chunks_written == 2 and len(report.skipped) == 3
        again = ingest_path(client, "c", linked / "sub" / "again.txt", {"calibrated": fake_encoder_factory()}, config)
        assert again.unchanged == ["a.txt"] and again.chunks_written == 0
    finally:
        client.close()


def test_the_follow_links_flag_reaches_the_reader():
    from llamaindex_posfair.cli import build_parser
    from llamaindex_posfair.cli.ingest import run_settings

    args = build_parser().parse_args(["ingest", "docs", "--collection", "c", "--follow-links"])
    assert args.follow_links is True and run_settings(args)["follow_links"] is True
    assert build_parser().parse_args(["ingest", "docs", "--collection", "c"]).follow_links is False
