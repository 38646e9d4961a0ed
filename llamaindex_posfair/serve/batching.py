"""``Coalescer``: one model call at a time, each taking what queued while the last one ran, fairly.

The deployments submit each request to a ``Coalescer`` rather than use Ray Serve's ``@serve.batch``
(why: ``docs/serving.md``, "Batching"): the batch grows with the load, each request is answered as
soon as its own items are done, and a lone request waits at most one wait window (``wait_s``).
Each request is a *group* of items (a long request is cut into several by the deployment); a call
takes items round-robin over the waiting groups, up to ``max_items`` items and ``max_cost`` (e.g.
characters). When a call of several items raises, each of its items is run alone, so only the item
that fails gets the error. The model call runs in a worker thread, so the replica's event loop keeps
accepting requests and health checks meanwhile.

Example:
    >>> import asyncio
    >>> c = Coalescer(lambda xs: [x * 2 for x in xs], max_items=8)
    >>> asyncio.run(c.submit([1, 2, 3]))
    [2, 4, 6]
    >>> asyncio.run(c.submit_groups([[1, 2], [3]]))
    [[2, 4], [6]]
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any


class Coalescer:
    """Serialise calls of ``fn(items) -> results`` (same length, same order), merging waiting items fairly.

    Args:
        fn: the (blocking) model call; it runs in a worker thread.
        max_items: most items per call.
        cost: the cost of one item (e.g. its characters); ``None``: every item costs 1.
        max_cost: most cost per call (a call always takes at least one item); ``None``: no bound.
        wait_s: how long an idle coalescer waits for more items before its first call.

    Raises:
        ValueError: ``max_items`` < 1 or ``max_cost`` < 1.
    """

    def __init__(self, fn: Callable[[list[Any]], Sequence[Any]], max_items: int,
                 cost: Callable[[Any], float] | None = None, max_cost: float | None = None,
                 wait_s: float = 0.0) -> None:  # fmt: skip
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        if max_cost is not None and max_cost < 1:
            raise ValueError(f"max_cost must be >= 1 or None, got {max_cost}")
        self._fn = fn
        self._max = int(max_items)
        self._cost = cost or (lambda _: 1.0)
        self._max_cost = max_cost
        self._wait_s = float(wait_s)
        self._groups: deque[deque[tuple[Any, asyncio.Future]]] = deque()
        self._runner: asyncio.Task | None = None
        self.calls: list[int] = []  # items per call (the last 1000), for tests and metrics

    async def submit(self, items: Sequence[Any]) -> list[Any]:
        """The results of ``items`` (each its own group); they join the next call with everything else pending."""
        return [out[0] for out in await self.submit_groups([[item] for item in items])]

    async def submit_groups(self, groups: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """The results of each group's items; the groups' items share calls round-robin with other groups."""
        loop = asyncio.get_running_loop()
        futures = [[loop.create_future() for _ in group] for group in groups]
        for group, futs in zip(groups, futures):
            if futs:
                self._groups.append(deque(zip(group, futs)))
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._drain())
        return [list(await asyncio.gather(*futs)) for futs in futures]

    def _take(self) -> list[tuple[Any, asyncio.Future]]:
        """The next call's items: round-robin over the groups, within ``max_items`` and ``max_cost``."""
        take: list[tuple[Any, asyncio.Future]] = []
        spent = 0.0
        while self._groups and len(take) < self._max:
            group = self._groups.popleft()
            item, future = group[0]
            if future.cancelled():
                group.popleft()
            else:
                cost = self._cost(item)
                if take and self._max_cost is not None and spent + cost > self._max_cost:
                    self._groups.appendleft(group)
                    break
                take.append(group.popleft())
                spent += cost
            if group:
                self._groups.append(group)
        return take

    async def _drain(self) -> None:
        if self._wait_s > 0:
            await asyncio.sleep(self._wait_s)
        while self._groups:
            take = self._take()
            if not take:
                continue
            self.calls = [*self.calls[-999:], len(take)]
            try:
                results = await asyncio.to_thread(self._fn, [item for item, _ in take])
            except Exception as exc:
                if len(take) == 1:
                    _settle(take[0][1], error=exc)
                else:
                    await self._one_by_one(take)
                continue
            for (_, f), result in zip(take, results):
                _settle(f, result)

    async def _one_by_one(self, take: list[tuple[Any, asyncio.Future]]) -> None:
        """Run each item of a failed call alone: the items that fail get their own error."""
        for item, f in take:
            if f.cancelled():
                continue
            try:
                [result] = await asyncio.to_thread(self._fn, [item])
            except Exception as exc:
                _settle(f, error=exc)
            else:
                _settle(f, result)


def _settle(future: asyncio.Future, result: Any = None, error: BaseException | None = None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
