"""Every point of a collection, a page at a time: the one scroll loop, sync and async.

``scroll`` returns a page and the offset of the next; reading a whole collection (or every point a
filter matches) repeats it until the offset is ``None``. :func:`scroll_pages` and :func:`ascroll_pages`
are that loop, for any store (:data:`~qdrant_tools.store.protocol.StoreLike`, or its awaitable face).

Example:
    >>> from qdrant_client import QdrantClient, models
    >>> client = QdrantClient(":memory:")
    >>> client.create_collection("d", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
    True
    >>> _ = client.upsert("d", [models.PointStruct(id=i, vector=[1.0, float(i)]) for i in range(5)])
    >>> [[p.id for p in page] for page in scroll_pages(client, "d", page=2)]
    [[0, 1], [2, 3], [4]]
    >>> [[p.id for p in page] for page in scroll_pages(client, "d", page=2, limit=3)]
    [[0, 1], [2]]
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import AsyncStoreLike, StoreLike

#: Points per ``scroll`` call unless a caller asks for another page size.
PAGE = 256


def _request(page: int, limit: int | None, read: int, offset: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The ``scroll`` arguments of the next page: ``page`` points, fewer when ``limit`` leaves fewer to read."""
    size = page if limit is None else max(1, min(page, limit - read))
    return {"limit": size, "offset": offset, **options}


def _done(offset: Any, limit: int | None, read: int) -> bool:
    return offset is None or (limit is not None and read >= limit)


def scroll_pages(
    client: StoreLike,
    collection: str,
    *,
    page: int = PAGE,
    with_payload: Any = True,
    with_vectors: Any = False,
    scroll_filter: Any = None,
    limit: int | None = None,
) -> Iterator[list[Any]]:
    """The points of ``collection`` (those ``scroll_filter`` matches), one non-empty page at a time, in scroll order.

    Args:
        client: the store.
        collection: the collection to read.
        page: points per ``scroll`` call.
        with_payload: the payload to return (``True``, ``False``, a list of keys or a payload selector).
        with_vectors: the vectors to return (``True``, ``False`` or a list of vector names).
        scroll_filter: a ``qdrant_client.models.Filter``; ``None`` = every point.
        limit: at most this many points (the last page asks for no more); ``None`` = every point.

    Returns:
        An iterator over lists of records (``qdrant_client.models.Record``).
    """
    options = {"scroll_filter": scroll_filter, "with_payload": with_payload, "with_vectors": with_vectors}
    offset, read = None, 0
    while True:
        points, offset = client.scroll(collection, **_request(page, limit, read, offset, options))
        read += len(points)
        if points:
            yield points
        if _done(offset, limit, read):
            return


async def ascroll_pages(
    aclient: AsyncStoreLike,
    collection: str,
    *,
    page: int = PAGE,
    with_payload: Any = True,
    with_vectors: Any = False,
    scroll_filter: Any = None,
    limit: int | None = None,
) -> AsyncIterator[list[Any]]:
    """:func:`scroll_pages` through an async client (an ``AsyncQdrantClient`` or the async store)."""
    options = {"scroll_filter": scroll_filter, "with_payload": with_payload, "with_vectors": with_vectors}
    offset, read = None, 0
    while True:
        points, offset = await aclient.scroll(collection, **_request(page, limit, read, offset, options))
        read += len(points)
        if points:
            yield points
        if _done(offset, limit, read):
            return
