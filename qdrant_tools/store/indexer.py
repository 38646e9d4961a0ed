"""Automatic indexing for the embedded store: build a collection's HNSW index after writes, as a server's optimizer does.

Qdrant Edge has no optimizer of its own; ``EdgeShard.optimize()`` runs the server's optimizers (indexing,
merge, vacuum) when called, blocking until they are done. The :class:`AutoIndexer` of an
:class:`~qdrant_tools.store.EdgeStore` calls it for every client: once a collection's backlog of written
points reaches :func:`threshold_points` (its ``indexing_threshold``, KB, over the bytes of a point's largest
dense vector; 0 turns indexing off) *and* no write has come for ``quiet_s`` seconds, one worker thread per
store runs ``optimize()`` on it (a *step*). The pause matters because qdrant_edge 0.9's ``optimize()`` holds
Python's GIL for its whole run. Points not yet indexed are searched exactly. Errors of a step are logged and
raised once as :class:`IndexBuildError` by the store's next write, ``build_index`` or ``close``.
docs/storage.md ("Automatic indexing (Edge store)") has the whole story and the measurements.

Example:
    >>> import tempfile
    >>> from qdrant_client import models
    >>> from qdrant_tools.store import open_store
    >>> store = open_store(tempfile.mkdtemp())          # auto_index=True by default
    >>> store.create_collection("demo", vectors_config=models.VectorParams(size=4,
    ...     distance=models.Distance.DOT), optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1))
    True
    >>> _ = store.upsert("demo", models.Batch(ids=list(range(300)), vectors=[[1.0, 0, 0, i] for i in range(300)]))
    >>> store.wait_for_index("demo", timeout=60)
    True
    >>> store.get_collection("demo").indexed_vectors_count
    300
    >>> store.close()
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qdrant_tools.store.config import CollectionRecord
from qdrant_tools.store.errors import StoreError

#: Qdrant's default ``indexing_threshold`` in KB (a server's, and Qdrant Edge's ``EdgeOptimizersConfig``).
DEFAULT_INDEXING_THRESHOLD_KB = 10_000
#: Seconds without a write before a step may start (see the module docstring).
DEFAULT_QUIET_S = 0.5
#: Bytes a point is assumed to hold when a collection has no dense vector (sparse only).
_SPARSE_POINT_BYTES = 1024
_ELEMENT_BYTES = {"float32": 4, "float16": 2, "uint8": 1}

logger = logging.getLogger(__name__)


class IndexBuildError(StoreError):
    """A background index build failed; raised by the store's next write, ``build_index`` or ``close``."""


def threshold_points(record: CollectionRecord) -> int:
    """Points after which a collection is worth indexing, from its ``indexing_threshold`` (KB); 0: never.

    A segment is indexed by Qdrant once one of its vectors' storage passes the
    threshold, so the count is the threshold over the largest dense vector of a
    point (dimensions x bytes per element; a multivector counts one inner vector).

    Example:
        >>> from qdrant_client import models
        >>> threshold_points(CollectionRecord(vectors=models.VectorParams(size=384, distance="Cosine")))
        6667
    """
    given = record.optimizers_config.indexing_threshold if record.optimizers_config else None
    kb = DEFAULT_INDEXING_THRESHOLD_KB if given is None else given
    if kb <= 0:
        return 0
    sizes = [
        p.size * _ELEMENT_BYTES.get(getattr(p.datatype, "value", p.datatype) or "float32", 4)
        for p in record.named.values()
    ]
    per_point = max(sizes, default=_SPARSE_POINT_BYTES)
    return max(1, math.ceil(kb * 1024 / per_point))


@dataclass
class _Backlog:
    threshold: int
    pending: int = 0
    running: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)  # held for the length of one optimize()


