"""``PosFairVectorStore``: a LlamaIndex vector store over a Qdrant collection in posfair's layout.

Swap it in for LlamaIndex's ``QdrantVectorStore`` and an app gets position-fair
retrieval: each node is stored as one Qdrant point with its node vector (the index's
embed model), the vectors of its sentence-aligned sub-chunks, the sub-chunks fused with
the node vector, and a BM25 sparse vector, all computed here; a query is the default
hybrid search of ``posfair query`` (:func:`qdrant_tools.search.search`) in one
``query_points`` call, with the evidence span of each hit. ``MetadataFilters`` apply to
every arm of that query, BM25 included (:mod:`llamaindex_posfair.integrations.filters`).

The collection records its layout (a :class:`~llamaindex_posfair.integrations.recipe.Recipe`)
when it is created, with the precision its vectors are computed in; a store whose embed model
contradicts it is refused, naming both. An embed model in another precision alone queries the
collection (one notice: rankings agree) but does not add nodes to it.

Query modes: ``DEFAULT``, ``HYBRID`` and ``SEMANTIC_HYBRID`` run the default search
(dense ranking fused with BM25 as the layout's search says); ``SPARSE`` and
``TEXT_SEARCH`` rank by BM25 alone; other modes raise. ``alpha``, ``sparse_top_k``
and ``hybrid_top_k`` are not used: the layout's search fixes the fusion.

Example:
    >>> from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
    >>> from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
    >>> embed = PosFairEmbedding()                                                    # doctest: +SKIP
    >>> store = PosFairVectorStore("docs", path="./.posfair/qdrant", embed_model=embed)  # doctest: +SKIP
    >>> index = VectorStoreIndex.from_documents(
    ...     SimpleDirectoryReader("examples/data").load_data(),
    ...     storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed)  # doctest: +SKIP
    >>> nodes = index.as_retriever(similarity_top_k=3).retrieve("Bay of Fundy tides")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from qdrant_client import models

from llamaindex_posfair.encoders.precision import notice_precision_difference, precision_name, same_precision
from llamaindex_posfair.encoders.spec import EncoderSpec
from llamaindex_posfair.integrations.filters import to_qdrant_filter
from llamaindex_posfair.integrations.nodes import check_embeddings, hit_to_node, planned_nodes, without_empty
from llamaindex_posfair.integrations.recipe import RECORDED_FIELDS, Recipe, read_recipe
from qdrant_tools.compat import check_same_encoder
from qdrant_tools.encoding import ChunkEncoder, document_token_counter
from qdrant_tools.search import (
    CollectionVectors,
    Hit,
    SearchSettings,
    acollection_vectors,
    asearch,
    collection_vectors,
    hits_of,
    search,
    sparse_request,
)
from qdrant_tools.sparse import Bm25Sparse
from qdrant_tools.spec import CollectionMismatchError
from qdrant_tools.writer import QdrantWriter, spec_for_vectors

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import AsyncStoreLike, StoreLike

__all__ = ["PosFairVectorStore"]

_DENSE_MODES = (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.SEMANTIC_HYBRID)
_SPARSE_MODES = (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH)
_SCROLL_PAGE = 256


class PosFairVectorStore(BasePydanticVectorStore):
    """Position-fair LlamaIndex vector store over Qdrant (embedded Qdrant Edge, local mode or a server).

    Args:
        collection_name: the Qdrant collection (created on the first ``add``).
        client: a ``QdrantClient`` or the embedded store (:func:`qdrant_tools.store.open_store`); the caller
            closes it. Or pass ``path`` / ``url``.
        aclient: an ``AsyncQdrantClient`` of the same server, for the async methods (with ``url`` one is made).
        path: an embedded storage folder (opened here with ``warm=True``: an existing collection's files are
            read into the page cache when it is first used; :meth:`close` closes it).
        url: a Qdrant server (API key from ``api_key`` or ``$QDRANT_API_KEY``).
        embed_model: the index's :class:`~llamaindex_posfair.PosFairEmbedding`; its encoder embeds the
            sub-chunks (shared, not loaded twice). Default: the encoder the layout records, loaded on first add.
        layout: the layout of a new collection (default: the shipped one for the embed model's encoder,
            :meth:`Recipe.for_encoder`); an existing collection's own layout always wins.
        batch_size: nodes encoded and upserted together.
        evidence_hits: the best hits of each query that carry their evidence span (reading a hit's
            sub-chunk vectors costs more than the query for deep retrievals).
        search_overrides: :class:`~qdrant_tools.search.SearchSettings` fields set over the collection's
            default search for every query of this store, e.g. ``{"fusion": "dbsf"}`` (docs/vector-store.md);
            ``similarity_top_k`` and the evidence settings stay the query's.

    Raises:
        CollectionMismatchError: the embed model is not the encoder the collection was written with.
        ValueError: the collection exists but was not written by posfair (adopt it with
            ``posfair storage migrate --from-llamaindex``), or none or several of client / path / url.
    """

    stores_text: bool = True
    flat_metadata: bool = False
    collection_name: str = Field(description="The Qdrant collection.")
    batch_size: int = Field(default=256, gt=0, description="Nodes encoded and upserted together.")
    evidence_hits: int = Field(
        default=10, ge=0, description="The best hits of a query that get their evidence span (0: none)."
    )
    search_overrides: dict[str, Any] = Field(
        default_factory=dict, description="SearchSettings fields set over the collection's default search."
    )

    _client: StoreLike = PrivateAttr()
    _aclient: AsyncStoreLike | None = PrivateAttr(default=None)
    _owns_client: bool = PrivateAttr(default=False)
    _recipe: Recipe = PrivateAttr()
    _embed: Any = PrivateAttr(default=None)
    _encoder: Any = PrivateAttr(default=None)
    _own: Any = PrivateAttr(default=None)
    _trusted: bool = PrivateAttr(default=False)
    _writer: Any = PrivateAttr(default=None)
    _ensured: Any = PrivateAttr(default=None)
    _empty_skipped: int = PrivateAttr(default=0)
    _vectors: CollectionVectors | None = PrivateAttr(default=None)
    _bm25: Bm25Sparse | None = PrivateAttr(default=None)
    _search: SearchSettings = PrivateAttr()
    _write_lock: Any = PrivateAttr(default_factory=threading.Lock)

    def __init__(
        self,
        collection_name: str,
        client: StoreLike | None = None,
        aclient: AsyncStoreLike | None = None,
        *,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        embed_model: Any = None,
        layout: Recipe | None = None,
        batch_size: int = 256,
        evidence_hits: int = 10,
        search_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            collection_name=collection_name,
            batch_size=batch_size,
            evidence_hits=evidence_hits,
            search_overrides=dict(search_overrides or {}),
        )
        self._client, self._owns_client = _open(client, path, url, api_key)
        self._aclient = _async_face(self._client, aclient, url, api_key)
        self._embed = embed_model
        try:
            self._recipe = self._read_or_new_recipe(layout)
            self._bm25 = self._recipe.sparse_encoder()
            self._check_embed_model()
            self._search = self._recipe.search.overridden(**self.search_overrides)
        except BaseException:
            self.close()
            raise

    @classmethod
    def class_name(cls) -> str:
        return "PosFairVectorStore"

    @property
    def client(self) -> StoreLike:
        return self._client

    @property
    def aclient(self) -> AsyncStoreLike | None:
        return self._aclient

    @property
    def layout(self) -> Recipe:
        """The collection's layout (its recipe): encoders, node and sub-chunk sizes, BM25, default search."""
        return self._recipe

    def close(self) -> None:
        """Close the storage if this store opened it (``path=`` / ``url=``)."""
        if self._owns_client:
            self._client.close()
            self._owns_client = False

    # ------------------------------------------------------------------ layout
    def _read_or_new_recipe(self, layout: Recipe | None) -> Recipe:
        if self._client.collection_exists(self.collection_name):
            recipe = read_recipe(self._client, self.collection_name)
            if recipe is None:
                raise ValueError(
                    f"collection {self.collection_name!r} was not written by posfair (it records no layout); adopt "
                    f"a LlamaIndex collection with `posfair storage migrate --from-llamaindex {self.collection_name} "
                    "--to NEW`, or choose a new collection name"
                )
            return recipe
        if layout is not None:
            return layout
        spec = self._embed.spec if _is_posfair(self._embed) else EncoderSpec(calibration=None)
        return Recipe.for_encoder(spec)

    def _check_embed_model(self) -> None:
        """The embed model must be the encoder that writes (and queries) the searched vector: a
        ``PosFairEmbedding`` by its spec, any other LlamaIndex embedding by its vector of one text
        (:func:`qdrant_tools.compat.check_same_encoder`). Without an embed model, the embeddings the
        index sends are checked on the first query and on every ``add`` (:meth:`_check_given`)."""
        if self._embed is None:
            return
        if not _is_posfair(self._embed):
            expected = self._own_encoder().encode_documents([PROBE_TEXT])[0]
            given = self._embed.get_text_embedding(PROBE_TEXT)
            check_same_encoder(
                self.collection_name, self._encoder_name(), _model_name(self._embed), expected, given, "one text"
            )
            self._trusted = True
            return
        self._trusted = True
        spec = self._embed.spec.resolved()
        given = {f: getattr(spec, f) for f in RECORDED_FIELDS if f != "weights"}
        try:
            self._recipe.encoder_spec(given=given, query=True)
        except CollectionMismatchError as exc:
            raise CollectionMismatchError(
                f"embed model {spec.model} does not match collection {self.collection_name!r}: {exc}"
            ) from None
        stored = self._recipe.encoder_spec()
        if stored.weights and spec.weights and stored.weights != spec.weights:
            raise CollectionMismatchError(
                f"collection {self.collection_name!r} was written by {stored.model} with weights {stored.weights}, "
                f"but the embed model's weights are {spec.weights} (another checkpoint); use the collection's "
                "model files, or a new collection"
            )
        if not same_precision(stored.dtype, spec.dtype):
            notice_precision_difference(f"collection {self.collection_name!r}", stored.dtype, spec.dtype)

    def _encoder_name(self) -> str:
        return str(self._recipe.encoder_spec().model)

    def _own_encoder(self) -> Any:
        """The collection's encoder of the searched vector, loaded here once (a ``PosFairEmbedding`` embed
        model's own encoder when it is one)."""
        if self._own is None:
            encoder = self._embed.encoder if _is_posfair(self._embed) else self._recipe.encoder_spec().load()
            self._own = self._recipe.bind(encoder)[self._node_vector()]
        return self._own

    def _check_given(self, texts: Sequence[str], embedding: Any, what: str, query: bool = False) -> None:
        """Unless the embed model is known to be the collection's encoder, check one embedding the index sent
        against the collection encoder's vector of the same text (raises before anything is written)."""
        if self._trusted or embedding is None or not texts or not texts[0].strip():
            return
        own = self._own_encoder()
        expected = (own.encode_queries if query else own.encode_documents)([texts[0]])[0]
        check_same_encoder(
            self.collection_name, self._encoder_name(), "the index's embed model", expected, embedding, what
        )
        if query:
            self._trusted = True

    def _check_nodes(self, nodes: Sequence[BaseNode]) -> None:
        """The first node with an embedding is the collection encoder's vector of its text (see :meth:`_check_given`)."""
        node = next((n for n in nodes if n.embedding is not None), None)
        if node is None:
            return
        try:  # LlamaIndex embeds a node's text with its metadata; an app may embed the text alone
            self._check_given(
                [node.get_content(metadata_mode=MetadataMode.EMBED)], node.embedding, f"node {node.node_id!r}"
            )
        except CollectionMismatchError:
            self._check_given(
                [node.get_content(metadata_mode=MetadataMode.NONE)], node.embedding, f"node {node.node_id!r}"
            )

    def _check_write_precision(self) -> None:
        """Nodes are added in the collection's recorded precision (queries may use another one)."""
        stored, spec = self._recipe.encoder_spec(), self._embed.spec.resolved()
        if not same_precision(stored.dtype, spec.dtype):
            want = precision_name(stored.dtype)
            raise CollectionMismatchError(
                f"collection {self.collection_name!r} was written in {want}, but the embed model computes "
                f"{precision_name(spec.dtype)}; adding nodes would mix two precisions in one collection. Build the "
                f"embed model with dtype={want!r} to add nodes (queries in either precision are accepted)"
            )

    def _node_vector(self) -> str:
        return self._recipe.node_vector()

    def _current_vectors(self) -> CollectionVectors:
        if self._vectors is None:
            self._vectors = collection_vectors(self._client, self.collection_name)
        return self._vectors

    async def _acurrent_vectors(self) -> CollectionVectors:
        if self._vectors is None:
            self._vectors = await acollection_vectors(self._aclient, self.collection_name)
        return self._vectors

    # ------------------------------------------------------------------ writing
    def _chunk_encoder(self) -> ChunkEncoder:
        """The encoders of the layout, with their point encoding and writer; the collection is checked
        (a mismatch refused) but created only by :meth:`_ready_writer`, after the nodes are validated."""
        if self._writer is None:
            if _is_posfair(self._embed):
                self._check_write_precision()
            encoder = self._embed.encoder if _is_posfair(self._embed) else self._recipe.encoder_spec().load()
            vectors = self._recipe.bind(encoder)
            encoding = self._recipe.ingest_settings(show_progress=False).point_encoding(vectors)
            metadata = {**(self._recipe.metadata()), **encoding.metadata()}
            spec = spec_for_vectors(
                self.collection_name, encoding.vector_configs(), None, metadata, sparse=encoding.sparse_configs()
            )
            writer = QdrantWriter(self._client, spec, descriptions=encoding.descriptions)
            writer.check()
            self._encoder, self._writer = ChunkEncoder(vectors, encoding), writer
        return self._encoder

    def _ready_writer(self) -> QdrantWriter:
        """The writer, its collection created (with the layout) if missing."""
        if self._ensured is not self._writer:
            self._writer.ensure()
            self._ensured = self._writer
        return self._writer

    def _plan(self, nodes: Sequence[BaseNode]) -> tuple[list[BaseNode], list[Any]]:
        """Every node validated and planned before anything is written: the nodes with text, and their points.

        Raises:
            ValueError: metadata a payload cannot hold, or an embedding of another size than the node vector.
        """
        kept, empty = without_empty(nodes)
        enc = self._chunk_encoder()
        node_vector = self._node_vector()
        size = next(v.size for v in self._writer.spec.vectors if v.name == node_vector)
        check_embeddings(kept, size, node_vector)
        self._check_nodes(kept)
        chunks = planned_nodes(kept, enc.encoding, enc.spans_fn, document_token_counter(enc.first))
        self._empty_skipped += len(empty)
        return kept, chunks

    def _encode(self, nodes: Sequence[BaseNode], chunks: Sequence[Any]) -> Any:
        """One :class:`~qdrant_tools.writer.PointBatch` of ``nodes`` (their own embeddings as node vectors)."""
        given = {}
        if all(n.embedding is not None for n in nodes):
            given[self._node_vector()] = np.asarray([n.embedding for n in nodes], dtype=np.float32)
        return self._encoder.encode(list(chunks), given=given)

    def _batches(self, kept: Sequence[BaseNode], chunks: Sequence[Any]) -> Any:
        """``(nodes, their planned points)`` of each batch of :attr:`batch_size` nodes."""
        for start in range(0, len(kept), self.batch_size):
            yield kept[start : start + self.batch_size], chunks[start : start + self.batch_size]

    @property
    def empty_nodes_skipped(self) -> int:
        """How many nodes without text (empty or whitespace only) :meth:`add` has left out so far."""
        return self._empty_skipped

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store ``nodes`` (their ``embedding`` is the node vector; sub-chunks and BM25 are computed here).

        Every node is validated before any is written, so a bad node writes nothing. Nodes without text
        (an empty file's) are left out with one warning and counted (:attr:`empty_nodes_skipped`).

        Returns:
            The ids of the nodes stored, in order.

        Raises:
            ValueError: metadata a payload cannot hold (not JSON: a date is stored as an ISO string),
                or an embedding of another size than the collection's node vector.
        """
        with self._write_lock:
            kept, chunks = self._plan(nodes)
            if kept:
                writer = self._ready_writer()
                for batch_nodes, batch_chunks in self._batches(kept, chunks):
                    writer.upsert(self._encode(batch_nodes, batch_chunks))
            self._vectors = None
        return [n.node_id for n in kept]

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """:meth:`add` with the upserts through the async client (retried as the writer retries); the
        validation and the encoding run in a worker thread."""
        kept, chunks = await asyncio.to_thread(self._plan, nodes)
        if kept:
            writer = await asyncio.to_thread(self._ready_writer)
            for batch_nodes, batch_chunks in self._batches(kept, chunks):
                batch = await asyncio.to_thread(self._encode, batch_nodes, batch_chunks)
                await writer.aupsert(self._aclient, batch)
        self._vectors = None
        return [n.node_id for n in kept]

    # ------------------------------------------------------------------ querying
    def _sparse_query(self, text: str | None) -> Any:
        bm25 = self._bm25
        return bm25.embed_query(text) if bm25 is not None and text and text.strip() else None

    def _plan_query(self, query: VectorStoreQuery) -> tuple[str, dict[str, Any]]:
        """``("dense", search kwargs)`` or ``("sparse", query_points kwargs)`` of a LlamaIndex query.

        Raises:
            ValueError: an unsupported mode, or a query without the embedding / text its mode needs.
        """
        flt = to_qdrant_filter(query.filters, doc_ids=query.doc_ids, node_ids=query.node_ids)
        top_k = query.similarity_top_k
        if query.mode in _SPARSE_MODES:
            sparse = self._sparse_query(query.query_str)
            if sparse is None:
                raise ValueError(f"query mode {query.mode.value!r} ranks by BM25: give query_str (a non-empty query)")
            return "sparse", {"sparse_query": sparse, "limit": top_k, "query_filter": flt}
        if query.mode not in _DENSE_MODES:
            raise ValueError(
                f"query mode {query.mode.value!r} is not supported by PosFairVectorStore; use "
                f"{[m.value for m in (*_DENSE_MODES, *_SPARSE_MODES)]}"
            )
        if query.query_embedding is None:
            raise ValueError("PosFairVectorStore needs query.query_embedding: give the index a PosFairEmbedding")
        self._check_given([query.query_str or ""], query.query_embedding, "the query", query=True)
        settings = self._search.overridden(evidence=True, limit=top_k, evidence_limit=self.evidence_hits)
        return "dense", {
            "query_vector": query.query_embedding,
            "settings": settings,
            "query_filter": flt,
            "sparse_query": self._sparse_query(query.query_str),
        }

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` best nodes for ``query`` (see the module docstring for the modes).

        Raises:
            UnsupportedFilterError: a filter operator the translation does not know.
            ValueError: see :meth:`_plan_query`.
        """
        if self._vectors is None and not self._client.collection_exists(self.collection_name):
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        kind, args = self._plan_query(query)
        vectors = self._current_vectors()
        if kind == "sparse":
            request = sparse_request(args["sparse_query"], vectors, args["limit"], args["query_filter"])
            points = self._client.query_points(self.collection_name, **request, with_payload=True).points
            hits = hits_of(points)
        else:
            hits = search(self._client, self.collection_name, vectors=vectors, **args)
        return _result(hits)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """:meth:`query` through the async client, without blocking the loop: an ``AsyncQdrantClient`` for a
        server; for the embedded store, concurrent queries are sent together as one batch
        (:class:`qdrant_tools.store.async_store.AsyncStore`)."""
        if self._vectors is None and not await self._aclient.collection_exists(self.collection_name):
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        kind, args = self._plan_query(query)
        vectors = await self._acurrent_vectors()
        if kind == "sparse":
            request = sparse_request(args["sparse_query"], vectors, args["limit"], args["query_filter"])
            points = (await self._aclient.query_points(self.collection_name, **request, with_payload=True)).points
            return _result(hits_of(points))
        return _result(await asearch(self._aclient, self.collection_name, vectors=vectors, **args))

    # ------------------------------------------------------------------ reading and deleting
    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **kwargs: Any
    ) -> list[BaseNode]:
        """The stored nodes with these ids and/or matching ``filters`` (all nodes when neither is given)."""
        if not self._client.collection_exists(self.collection_name):
            return []
        flt = to_qdrant_filter(filters, node_ids=node_ids)
        return [hit_to_node(r).node for r in self._scroll(flt)]

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **kwargs: Any
    ) -> list[BaseNode]:
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

    def _scroll(self, flt: models.Filter | None) -> list[Any]:
        out, offset = [], None
        while True:
            points, offset = self._client.scroll(
                self.collection_name, scroll_filter=flt, limit=_SCROLL_PAGE, offset=offset, with_payload=True
            )
            out.extend(points)
            if offset is None:
                return out

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the document ``ref_doc_id`` (LlamaIndex's ``index.delete_ref_doc``)."""
        self._delete(to_qdrant_filter(doc_ids=[ref_doc_id]))

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await self._adelete(to_qdrant_filter(doc_ids=[ref_doc_id]))

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Delete the nodes with these ids and/or matching ``filters``.

        Raises:
            ValueError: neither is given (:meth:`clear` deletes everything).
        """
        self._delete(_selection(node_ids, filters))

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        await self._adelete(_selection(node_ids, filters))

    def _delete(self, flt: models.Filter) -> None:
        if self._client.collection_exists(self.collection_name):
            with self._write_lock:
                selector = models.FilterSelector(filter=flt)
                self._client.delete(self.collection_name, points_selector=selector, wait=True)
                self._vectors = None

    async def _adelete(self, flt: models.Filter) -> None:
        if await self._aclient.collection_exists(self.collection_name):
            selector = models.FilterSelector(filter=flt)
            await self._aclient.delete(self.collection_name, points_selector=selector, wait=True)
            self._vectors = None

    def clear(self) -> None:
        """Delete the collection (its layout is kept by this store: the next ``add`` recreates it)."""
        with self._write_lock:
            if self._client.collection_exists(self.collection_name):
                self._client.delete_collection(self.collection_name)
            self._writer, self._vectors = None, None

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)


#: The text a non-posfair embed model and the collection's encoder both embed to show they are one model.
PROBE_TEXT = "The tide rises twice a day; a lighthouse keeper logs its height at dawn and at dusk."


def _is_posfair(embed: Any) -> bool:
    """Whether ``embed`` is a ``PosFairEmbedding`` (it carries the spec of its encoder)."""
    return embed is not None and isinstance(getattr(embed, "spec", None), EncoderSpec)


def _model_name(embed: Any) -> str:
    name = getattr(embed, "model_name", None)
    return f"{type(embed).__name__}({name!r})" if name else type(embed).__name__


def _selection(node_ids: list[str] | None, filters: MetadataFilters | None) -> models.Filter:
    flt = to_qdrant_filter(filters, node_ids=node_ids)
    if flt is None:
        raise ValueError("delete_nodes needs node_ids or filters; clear() deletes every node")
    return flt


def _result(hits: Sequence[Hit]) -> VectorStoreQueryResult:
    nodes = [hit_to_node(h) for h in hits]
    return VectorStoreQueryResult(
        nodes=[n.node for n in nodes], similarities=[h.score for h in hits], ids=[h.id for h in hits]
    )


def _open(client: StoreLike | None, path: str | None, url: str | None, api_key: str | None) -> tuple[StoreLike, bool]:
    """The store's client and whether the store opened it."""
    given = sum(x is not None for x in (client, path, url))
    if given != 1:
        raise ValueError("PosFairVectorStore needs exactly one of client=, path= (embedded folder) and url= (server)")
    if client is not None:
        return client, False
    from qdrant_tools.store import open_store

    return open_store(path, url=url, api_key=api_key, warm=True), True


def _async_face(
    client: StoreLike, aclient: AsyncStoreLike | None, url: str | None, api_key: str | None
) -> AsyncStoreLike:
    """The async client: the one given, an ``AsyncQdrantClient`` for ``url``, else the sync client's
    :class:`~qdrant_tools.store.async_store.AsyncStore` (queries batched)."""
    if aclient is not None:
        return aclient
    if url is not None:
        import os

        from qdrant_client import AsyncQdrantClient

        return AsyncQdrantClient(url=url, api_key=api_key or os.environ.get("QDRANT_API_KEY"))
    from qdrant_tools.store.async_store import AsyncStore

    return AsyncStore(client)
