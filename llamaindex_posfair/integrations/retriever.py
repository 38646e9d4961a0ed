"""``PosFairRetriever``: a LlamaIndex retriever over a collection written by ``posfair ingest``.

It encodes the query with the encoder that wrote the searched vector (checked against the fingerprint the points
record) and answers in one ``query_points`` call through :func:`qdrant_tools.search.search`, with the stored nodes
scored by their relevance in [0, 1]; the path of a query: docs/architecture.md (``posfair query``).

Example:
    >>> from llama_index.core.query_engine import RetrieverQueryEngine
    >>> from llamaindex_posfair.integrations.retriever import PosFairRetriever
    >>> retriever = PosFairRetriever.from_path(".posfair/qdrant", "demo", similarity_top_k=5)  # doctest: +SKIP
    >>> nodes = retriever.retrieve("How far can the water level change in the Bay of Fundy?")  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever, llm=my_llm)               # doctest: +SKIP
    >>> retriever.close()                                                            # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from llamaindex_posfair.encoders.spec import EncoderSpec
from llamaindex_posfair.integrations.filters import to_qdrant_filter
from llamaindex_posfair.integrations.gate import UNRECORDED_CALIBRATION, FingerprintMismatchError, Gate
from llamaindex_posfair.integrations.nodes import hit_to_node
from llamaindex_posfair.integrations.recipe import Recipe, read_recipe, recorded_search
from qdrant_tools.search import CollectionVectors, Hit, SearchSettings, asearch, collection_vectors, search
from qdrant_tools.store.async_store import AsyncStore

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import AsyncStoreLike, StoreLike

__all__ = ["FingerprintMismatchError", "PosFairRetriever", "RemoteQueryEncoder"]


class RemoteQueryEncoder:
    """Query encoding by a ``posfair serve`` server (what :class:`PosFairRetriever` needs of an encoder)."""

    def __init__(self, site: Any) -> None:
        self.site = site
        self.spec = site.spec
        self.model_id = site.spec.model

    def encode_queries(self, texts: list[str]) -> Any:
        return self.site.embed(list(texts), "query")[0]


def remote_query_encoder(endpoint: str, spec: EncoderSpec | None, timeout_s: float) -> RemoteQueryEncoder:
    """The server's encoder, checked against ``spec`` (if given; else ``ServeMismatchError`` names both)."""
    from llamaindex_posfair.integrations.encoder_site import EndpointEncoder
    from llamaindex_posfair.serve.client import ServeClient, ServeMismatchError

    if spec is None:
        card = ServeClient(endpoint, timeout_s=timeout_s).models().card("embedding")
        if card is None or card.spec is None:
            raise ServeMismatchError(f"posfair serve at {endpoint} serves no text encoder")
        spec = EncoderSpec.model_validate(card.spec)
    return RemoteQueryEncoder(EndpointEncoder.connect(endpoint, spec, timeout_s))


def _settings(recipe: Recipe | None, settings: SearchSettings | None, top_k: int) -> SearchSettings:
    """The search settings: ``settings`` if given, else the recipe's default search (with evidence)."""
    if settings is None:
        settings = recorded_search(recipe).overridden(evidence=True)
    return settings.overridden(limit=top_k)


#: Nodes returned when neither ``similarity_top_k`` nor ``settings`` says (``SearchSettings().limit``).
DEFAULT_SIMILARITY_TOP_K = 5


def _similarity_top_k(similarity_top_k: int | None, settings: SearchSettings | None) -> int:
    """The number of nodes to return.

    Raises:
        ValueError: not a positive integer.
    """
    if similarity_top_k is None:
        return settings.limit if settings is not None else DEFAULT_SIMILARITY_TOP_K
    if isinstance(similarity_top_k, bool) or not isinstance(similarity_top_k, int) or similarity_top_k < 1:
        raise ValueError(f"similarity_top_k must be a positive integer, got {similarity_top_k!r}; e.g. 5")
    return similarity_top_k


