"""Warming a collection's files into the page cache: what is read, in which order, within which budget."""

from __future__ import annotations

import logging

from qdrant_client import models

from qdrant_tools.store import open_store
from qdrant_tools.store.warm import available_memory, warm_files, warm_order
from tests.qdrant_tools.store.conftest import make_points, vectors_config

SEGMENT = "segments/s1"


def fake_shard(root, files: dict[str, int]):
    """A shard folder whose files (path relative to the shard -> size in bytes) hold zeros."""
    for rel, size in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * size)
    return root


def names(paths, shard):
    return [str(p.relative_to(shard)) for p in paths]


def test_what_every_search_touches_comes_first_and_the_log_never(tmp_path):
    shard = fake_shard(
        tmp_path,
        {
            f"{SEGMENT}/vector_storage-node/matrix.dat": 400,
            f"{SEGMENT}/vector_storage-node/quantized.data": 300,
            f"{SEGMENT}/vector_index-node/graph.bin": 200,
            f"{SEGMENT}/payload_storage/page_0.dat": 100,
            f"{SEGMENT}/id_tracker.mappings": 50,
            "wal/open-1": 1000,
        },
    )
    order = names(warm_order(shard, skip=set(), last=set()), shard)
    assert order == [
        f"{SEGMENT}/id_tracker.mappings",
        f"{SEGMENT}/vector_index-node/graph.bin",
        f"{SEGMENT}/vector_storage-node/quantized.data",
        f"{SEGMENT}/payload_storage/page_0.dat",
        f"{SEGMENT}/vector_storage-node/matrix.dat",
    ]


def test_skipped_components_are_never_read_and_last_ones_come_last(tmp_path):
    shard = fake_shard(
        tmp_path,
        {
            f"{SEGMENT}/vector_storage-bm25/store/page_0.dat": 10,
            f"{SEGMENT}/vector_storage-subchunks/vectors/chunk_0.mmap": 10,
            f"{SEGMENT}/vector_storage-fused/vectors/chunk_0.mmap": 500,
        },
    )
    order = names(warm_order(shard, skip={"vector_storage-bm25"}, last={"vector_storage-subchunks"}), shard)
    assert order == [
        f"{SEGMENT}/vector_storage-fused/vectors/chunk_0.mmap",
        f"{SEGMENT}/vector_storage-subchunks/vectors/chunk_0.mmap",
    ]


def test_the_budget_leaves_out_a_file_that_would_pass_it_and_reads_smaller_ones_after(tmp_path):
    shard = fake_shard(
        tmp_path,
        {
            f"{SEGMENT}/vector_index-node/graph.bin": 100,
            f"{SEGMENT}/payload_storage/page_0.dat": 150,
            f"{SEGMENT}/vector_storage-node/matrix.dat": 1000,
            f"{SEGMENT}/vector_storage-other/last.dat": 50,
        },
    )
    report = warm_files(shard, skip=set(), last={"vector_storage-other"}, budget_bytes=300)
    assert (report.files, report.bytes_read, report.skipped_bytes) == (3, 300, 1000)


def test_available_memory_reads_meminfo_and_is_none_without_it(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   2000 kB\n", encoding="ascii")
    assert available_memory(str(meminfo)) == 2000 * 1024
    assert available_memory(str(tmp_path / "missing")) is None


def test_a_real_collection_is_warmed_without_its_log_or_raw_sparse_vectors(tmp_path):
    vectors = vectors_config(quantized=True)
    sparse = {"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)}
    with open_store(tmp_path / "s", auto_index=False) as store:
        store.create_collection("c", vectors_config=vectors, sparse_vectors_config=sparse)
        batch = make_points()
        bm25 = models.SparseVector(indices=[1, 7], values=[1.0, 0.5])
        points = [
            models.PointStruct(id=i, vector={"node": n, "subchunks": s, "bm25": bm25}, payload=p)
            for i, n, s, p in zip(batch.ids, batch.vectors["node"], batch.vectors["subchunks"], batch.payloads)
        ]
        store.upsert("c", points)
        store.build_index("c")
        report = store.warm("c", budget_bytes=1 << 40)
        shard = tmp_path / "s" / "collections" / "c" / "shard"
        files = [p for p in shard.rglob("*") if p.is_file()]
        wanted = [
            p for p in files if "wal" not in p.relative_to(shard).parts[:1] and "vector_storage-bm25" not in str(p)
        ]
    assert any("vector_storage-bm25" in str(p) for p in files)  # the raw sparse vectors exist, and were not read
    assert report.skipped_bytes == 0
    assert report.files == len(wanted) and report.bytes_read > 0


def test_a_store_opened_to_warm_warms_a_collection_when_it_is_first_used(tmp_path, caplog):
    with open_store(tmp_path / "s") as store:
        store.create_collection("c", vectors_config=vectors_config())
        store.upsert("c", make_points())
    warmed = open_store(tmp_path / "s", warm=True)
    with caplog.at_level(logging.INFO, logger="qdrant_tools.store.edge_store"), warmed as store:
        store.count("c")
        store.count("c")
    assert len([r for r in caplog.records if "warmed collection 'c'" in r.getMessage()]) == 1


def test_a_store_not_opened_to_warm_reads_nothing_ahead(tmp_path, caplog):
    with open_store(tmp_path / "s") as store:
        store.create_collection("c", vectors_config=vectors_config())
        store.upsert("c", make_points())
    with caplog.at_level(logging.INFO, logger="qdrant_tools.store.edge_store"), open_store(tmp_path / "s") as store:
        store.count("c")
    assert not [r for r in caplog.records if "warmed collection" in r.getMessage()]
