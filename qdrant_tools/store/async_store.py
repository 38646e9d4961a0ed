"""``AsyncStore``: an ``AsyncQdrantClient``-shaped face of a synchronous store, for the embedded engine.

Qdrant Edge answers one call at a time in a process, so queries sent from many
threads take as long as the same queries one after another. What it does
parallelise is a *batch*: ``query_batch_points`` scores its requests across the
cores. ``AsyncStore.query_points`` therefore queues each request and one worker per
collection sends everything queued as one ``query_batch_points`` call in a worker
thread; requests that arrive while a batch runs go out together in the next one.
Concurrent ``await store.query_points(...)`` calls thus run as batches, and the
event loop is never blocked. No lock is held around queries. Other calls run in a
worker thread as they are.

``bench/async_queries.py`` measures it against sequential queries.

Example:
    >>> import asyncio
    >>> from qdrant_tools.store import open_store
    >>> store = open_store(":memory:")
    >>> asyncio.run(AsyncStore(store).collection_exists("demo"))
    False
    >>> store.close()
"""

from __future__ import annotations

import asyncio
import functools
from collections import defaultdict
from typing import Any

from qdrant_client import models

__all__ = ["AsyncStore"]

#: ``query_points`` keyword -> its ``models.QueryRequest`` field.
_REQUEST_FIELDS = {
    "query": "query",
    "using": "using",
    "prefetch": "prefetch",
    "query_filter": "filter",
    "search_params": "params",
    "limit": "limit",
    "offset": "offset",
    "with_payload": "with_payload",
    "with_vectors": "with_vector",
    "score_threshold": "score_threshold",
}


def as_query_request(kwargs: dict[str, Any]) -> models.QueryRequest:
    """``query_points``' keyword arguments as one request of ``query_batch_points``.

    Raises:
        TypeError: a keyword ``query_points`` takes that a batch request cannot carry.
    """
    unknown = sorted(set(kwargs) - set(_REQUEST_FIELDS))
    if unknown:
        raise TypeError(
            f"query_points arguments {unknown} cannot be sent in a batch; pass only {sorted(_REQUEST_FIELDS)}"
        )
    return models.QueryRequest(**{_REQUEST_FIELDS[k]: v for k, v in kwargs.items() if v is not None})


class AsyncStore:
    """Awaitable calls on a synchronous store (an ``EdgeStore`` or a ``QdrantClient``), queries batched.

    Args:
        store: the store; it stays the caller's to close.
        max_batch: the most requests sent in one ``query_batch_points`` call.
    """

    def __init__(self, store: Any, max_batch: int = 64) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}; e.g. 64")
        self.store = store
        self.max_batch = max_batch
        self._queued: dict[str, list[tuple[models.QueryRequest, asyncio.Future]]] = defaultdict(list)
        self._working: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if not callable(method):
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(functools.partial(method, *args, **kwargs))

        return call

    async def query_points(self, collection_name: str, **kwargs: Any) -> models.QueryResponse:
        """Queue one query; it is answered by the next ``query_batch_points`` call of its collection."""
        request = as_query_request(kwargs)
        future = asyncio.get_running_loop().create_future()
        self._queued[collection_name].append((request, future))
        if collection_name not in self._working:
            self._working.add(collection_name)
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._work(collection_name)))
        return await future

    async def _work(self, collection_name: str) -> None:
        """Send the collection's queued requests, batch after batch, until none are left."""
        try:
            while self._queued[collection_name]:
                batch = self._queued[collection_name][: self.max_batch]
                del self._queued[collection_name][: self.max_batch]
                await self._send(collection_name, batch)
        finally:
            self._working.discard(collection_name)
            self._queued.pop(collection_name, None)

    async def _send(self, collection_name: str, batch: list[tuple[models.QueryRequest, asyncio.Future]]) -> None:
        requests = [r for r, _ in batch]
        try:
            answers = await asyncio.to_thread(self.store.query_batch_points, collection_name, requests=requests)
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), answer in zip(batch, answers):
            if not future.done():
                future.set_result(answer)
