"""``AsyncStore``: an ``AsyncQdrantClient``-shaped face of a synchronous store, for the embedded engine.

Qdrant Edge holds the interpreter lock while it answers, so queries sent from many
threads take as long as the same queries one after another, and nothing else in
the process runs meanwhile. ``AsyncStore.query_points`` queues each request and one
worker per collection sends everything queued as one ``query_batch_points`` call in
a worker thread (one engine call instead of many); requests that arrive while a
batch runs go out together in the next one. The event loop is never blocked, and
no lock is held around queries. Other calls run in a worker thread as they are.

``bench/async_queries.py`` measures it against sequential queries, and checks the
interpreter lock.

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
        max_batch: the most requests sent in one ``query_batch_points`` (or ``retrieve``) call.
    """

    def __init__(self, store: Any, max_batch: int = 64) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}; e.g. 64")
        self.store = store
        self.max_batch = max_batch
        self._queued: dict[tuple[str, ...], list[tuple[Any, asyncio.Future]]] = defaultdict(list)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if not callable(method):
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(functools.partial(method, *args, **kwargs))

        return call

    async def query_points(self, collection_name: str, **kwargs: Any) -> models.QueryResponse:
        """Queue one query; it is answered by the next ``query_batch_points`` call of its collection."""
        return await self._enqueue(("query", collection_name), as_query_request(kwargs))

    async def retrieve(
        self, collection_name: str, ids: list[Any], with_payload: Any = True, with_vectors: Any = False
    ) -> list[Any]:
        """Queue one ``retrieve``; concurrent ones with the same selectors are sent as one call."""
        key = ("retrieve", collection_name, repr(with_payload), repr(with_vectors))
        return await self._enqueue(key, (list(ids), with_payload, with_vectors))

    async def _enqueue(self, key: tuple[str, ...], item: Any) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        queue = self._queued[key]
        queue.append((item, future))
        if len(queue) == 1:  # no worker yet for this key: start one once the ready callers have queued
            loop.call_soon(lambda: asyncio.ensure_future(self._work(key)))
        return await future

    async def _work(self, key: tuple[str, ...]) -> None:
        """Send the queued calls of ``key``, batch after batch, until none are left."""
        queue = self._queued[key]
        while queue:
            batch = queue[: self.max_batch]
            try:
                answers = await asyncio.to_thread(self._send, key, [item for item, _ in batch])
            except Exception as exc:
                answers = [exc] * len(batch)
            del queue[: len(batch)]
            for (_, future), answer in zip(batch, answers):
                if future.done():
                    continue
                if isinstance(answer, Exception):
                    future.set_exception(answer)
                else:
                    future.set_result(answer)
        self._queued.pop(key, None)

    def _send(self, key: tuple[str, ...], items: list[Any]) -> list[Any]:
        """One store call answering every item of a batch, in order."""
        collection = key[1]
        if key[0] == "query":
            return self.store.query_batch_points(collection, requests=items)
        _, with_payload, with_vectors = items[0]
        ids = list(dict.fromkeys(i for item_ids, _, _ in items for i in item_ids))
        records = {
            str(r.id): r
            for r in self.store.retrieve(collection, ids=ids, with_payload=with_payload, with_vectors=with_vectors)
        }
        return [[records[str(i)] for i in item_ids if str(i) in records] for item_ids, _, _ in items]
