"""Crash safety: a process killed (SIGKILL) while upserting leaves every acknowledged point and no half write.

A child process upserts batches of deterministic points with ``wait=True``
and prints the number of each batch once ``upsert`` returned. It is killed
after a few acknowledgements, while it is still writing; the reopened store
must hold every acknowledged batch whole, and any batch at all only whole,
with exactly the payloads and vectors that were written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools.store import open_store

BATCH = 64
DIM = 16

_WRITER = textwrap.dedent(
    f"""
    import sys
    import numpy as np
    from qdrant_client import models
    from qdrant_tools.store import open_store

    store = open_store(sys.argv[1])
    if not store.collection_exists("c"):
        store.create_collection("c", vectors_config={{"v": models.VectorParams(size={DIM}, distance=models.Distance.DOT)}})
    for b in range(int(sys.argv[2]), 100000):
        ids = list(range(b * {BATCH}, (b + 1) * {BATCH}))
        vecs = [np.full({DIM}, float(i), dtype=np.float32).tolist() for i in ids]
        store.upsert("c", models.Batch(ids=ids, vectors={{"v": vecs}}, payloads=[{{"batch": b, "i": i}} for i in ids]))
        print(b, flush=True)
    """
)


def _write_then_kill(path, start: int, acks: int) -> int:
    """Run the writer from batch ``start``, SIGKILL it after ``acks`` acknowledgements; return the last acked batch."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(start)], stdout=subprocess.PIPE, env=env)
    last = start - 1
    try:
        for _ in range(acks):
            line = child.stdout.readline()
            assert line, "the writer stopped before it was killed"
            last = int(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return last


def _check(path, acknowledged: int) -> int:
    """Every batch up to ``acknowledged`` whole, later batches whole or absent, values exact; return batches seen."""
    with open_store(path) as store:
        points, _ = store.scroll("c", limit=1_000_000, with_payload=True, with_vectors=True)
    by_batch: dict[int, list[models.Record]] = {}
    for p in points:
        assert p.payload == {"batch": p.id // BATCH, "i": p.id}
        assert np.array_equal(p.vector["v"], np.full(DIM, float(p.id)))
        by_batch.setdefault(p.payload["batch"], []).append(p)
    assert all(len(v) == BATCH for v in by_batch.values()), "a batch was half written"
    assert set(range(acknowledged + 1)) <= set(by_batch)
    return max(by_batch) + 1


@pytest.mark.parametrize("acks", [3, 12])
def test_a_killed_writer_keeps_every_acknowledged_point_and_no_half_batch(tmp_path, acks):
    last = _write_then_kill(tmp_path / "s", 0, acks)
    _check(tmp_path / "s", last)


def test_writing_resumes_after_a_kill(tmp_path):
    first = _write_then_kill(tmp_path / "s", 0, 4)
    resume_at = _check(tmp_path / "s", first)
    second = _write_then_kill(tmp_path / "s", resume_at, 4)
    assert _check(tmp_path / "s", second) >= second + 1
