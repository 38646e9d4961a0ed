"""What posfair needs of a Qdrant store: qdrant-client's method names plus three declared traits.

The embedded Qdrant Edge store, qdrant-client's local mode and a Qdrant server
(:func:`qdrant_tools.store.open_store`) answer the same calls but differ in what they keep and do; code that
must know asks :class:`StoreTraits`, never the class name (each kind's traits: :data:`EDGE`, :data:`LOCAL`,
:data:`SERVER`). A store declares the traits as attributes (:class:`Store`);
:func:`store_traits` reads them, and answers for a ``QdrantClient`` from the options it was opened with.

Example:
    >>> from qdrant_client import QdrantClient
    >>> store_traits(QdrantClient(":memory:")).kind
    'local'
    >>> from qdrant_tools.store import open_store
    >>> with open_store(":memory:") as store:
    ...     t = store_traits(store)
    >>> t.kind, t.keeps_payload_indexes, t.builds_index_on_request
    ('edge', True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, get_args, runtime_checkable

from qdrant_tools.store.config import CLUSTER_SETTINGS

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient, QdrantClient

    from qdrant_tools.store.async_store import AsyncStore

StoreKind = Literal["edge", "local", "server"]
KINDS: tuple[str, ...] = get_args(StoreKind)

#: What qdrant-client's local mode neither keeps nor reports (it keeps only the vectors' size, distance, kind).
LOCAL_MODE_UNVERIFIED: tuple[str, ...] = (
    *CLUSTER_SETTINGS,
    "on_disk_payload",
    "hnsw",
    "quantization",
    "payload_indexes",
)


@dataclass(frozen=True)
class StoreTraits:
    """What a store keeps and does, as posfair needs to know it.

    Args:
        kind: ``"edge"`` (Qdrant Edge, embedded), ``"local"`` (qdrant-client's local mode) or ``"server"``.
        keeps_payload_indexes: ``create_payload_index`` builds an index (local mode accepts the call, keeps nothing).
        builds_index_on_request: the store has ``build_index(collection, show_progress=...)`` and an
            ingestion should call it when done (a server indexes in the background, local mode never).
        unverified_settings: :class:`qdrant_tools.spec.CollectionSpec` fields the store does not keep or
            report, so validation lists them as unverified instead of comparing them.

    Example:
        >>> SERVER.kind, SERVER.unverified_settings
        ('server', ())
    """

    kind: StoreKind
    keeps_payload_indexes: bool
    builds_index_on_request: bool
    unverified_settings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("keeps_payload_indexes", "builds_index_on_request"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")


EDGE = StoreTraits(
    "edge", keeps_payload_indexes=True, builds_index_on_request=True, unverified_settings=CLUSTER_SETTINGS
)
LOCAL = StoreTraits(
    "local", keeps_payload_indexes=False, builds_index_on_request=False, unverified_settings=LOCAL_MODE_UNVERIFIED
)
SERVER = StoreTraits("server", keeps_payload_indexes=True, builds_index_on_request=False)


@runtime_checkable
class Store(Protocol):
    """A Qdrant store as posfair uses it: the qdrant-client methods it calls, and the declared traits.

    :class:`qdrant_tools.store.EdgeStore` and :class:`qdrant_tools.retry.RetryingClient` declare the
    traits; a ``QdrantClient`` does not (it is qdrant-client's class), and :func:`store_traits`
    answers for it. Read traits with :func:`store_traits`, which accepts all of them.

    Example:
        >>> from qdrant_tools.store import open_store
        >>> with open_store(":memory:") as store:
        ...     isinstance(store, Store)
        True
    """

    @property
    def kind(self) -> StoreKind: ...
    @property
    def keeps_payload_indexes(self) -> bool: ...
    @property
    def builds_index_on_request(self) -> bool: ...
    @property
    def unverified_settings(self) -> tuple[str, ...]: ...

    def collection_exists(self, collection_name: str, **kwargs: Any) -> bool: ...
    def get_collections(self, **kwargs: Any) -> Any: ...
    def get_collection(self, collection_name: str, **kwargs: Any) -> Any: ...
    def create_collection(self, collection_name: str, **kwargs: Any) -> bool: ...
    def update_collection(self, collection_name: str, **kwargs: Any) -> bool: ...
    def create_vector_name(self, collection_name: str, *args: Any, **kwargs: Any) -> Any: ...
    def create_payload_index(self, collection_name: str, field_name: str, *args: Any, **kwargs: Any) -> Any: ...
    def upsert(self, collection_name: str, points: Any, **kwargs: Any) -> Any: ...
    def scroll(self, collection_name: str, **kwargs: Any) -> Any: ...
    def count(self, collection_name: str, **kwargs: Any) -> Any: ...
    def retrieve(self, collection_name: str, ids: Any, **kwargs: Any) -> Any: ...
    def delete(self, collection_name: str, points_selector: Any, **kwargs: Any) -> Any: ...
    def query_points(self, collection_name: str, query: Any = None, **kwargs: Any) -> Any: ...
    def close(self, **kwargs: Any) -> None: ...


#: What a function takes where a store is passed: a :class:`Store` (``EdgeStore``, ``RetryingClient``) or a
#: ``QdrantClient`` (local mode or server), which declares no traits (:func:`store_traits` answers for it).
StoreLike: TypeAlias = "Store | QdrantClient"

#: The awaitable face of a store: an ``AsyncQdrantClient``, or an :class:`~qdrant_tools.store.async_store.AsyncStore`
#: around a synchronous one.
AsyncStoreLike: TypeAlias = "AsyncQdrantClient | AsyncStore"


def client_traits(init_options: Mapping[str, Any]) -> StoreTraits:
    """The traits of a ``QdrantClient`` built with ``init_options`` (its public ``init_options``).

    qdrant-client's rule (``QdrantClient.__init__``): ``location=":memory:"`` or a ``path`` is local
    mode; ``url``, ``host``, another ``location`` or nothing (localhost) is a server.

    Example:
        >>> client_traits({"path": "/tmp/q"}).kind, client_traits({"url": "http://q:6333"}).kind
        ('local', 'server')
    """
    local = init_options.get("location") == ":memory:" or init_options.get("path") is not None
    return LOCAL if local else SERVER


def store_traits(store: Any) -> StoreTraits:
    """The traits of ``store``: declared by it, or, for a ``QdrantClient``, read from how it was opened.

    Args:
        store: an :class:`EdgeStore`, a ``QdrantClient`` (local mode or server), a
            :class:`qdrant_tools.retry.RetryingClient` around either, or any object declaring
            :class:`Store`'s traits. One declaring no ``kind`` is taken for a server.

    Returns:
        The store's :class:`StoreTraits`.

    Raises:
        TypeError: the store declares a ``kind`` but a trait of the wrong type.

    Example:
        >>> from qdrant_client import QdrantClient
        >>> t = store_traits(QdrantClient(path=__import__("tempfile").mkdtemp()))
        >>> t.kind, t.keeps_payload_indexes
        ('local', False)
    """
    from qdrant_client import QdrantClient

    if isinstance(store, QdrantClient):
        return client_traits(store.init_options)
    kind = getattr(store, "kind", None)
    if not isinstance(kind, str) or kind not in KINDS:
        return SERVER  # declares nothing (e.g. a Mock(wraps=...)): a server's behaviour, the conservative one
    return StoreTraits(
        kind,  # type: ignore[arg-type]
        keeps_payload_indexes=store.keeps_payload_indexes,
        builds_index_on_request=store.builds_index_on_request,
        unverified_settings=tuple(getattr(store, "unverified_settings", ())),
    )


__all__ = [
    "CLUSTER_SETTINGS",
    "EDGE",
    "KINDS",
    "LOCAL",
    "LOCAL_MODE_UNVERIFIED",
    "SERVER",
    "AsyncStoreLike",
    "Store",
    "StoreKind",
    "StoreLike",
    "StoreTraits",
    "client_traits",
    "store_traits",
]