class AutoIndexer:
    """One worker thread that runs ``optimize`` steps on a store's collections (see the module docstring).

    Args:
        optimize: ``optimize(collection_name)``, run by the worker (the store opens the collection).
        quiet_s: seconds without a write before a step may start.
    """

    def __init__(self, optimize: Callable[[str], Any], *, quiet_s: float = DEFAULT_QUIET_S) -> None:
        if quiet_s < 0:
            raise ValueError(f"quiet_s must be >= 0 seconds, got {quiet_s}; typical values are 0.1-2")
        self._optimize = optimize
        self._quiet_s = quiet_s
        self._cond = threading.Condition()
        self._backlogs: dict[str, _Backlog] = {}
        self._last_write = 0.0
        self._stopping = False
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="qdrant-edge-indexer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ called by the store
    def track(self, name: str, record: CollectionRecord, backlog: int = 0) -> None:
        """Start tracking a collection just opened or created, with ``backlog`` points not yet indexed."""
        with self._cond:
            if name not in self._backlogs:
                self._backlogs[name] = _Backlog(threshold_points(record), pending=backlog)
                self._cond.notify_all()

    def written(self, name: str, points: int) -> None:
        """``points`` were upserted into ``name`` (wakes the worker once the backlog reaches the threshold)."""
        with self._cond:
            b = self._backlogs.get(name)
            self._last_write = time.monotonic()
            if b is not None:
                b.pending += points
                if b.threshold and b.pending >= b.threshold:
                    self._cond.notify_all()

    def build_lock(self, name: str) -> threading.Lock | None:
        """The lock a step holds while it runs (``build_index`` and ``delete_collection`` take it first)."""
        with self._cond:
            b = self._backlogs.get(name)
            return b.lock if b is not None else None

    def built(self, name: str) -> None:
        """An explicit ``build_index`` indexed everything of ``name``: nothing is pending."""
        with self._cond:
            b = self._backlogs.get(name)
            if b is not None:
                b.pending = 0
                self._cond.notify_all()

    def forget(self, name: str) -> None:
        """Stop tracking ``name`` (deleted); waits for its running step."""
        lock = self.build_lock(name)
        if lock is None:
            return
        with lock, self._cond:
            self._backlogs.pop(name, None)

    def raise_error(self) -> None:
        """Raise (once) the error of a failed background step, if any.

        Raises:
            IndexBuildError: a step failed since the last call.
        """
        with self._cond:
            err, self._error = self._error, None
        if err is not None:
            raise IndexBuildError(
                f"the background index build failed ({type(err).__name__}: {err}); the data written is intact "
                "and searched exactly. Call build_index(collection) to retry, or open the store with "
                "open_store(path, auto_index=False) and build the index yourself"
            ) from err

    def wait(self, name: str, timeout: float | None = None) -> bool:
        """Block until ``name`` has no step running and no backlog at its threshold; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                b = self._backlogs.get(name)
                if b is None or self._stopping or self._error is not None:
                    return True
                if not b.running and not (b.threshold and b.pending >= b.threshold):
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)

    def busy(self, name: str) -> bool:
        """Whether a step on ``name`` runs or is due."""
        with self._cond:
            b = self._backlogs.get(name)
            return b is not None and (b.running or bool(b.threshold and b.pending >= b.threshold))

    def stop(self) -> None:
        """Stop the worker; a running step (which Qdrant Edge cannot cancel) is waited for."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    # ------------------------------------------------------------------ the worker
    def _next_due(self) -> tuple[str | None, float | None]:
        """The collection whose step may start now, else how long to wait (None: until notified)."""
        due = [n for n, b in self._backlogs.items() if b.threshold and b.pending >= b.threshold]
        if not due:
            return None, None
        quiet_for = time.monotonic() - self._last_write
        if quiet_for < self._quiet_s:
            return None, self._quiet_s - quiet_for
        return max(due, key=lambda n: self._backlogs[n].pending), None

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    name, wait_s = self._next_due()
                    if name is not None:
                        break
                    self._cond.wait(wait_s)
                b = self._backlogs[name]
                b.running = True
                started_with = b.pending
            try:
                with b.lock:
                    self._optimize(name)
            except Exception as exc:  # kept for the caller (raise_error), never lost
                logger.exception("background index build of collection %r failed", name)
                with self._cond:
                    self._error = exc
            finally:
                with self._cond:
                    b.running = False
                    b.pending = max(0, b.pending - started_with)  # writes made during the step stay pending
                    self._cond.notify_all()
