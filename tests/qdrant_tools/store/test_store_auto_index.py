"""The Edge store indexes collections in the background after plain ``upsert`` calls (``auto_index``).

Collections here hold 16-dimensional unit vectors with an indexing threshold of
200 KB (3,200 points) and a full-scan threshold of 10 KB, so HNSW is built and
used at this size. See :mod:`qdrant_tools.store.indexer` for the design.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools.store import IndexBuildError, open_store
from qdrant_tools.store.config import CollectionRecord
from qdrant_tools.store.indexer import threshold_points

DIM = 16
N = 20_480
BATCH = 512
THRESHOLD_KB = 200
THRESHOLD_POINTS = THRESHOLD_KB * 1024 // (DIM * 4)  # 3,200
WAIT_S = 600  # a bound for a loaded 2-core machine; an idle one indexes 20k points in seconds


def unit_vectors(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


VECTORS = unit_vectors(N, 0)


def create(store, name: str = "c") -> None:
    store.create_collection(
        name,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
        hnsw_config=models.HnswConfigDiff(full_scan_threshold=10),
        optimizers_config=models.OptimizersConfigDiff(indexing_threshold=THRESHOLD_KB),
    )


def write(store, start: int = 0, stop: int = N, name: str = "c") -> list[float]:
    """Upsert VECTORS[start:stop] in batches; returns each upsert's seconds."""
    times = []
    for i in range(start, stop, BATCH):
        j = min(i + BATCH, stop)
        t0 = time.perf_counter()
        store.upsert(name, models.Batch(ids=list(range(i, j)), vectors=VECTORS[i:j].tolist()))
        times.append(time.perf_counter() - t0)
    return times


def wait_indexed(store, name: str = "c", at_least: int = N - THRESHOLD_POINTS) -> int:
    deadline = time.monotonic() + WAIT_S
    while True:
        indexed = store.get_collection(name).indexed_vectors_count
        if indexed >= at_least or time.monotonic() > deadline:
            return indexed
        time.sleep(0.2)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """20,480 points written by plain upserts (no build_index), then indexed in the background."""
    store = open_store(tmp_path_factory.mktemp("auto") / "store")
    create(store)
    times = write(store)
    assert store.wait_for_index("c", timeout=WAIT_S)
    yield store, times
    store.close()


def test_threshold_points_follows_indexing_threshold():
    def rec(size, kb=None):
        opt = models.OptimizersConfigDiff(indexing_threshold=kb) if kb is not None else None
        return CollectionRecord(vectors=models.VectorParams(size=size, distance="Cosine"), optimizers_config=opt)

    assert threshold_points(rec(384)) == 6667  # Qdrant's default 10,000 KB over 1,536 bytes a point
    assert threshold_points(rec(DIM, THRESHOLD_KB)) == THRESHOLD_POINTS
    assert threshold_points(rec(DIM, 0)) == 0  # 0 turns indexing off, as on a server


def test_plain_upserts_get_indexed(indexed):
    store, _ = indexed
    info = store.get_collection("c")
    assert info.points_count == N
    assert info.indexed_vectors_count >= N - THRESHOLD_POINTS  # the rest stays in a small plain segment


def test_search_agrees_with_brute_force(indexed):
    store, _ = indexed
    queries = unit_vectors(50, 1)
    exact = np.argsort(-(queries @ VECTORS.T), axis=1)[:, :10]
    recall = np.mean(
        [
            len({p.id for p in store.query_points("c", query=q.tolist(), limit=10).points} & set(e.tolist())) / 10
            for q, e in zip(queries, exact)
        ]
    )
    assert recall >= 0.95


def test_steady_writer_is_not_blocked(indexed):
    _, times = indexed  # written back to back: no pause of quiet_s, so no build ran during them
    assert max(times) < 5.0, f"longest upsert {max(times):.2f}s"


def test_fresh_points_are_searchable_at_once(indexed):
    store, _ = indexed
    fresh = unit_vectors(64, 2)
    ids = list(range(N, N + 64))
    store.upsert("c", models.Batch(ids=ids, vectors=fresh.tolist()))
    top = [store.query_points("c", query=v.tolist(), limit=1).points[0].id for v in fresh]
    assert top == ids
    store.delete("c", ids)


def build_started(store, pause_s: float = 0.0) -> tuple[threading.Event, list[float]]:
    """An event set when the worker starts a build (after ``pause_s``, during which the step holds no GIL)."""
    started, at = threading.Event(), []
    real = store._indexer._optimize

    def step(name: str) -> None:
        at.append(time.perf_counter())
        started.set()
        time.sleep(pause_s)
        real(name)

    store._indexer._optimize = step
    return started, at


def test_upsert_while_a_build_runs_is_bounded_and_searchable(tmp_path):
    store = open_store(tmp_path / "s")
    create(store)
    started, at = build_started(store)
    write(store)
    assert started.wait(WAIT_S)  # after quiet_s (0.5 s) without writes, a build over the 20k points
    extra = unit_vectors(BATCH, 3)
    store.upsert("c", models.Batch(ids=list(range(N, N + BATCH)), vectors=extra.tolist()))
    waited = time.perf_counter() - at[0]  # from the build's start: the rest of the step, then the write
    assert waited < 120, f"upsert during a build took {waited:.1f}s"
    assert store.query_points("c", query=extra[7].tolist(), limit=1).points[0].id == N + 7
    assert store.wait_for_index("c", timeout=WAIT_S)
    assert store.count("c").count == N + BATCH
    store.close()


