"""``Coalescer``: one model call at a time, each taking everything that queued while the last one ran.

Ray Serve's ``@serve.batch`` closes a batch ``batch_wait_timeout_s`` after its first
request and, when the model is busy, queues the closed batch behind it: under a
steady load the batches stay as small as the requests that arrive within one
wait window, however long the model is busy. The deployments therefore let
``@serve.batch`` hand its batches on at once, and a ``Coalescer`` merges all
that is pending when the model becomes free (up to ``max_items``) into one call:
the batch grows with the load, and a lone request still waits at most one wait
window.

The model call runs in a worker thread, so the replica's event loop keeps
accepting requests and health checks meanwhile.

Example:
    >>> import asyncio
    >>> c = Coalescer(lambda xs: [x * 2 for x in xs], max_items=8)
    >>> asyncio.run(c.submit([1, 2, 3]))
    [2, 4, 6]
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any


class Coalescer:
    """Serialise calls of ``fn(items) -> results`` (same length, same order), merging waiting items.

    Args:
        fn: the (blocking) model call; it runs in a worker thread.
        max_items: most items per call.

    Raises:
        ValueError: ``max_items`` < 1.
    """

    def __init__(self, fn: Callable[[list[Any]], Sequence[Any]], max_items: int) -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self._fn = fn
        self._max = int(max_items)
        self._pending: list[tuple[Any, asyncio.Future]] = []
        self._runner: asyncio.Task | None = None
        self.calls: list[int] = []  # items per call (the last 1000), for tests and metrics

    async def submit(self, items: Sequence[Any]) -> list[Any]:
        """The results of ``items``; they join the next call together with everything else pending."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in items]
        self._pending.extend(zip(items, futures))
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._drain())
        return list(await asyncio.gather(*futures))

    async def _drain(self) -> None:
        while self._pending:
            take, self._pending = self._pending[: self._max], self._pending[self._max :]
            take = [(item, f) for item, f in take if not f.cancelled()]
            if not take:
                continue
            self.calls = [*self.calls[-999:], len(take)]
            try:
                results = await asyncio.to_thread(self._fn, [item for item, _ in take])
            except Exception as exc:
                for _, f in take:
                    if not f.done():
                        f.set_exception(exc)
                continue
            for (_, f), result in zip(take, results):
                if not f.done():
                    f.set_result(result)
