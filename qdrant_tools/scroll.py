"""Every point of a collection, a page at a time: the one scroll loop (``scroll`` until the next offset is
``None``), for a store (:data:`~qdrant_tools.store.protocol.StoreLike`) and for its async face.

Example:
    >>> from qdrant_client import QdrantClient, models
    >>> client = QdrantClient(":memory:")
    >>> client.create_collection("d", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
    True
    >>> _ = client.upsert("d", [models.PointStruct(id=i, vector=[1.0, float(i)]) for i in range(5)])
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


def _size(page: int, limit: int | None, read: int) -> int:
    """Points to ask for next: a page, fewer when ``limit`` leaves fewer to read."""
    return page if limit is None else max(1, min(page, limit - read))


def scroll_pages(
    client: StoreLike, collection: str, *, page: int = PAGE, limit: int | None = None, **options: Any
) -> Iterator[list[Any]]:
    """The records of ``collection``, one non-empty page at a time, in scroll order.

    Args:
        client: the store.
        page: points per ``scroll`` call.
        limit: at most this many points (the last call asks for no more); ``None`` = every point.
        **options: the other arguments of ``QdrantClient.scroll``: ``scroll_filter``, ``with_payload`` (default
            ``True``), ``with_vectors`` (default ``False``), ``order_by``.
    """
    offset, read = None, 0
    while True:
        points, offset = client.scroll(collection, limit=_size(page, limit, read), offset=offset, **options)
        read += len(points)
        if points:
            yield points
        if offset is None or (limit is not None and read >= limit):
            return


async def ascroll_pages(
    aclient: AsyncStoreLike, collection: str, *, page: int = PAGE, limit: int | None = None, **options: Any
) -> AsyncIterator[list[Any]]:
    """:func:`scroll_pages` through an ``AsyncQdrantClient`` or the async store."""
    offset, read = None, 0
    while True:
        points, offset = await aclient.scroll(collection, limit=_size(page, limit, read), offset=offset, **options)
        read += len(points)
        if points:
            yield points
        if offset is None or (limit is not None and read >= limit):
            return
