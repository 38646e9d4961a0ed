"""Qdrant storage for posfair: one opener and an embedded Qdrant Edge store.

* :func:`open_store` opens a folder (Qdrant Edge, embedded), a temporary
  store (``":memory:"``) or a server (``url=``); everything posfair does with
  Qdrant goes through what it returns.
* :class:`EdgeStore` speaks qdrant-client's method names and
  ``qdrant_client.models`` types, one Qdrant Edge shard per collection.
* :class:`Store` (:mod:`qdrant_tools.store.protocol`) is what posfair needs of
  any of them; :func:`store_traits` says what a store keeps and does (kind,
  payload indexes, index builds on request) without looking at its class.

Example:
    >>> from qdrant_client import models
    >>> from qdrant_tools.store import open_store
    >>> with open_store(":memory:") as store:
    ...     store.create_collection("d", vectors_config={"v": models.VectorParams(size=2,
    ...                             distance=models.Distance.DOT)})
    True
"""

from qdrant_tools.store.edge_store import EdgeStore
from qdrant_tools.store.errors import (
    LegacyStorageError,
    NotAStoreError,
    ServerUnreachableError,
    StorageDamagedError,
    StoreError,
    StoreLockedError,
    StoreNotFoundError,
    UnsupportedCallError,
)
from qdrant_tools.store.indexer import IndexBuildError
from qdrant_tools.store.open import open_server, open_store
from qdrant_tools.store.protocol import Store, StoreTraits, store_traits

__all__ = [
    "EdgeStore",
    "IndexBuildError",
    "LegacyStorageError",
    "NotAStoreError",
    "ServerUnreachableError",
    "StorageDamagedError",
    "Store",
    "StoreError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoreTraits",
    "UnsupportedCallError",
    "open_server",
    "open_store",
    "store_traits",
]