def test_close_during_build_then_reopen(tmp_path):
    path = tmp_path / "s"
    store = open_store(path)
    create(store)
    started, _ = build_started(store, pause_s=0.5)
    write(store)
    assert started.wait(WAIT_S)
    assert store._indexer.busy("c")
    store.close()  # called during the build: waits for it; never leaves a half-built shard
    with open_store(path, auto_index=False) as again:
        assert again.count("c").count == N
        assert again.get_collection("c").indexed_vectors_count >= N - THRESHOLD_POINTS
        got = again.retrieve("c", [0, N - 1], with_vectors=True)
        assert np.allclose([r.vector for r in got], VECTORS[[0, N - 1]], atol=1e-6)
        assert again.query_points("c", query=VECTORS[123].tolist(), limit=1).points[0].id == 123
    with open_store(path) as third:
        third.upsert("c", models.Batch(ids=[N], vectors=[VECTORS[0].tolist()]))
        assert third.count("c").count == N + 1


def test_build_index_waits_for_the_background_build(tmp_path):
    store = open_store(tmp_path / "s")
    create(store)
    started, _ = build_started(store, pause_s=0.5)
    write(store)
    assert started.wait(WAIT_S)
    store.build_index("c")  # called during the background build: waits for it, never races it
    assert store.get_collection("c").indexed_vectors_count >= N - THRESHOLD_POINTS
    assert not store._indexer.busy("c")
    store.close()


def test_auto_index_off(tmp_path):
    store = open_store(tmp_path / "s", auto_index=False)
    create(store)
    write(store, 0, 8 * BATCH)
    time.sleep(1.0)
    assert store.get_collection("c").indexed_vectors_count == 0
    assert store.wait_for_index("c", timeout=1)
    store.build_index("c")
    assert store.get_collection("c").indexed_vectors_count >= 8 * BATCH - THRESHOLD_POINTS
    store.close()


def _failing(store) -> None:
    def boom(name: str) -> None:
        raise RuntimeError("disk full")

    store._indexer._optimize = boom


def test_background_error_is_logged_and_raised_by_the_next_call(tmp_path, caplog):
    store = open_store(tmp_path / "s")
    create(store)
    _failing(store)
    with caplog.at_level(logging.ERROR, logger="qdrant_tools.store.indexer"):
        write(store, 0, 8 * BATCH)
        assert store._indexer.wait("c", timeout=60)
    assert "background index build of collection 'c' failed" in caplog.text
    with pytest.raises(IndexBuildError, match="disk full"):
        store.upsert("c", models.Batch(ids=[N], vectors=[VECTORS[0].tolist()]))
    assert store.count("c").count == 8 * BATCH  # raised before the write
    store.upsert("c", models.Batch(ids=[N], vectors=[VECTORS[0].tolist()]))  # raised once
    store.close()


def test_background_error_is_raised_by_close(tmp_path):
    store = open_store(tmp_path / "s")
    create(store)
    _failing(store)
    write(store, 0, 8 * BATCH)
    assert store._indexer.wait("c", timeout=60)
    with pytest.raises(IndexBuildError):
        store.close()
    assert repr(store).endswith("closed)")
    with open_store(tmp_path / "s", auto_index=False) as again:
        assert again.count("c").count == 8 * BATCH


def test_llamaindex_vector_store_writes_and_queries(tmp_path):
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores import VectorStoreQuery
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    n = 4 * THRESHOLD_POINTS // 2  # two thresholds' worth: LlamaIndex's own upserts trigger the build
    client = open_store(tmp_path / "s")
    create(client, "li")
    vs = QdrantVectorStore(client=client, collection_name="li", batch_size=256)
    nodes = [
        TextNode(text=f"node {i}", id_=f"00000000-0000-0000-0000-{i:012d}", embedding=VECTORS[i].tolist())
        for i in range(n)
    ]
    vs.add(nodes)
    assert client.wait_for_index("li", timeout=WAIT_S)
    assert client.get_collection("li").indexed_vectors_count >= n - THRESHOLD_POINTS
    for i in (0, 1234, n - 1):
        got = vs.query(VectorStoreQuery(query_embedding=VECTORS[i].tolist(), similarity_top_k=3))
        assert got.ids[0] == nodes[i].node_id
        assert got.nodes[0].get_content() == f"node {i}"
    client.close()


def test_status_is_yellow_while_a_build_is_due(tmp_path):
    store = open_store(tmp_path / "s")
    create(store)
    write(store, 0, 8 * BATCH)  # 4,096 points: past the 3,200-point threshold
    assert store.get_collection("c").status == models.CollectionStatus.YELLOW
    assert store.wait_for_index("c", timeout=WAIT_S)
    info = store.get_collection("c")
    assert info.status == models.CollectionStatus.GREEN
    assert info.indexed_vectors_count > 0
    store.close()
