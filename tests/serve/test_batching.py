"""Coalescer: one model call at a time; everything pending joins the next call, up to max_items."""

from __future__ import annotations

import asyncio
import threading

import pytest

from llamaindex_posfair.serve.batching import Coalescer


class Gate:
    """A model call that blocks its first call until released, recording every call's items."""

    def __init__(self, fail_on=None):
        self.release = threading.Event()
        self.seen: list[list[int]] = []
        self.fail_on = fail_on

    def __call__(self, items):
        self.seen.append(list(items))
        if len(self.seen) == 1:
            self.release.wait(5)
        if self.fail_on is not None and self.fail_on in items:
            raise RuntimeError("model failed")
        return [x * 10 for x in items]


async def _run(gate, max_items, groups):
    c = Coalescer(gate, max_items)
    first = asyncio.create_task(c.submit([0]))
    await asyncio.sleep(0.05)  # the first call is running
    rest = [asyncio.create_task(c.submit(g)) for g in groups]
    await asyncio.sleep(0.05)
    gate.release.set()
    return c, await asyncio.gather(first, *rest, return_exceptions=True)


async def test_requests_waiting_for_a_busy_model_join_one_call():
    gate = Gate()
    c, results = await _run(gate, 32, [[1, 2], [3], [4, 5, 6]])
    assert c.calls == [1, 6] and gate.seen[1] == [1, 2, 3, 4, 5, 6]
    assert results == [[0], [10, 20], [30], [40, 50, 60]]


async def test_calls_hold_at_most_max_items():
    gate = Gate()
    c, results = await _run(gate, 4, [[i] for i in range(1, 11)])
    assert c.calls == [1, 4, 4, 2]
    assert [r[0] for r in results] == [10 * i for i in range(11)]


async def test_a_failed_call_is_retried_item_by_item_so_only_the_bad_item_fails():
    gate = Gate(fail_on=3)
    c, results = await _run(gate, 2, [[1], [2], [3], [4]])
    assert c.calls == [1, 2, 2]
    assert gate.seen[3:] == [[3], [4]]  # the failed call [3, 4], then each item alone
    assert results[:3] == [[0], [10], [20]] and results[4] == [40]
    assert isinstance(results[3], RuntimeError)


async def test_a_long_request_shares_calls_round_robin_with_a_short_one():
    gate = Gate()
    c = Coalescer(gate, max_items=4, cost=lambda x: x, max_cost=10)
    first = asyncio.create_task(c.submit([0]))
    await asyncio.sleep(0.05)
    long = asyncio.create_task(c.submit_groups([[5, 5, 5, 5, 5, 5]]))  # one request cut in six items
    short = asyncio.create_task(c.submit([1]))
    await asyncio.sleep(0.05)
    gate.release.set()
    assert await short == [10] and await long == [[50] * 6] and await first == [0]
    assert gate.seen[1] == [5, 1]  # the short request joins the long one's first call (cost 6 <= 10)
    assert gate.seen[2:] == [[5, 5], [5, 5], [5]]  # then at most max_cost per call


def test_max_items_must_be_positive():
    with pytest.raises(ValueError, match="max_items must be >= 1, got 0"):
        Coalescer(lambda xs: xs, 0)