class PosFairRetriever(BaseRetriever):
    """Retrieve nodes from a posfair collection with its default search (node vector, best sub-chunk, BM25).

    A thin shell over the search :class:`~llamaindex_posfair.PosFairVectorStore` runs: the same
    request, the same nodes, the same ``MetadataFilters``.

    Args:
        client: a ``QdrantClient`` or the embedded store (the caller closes it; see :meth:`from_path`).
        collection: the collection written by ``posfair ingest`` or ``PosFairVectorStore``.
        spec: the encoder (an ``EncoderSpec``; default: the collection's recipe, or for a collection written
            before recipes the bundled MiniLM, calibrated as then: ``UNRECORDED_CALIBRATION``) — or pass ``encoder``. With a recipe, the fields
            ``spec`` sets explicitly must agree with it.
        encoder: an already loaded ``PosFairEncoder`` to reuse.
        endpoint: URL of a ``posfair serve`` server that encodes the queries (nothing is loaded here);
            its fingerprint must be the collection's (and ``spec``'s, when given).
        endpoint_timeout_s: seconds per HTTP call to ``endpoint``.
        similarity_top_k: nodes returned (LlamaIndex's name, as in ``index.as_retriever(similarity_top_k=...)``);
            ``None``: the ``limit`` of ``settings`` when given, else 5.
        filters: LlamaIndex ``MetadataFilters`` applied to every query (every arm, BM25 included).
        settings: the rest of :class:`qdrant_tools.search.SearchSettings` (vector, prefetch limit, node weight,
            evidence; default: the recipe's search, with ``evidence``); ``similarity_top_k`` overrides its ``limit``.
        aclient: an ``AsyncQdrantClient`` of the same server for :meth:`aretrieve` (default: the client's
            :class:`~qdrant_tools.store.async_store.AsyncStore`, which batches concurrent queries).
        callback_manager: LlamaIndex callbacks.

    Raises:
        LookupError: the collection does not exist.
        FingerprintMismatchError: the encoder did not write the searched vector.
        CollectionMismatchError: ``spec`` contradicts the collection's recipe.
        UnsupportedFilterError: a filter the translation cannot express.
        ValueError: ``similarity_top_k`` is not a positive integer.

    Example:
        >>> from llamaindex_posfair import PosFairRetriever
        >>> with PosFairRetriever.from_path(".posfair/qdrant", "demo", similarity_top_k=5) as r:  # doctest: +SKIP
        ...     nodes = r.retrieve("How far can the water level change in the Bay of Fundy?")
    """

    def __init__(
        self,
        client: StoreLike,
        collection: str,
        *,
        spec: EncoderSpec | None = None,
        encoder: Any = None,
        endpoint: str | None = None,
        endpoint_timeout_s: float = 60.0,
        similarity_top_k: int | None = None,
        filters: MetadataFilters | None = None,
        settings: SearchSettings | None = None,
        aclient: AsyncStoreLike | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        similarity_top_k = _similarity_top_k(similarity_top_k, settings)
        super().__init__(callback_manager=callback_manager)
        self._client = client
        self._aclient = aclient if aclient is not None else AsyncStore(client)
        self._owns_client = False
        self.collection = collection
        self.vectors: CollectionVectors = collection_vectors(client, collection)
        self.recipe: Recipe | None = read_recipe(client, collection)
        self.settings = _settings(self.recipe, settings, similarity_top_k)
        self.filter = to_qdrant_filter(filters)
        self.vector = self.vectors.node_vector(
            self.recipe.node_vector(self.settings.vector) if self.recipe else self.settings.vector
        )
        gate = Gate.of(collection, self.recipe, self.vector, client)
        if self.recipe is not None:  # the fields spec sets explicitly over the recipe's
            spec = gate.spec({k: getattr(spec, k) for k in spec.model_fields_set} if spec is not None else {})
        if endpoint is not None:
            if encoder is not None:
                raise ValueError("encoder= runs the model here and endpoint= on a server; pass one of them")
            remote = remote_query_encoder(endpoint, spec, endpoint_timeout_s)
            self.encoder = gate.check_reader(remote, who=f"posfair serve at {endpoint} ({remote.model_id})")
        else:
            loaded = (
                encoder if encoder is not None else (spec or EncoderSpec(calibration=UNRECORDED_CALIBRATION)).load()
            )
            self.encoder = gate.check_reader(loaded, who=f"the query encoder ({loaded.model_id})")
        self._bm25 = self.recipe.sparse_encoder() if self.recipe else None

    @classmethod
    def from_path(cls, path: str, collection: str, **kwargs: Any) -> PosFairRetriever:
        """Open storage with :func:`qdrant_tools.store.open_store` (a folder: the embedded store; ``url=``
        in ``kwargs``: a server) and retrieve from it; :meth:`close` closes the storage too. An embedded
        store is opened with ``warm=True``: the collection's files are read into the page cache when it is
        first used, so the first queries do not wait on the disk.

        ``kwargs``: the constructor's keywords (``similarity_top_k``, ``filters``, ``spec``, ``endpoint``, ...).
        """
        from qdrant_tools.store import open_store

        url = kwargs.pop("url", None)
        client = open_store(None if url else path, url=url, must_exist=not url, warm=True)
        try:
            retriever = cls(client, collection, **kwargs)
        except BaseException:
            client.close()
            raise
        retriever._owns_client = True
        return retriever

    def close(self) -> None:
        """Close the storage if this retriever opened it (:meth:`from_path`)."""
        if self._owns_client:
            self._client.close()
            self._owns_client = False

    def __enter__(self) -> PosFairRetriever:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _query(self, query: str) -> tuple[Any, Any]:
        """The query's embedding and BM25 vector.

        Raises:
            ValueError: an empty query.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r}")
        q = self.encoder.encode_queries([query])[0]
        return q, self._bm25.embed_query(query) if self._bm25 is not None else None

    def search(self, query: str) -> list[Hit]:
        """The raw hits for ``query`` (payloads, scores, evidence spans).

        Raises:
            ValueError: an empty query.
        """
        q, sparse = self._query(query)
        return search(self._client, self.collection, q, self.settings, **self._options(sparse))

    async def asearch(self, query: str) -> list[Hit]:
        """:meth:`search` through the async client; the query is encoded in a worker thread."""
        q, sparse = await asyncio.to_thread(self._query, query)
        return await asearch(self._aclient, self.collection, q, self.settings, **self._options(sparse))

    def _options(self, sparse: Any) -> dict[str, Any]:
        """The search keywords of every query: the collection's vectors, the BM25 query and the filter."""
        return {"vectors": self.vectors, "sparse_query": sparse, "query_filter": self.filter}

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [hit_to_node(h) for h in self.search(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [hit_to_node(h) for h in await self.asearch(query_bundle.query_str)]
