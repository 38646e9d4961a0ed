"""``open_store``: the one way posfair opens Qdrant (embedded folder, temporary store, or server).

============================================  ==========================================
``open_store(path="DIR")``                    :class:`EdgeStore`: Qdrant Edge, embedded
                                              (the default; one process per folder)
``open_store(":memory:")``                    :class:`EdgeStore` in a temporary folder,
                                              deleted on ``close()`` (tests, evaluation)
``open_store(url="https://host:6333")``       a ``QdrantClient`` for a server; the API
                                              key comes from ``api_key`` or
                                              ``$QDRANT_API_KEY`` and is refused over
                                              plain http unless allowed
``open_store("DIR", engine="local")``         qdrant-client's local mode (a real
                                              ``QdrantClient``; slow, for tests and for
                                              LlamaIndex code that needs that class)
``open_store("DIR", auto_index=False)``       :class:`EdgeStore` without the background
                                              indexer: only ``build_index`` indexes
============================================  ==========================================

Example:
    >>> store = open_store(":memory:")
    >>> store.collection_exists("demo")
    False
    >>> store.close()
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from qdrant_tools.store.edge_store import EdgeStore, legacy_message
from qdrant_tools.store.errors import (
    NotAStoreError,
    ServerUnreachableError,
    StorageDamagedError,
    StoreLockedError,
    StoreNotFoundError,
)
from qdrant_tools.store.folder import MARKER, folder_kind, missing_marker_message

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

    from qdrant_tools.store.protocol import StoreLike

Engine = Literal["edge", "local"]
MEMORY = ":memory:"


def open_store(
    path: str | Path | None = None,
    url: str | None = None,
    api_key: str | None = None,
    *,
    engine: Engine = "edge",
    must_exist: bool = False,
    allow_insecure_api_key: bool = False,
    timeout: float = 10.0,
    retry: bool = False,
    auto_index: bool = True,
    warm: bool = False,
) -> StoreLike:
    """Open Qdrant storage: an embedded folder (``path``) or a server (``url``).

    Args:
        path: storage folder, or ``":memory:"`` for a temporary store.
        url: Qdrant server URL (``https://host:6333``) instead of ``path``.
        api_key: server API key (default: ``$QDRANT_API_KEY``); never sent over http unless allowed.
        engine: embedded engine: ``"edge"`` (Qdrant Edge, default) or ``"local"`` (qdrant-client's local mode).
        must_exist: refuse to create a new folder (readers: "run ingest first").
        allow_insecure_api_key: allow an API key over plain ``http://``.
        timeout: seconds per server request.
        retry: wrap a server client in :class:`qdrant_tools.retry.RetryingClient`.
        auto_index: Edge store only: index new points in the background once a collection's
            unindexed points pass its ``indexing_threshold`` (as a server's optimizer does; see
            :mod:`qdrant_tools.store.indexer`). False: only ``build_index`` indexes. Ignored for
            a server and for local mode (which has no index).
        warm: Edge store folder only: read each collection's files into the page cache when it is first
            used (:meth:`EdgeStore.warm`), so the first queries after an open do not wait on the disk; for
            readers (``PosFairRetriever.from_path`` and ``PosFairVectorStore(path=...)`` pass it). Ignored
            for a server, local mode and ``":memory:"``.

    Returns:
        An :class:`EdgeStore` or a ``QdrantClient`` (same method names); close it when done. What it
        keeps and does (kind ``"edge"``, ``"local"`` or ``"server"``, payload indexes, index builds) is
        :func:`qdrant_tools.store.protocol.store_traits` of it: the Edge store declares its traits, a
        ``QdrantClient``'s follow from the ``location``/``path``/``url`` opened here.

    Raises:
        ValueError: both or neither of ``path`` and ``url``, an unknown engine, a malformed URL,
            or an API key over plain http (``InsecureApiKeyError``).
        StoreError: the folder is locked, missing (``must_exist``), of the old local mode, or not a store;
            the server is unreachable. The message says what to do.
    """
    if (path is None) == (url is None):
        raise ValueError("open_store needs exactly one of path= (embedded storage folder) and url= (Qdrant server)")
    if engine not in ("edge", "local"):
        raise ValueError(f"engine must be 'edge' (Qdrant Edge) or 'local' (qdrant-client local mode), got {engine!r}")
    if url is not None:
        return open_server(url, api_key, allow_insecure_api_key=allow_insecure_api_key, timeout=timeout, retry=retry)
    if str(path) == MEMORY:
        return EdgeStore.temporary(auto_index=auto_index) if engine == "edge" else _local(MEMORY)
    if engine == "local":
        return _open_local(Path(path), must_exist)  # type: ignore[arg-type]
    return EdgeStore.open(path, must_exist=must_exist, auto_index=auto_index, warm=warm)  # type: ignore[arg-type]


def open_server(
    url: str,
    api_key: str | None = None,
    *,
    allow_insecure_api_key: bool = False,
    timeout: float = 10.0,
    retry: bool = False,
) -> StoreLike:
    """A ``QdrantClient`` for the server at ``url``, checked with one request.

    Raises:
        ValueError: a malformed URL, or an API key over plain http.
        ServerUnreachableError: the server did not answer.
    """
    from qdrant_tools.snapshots import ServerConfig

    server = ServerConfig(url, allow_insecure_api_key=allow_insecure_api_key, timeout=timeout)
    client = server.qdrant_client(api_key=api_key)
    try:
        client.get_collections()
    except Exception as exc:  # network: report, do not retry here
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ServerUnreachableError(
            f"cannot reach Qdrant at {url} ({type(exc).__name__}: {first}); start the server, check the URL "
            "(--qdrant-url) and the API key, or use embedded storage (--path)"
        ) from None
    if retry:
        from qdrant_tools.retry import RetryingClient

        return RetryingClient(client)
    return client


def _local(location: str) -> QdrantClient:
    from qdrant_client import QdrantClient

    return QdrantClient(location=location) if location == MEMORY else QdrantClient(path=location)


def _open_local(path: Path, must_exist: bool) -> QdrantClient:
    """qdrant-client's local mode on ``path``, with the errors of the embedded store."""
    kind = folder_kind(path)
    if kind == "unmarked-store":  # an Edge store that lost its store.json: local mode must not write into it
        raise StorageDamagedError(missing_marker_message(path), path / MARKER)
    if kind == "store":
        raise NotAStoreError(
            f"{str(path)!r} is a Qdrant Edge store; open it with open_store(path) (engine='edge'), "
            "or give local mode another folder"
        )
    if must_exist and kind != "legacy-local":
        raise StoreNotFoundError(f"no qdrant-client local-mode storage at {str(path)!r}; write it first")
    try:
        return _local(os.fspath(path))
    except RuntimeError as exc:
        if "already accessed" in str(exc):
            raise StoreLockedError(
                f"embedded Qdrant storage {str(path)!r} is in use by another process (local mode allows one client "
                "per folder); wait for it to finish, use another path, or run a Qdrant server"
            ) from None
        raise


__all__ = ["MEMORY", "Engine", "legacy_message", "open_server", "open_store"]
