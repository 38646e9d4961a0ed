"""The write-ahead log of a bulk load stays bounded: the store flushes the shard as the log grows."""

from __future__ import annotations

import numpy as np
from qdrant_client import models

from qdrant_tools.store import EdgeStore

MIB = 2**20


def _write(store: EdgeStore, n: int, dim: int, batch: int = 500) -> int:
    """Upsert ``n`` points of ``dim`` floats (about 5 KB of log each); returns the largest log seen after an upsert."""
    store.create_collection("c", vectors_config={"v": models.VectorParams(size=dim, distance=models.Distance.DOT)})
    col = store._collection("c")
    rng = np.random.default_rng(0)
    peak = 0
    for start in range(0, n, batch):
        rows = rng.random((batch, dim), dtype=np.float32)
        # model_construct: the rows go to the store as arrays, unvalidated, to keep the test fast
        store.upsert("c", models.Batch.model_construct(ids=list(range(start, start + batch)), vectors={"v": rows}))
        peak = max(peak, col.wal_bytes())
    assert store.count("c").count == n
    return peak


def test_a_bulk_load_keeps_the_write_ahead_log_near_its_flush_budget():
    n, dim = 60_000, 1024
    bound = 32 * MIB + 4 * 32 * MIB  # the budget, plus Edge's open and retained 32 MiB log segments
    assert n * dim * 4 > bound + 64 * MIB  # the float rows alone: an unflushed log would hold more
    with EdgeStore.temporary(auto_index=False) as store:
        store.wal_flush_bytes = 32 * MIB
        peak = _write(store, n, dim=dim)
        last = store.retrieve("c", [n - 1], with_vectors=True)[0].vector["v"]
        assert len(last) == dim
    assert peak <= bound
