"""``PosFairVectorStore``: a LlamaIndex vector store over a Qdrant collection in posfair's layout.

Swap it in for LlamaIndex's ``QdrantVectorStore`` and an app gets position-fair retrieval: each node is one point
with its node vector, its sentence-aligned sub-chunks (alone and fused with the node vector) and BM25, computed
here; a query is the default hybrid search of ``posfair query`` in one ``query_points`` call, each hit scored by its
relevance in [0, 1] (docs/vector-store.md, "What it stores" and "Scores"). ``MetadataFilters`` apply to every arm
of the query (:mod:`llamaindex_posfair.integrations.filters`).

The collection records its layout (a :class:`~llamaindex_posfair.integrations.recipe.Recipe`) when it is created;
a store whose embed model contradicts it is refused, naming both (one in another precision only queries it).

Query modes (``DEFAULT``, ``HYBRID``, ``SEMANTIC_HYBRID``, ``SPARSE``, ``TEXT_SEARCH``, ``MMR``) and the query
fields it reads (``hybrid_top_k``, ``sparse_top_k``, ``alpha``, ``qdrant_filters=``): docs/vector-store.md,
"Queries". The result's ``ids`` are node ids. A store given only ``aclient=`` reads the collection's layout on its
first async call; its synchronous methods refuse.

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
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.indices.query.embedding_utils import get_top_k_mmr_embeddings
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from qdrant_client import models

from llamaindex_posfair.encoders.spec import EncoderSpec
from llamaindex_posfair.integrations.filters import to_qdrant_filter
from llamaindex_posfair.integrations.gate import Gate
from llamaindex_posfair.integrations.nodes import check_embeddings, hit_to_node, planned_nodes, without_empty
from llamaindex_posfair.integrations.recipe import Recipe, aread_recipe, read_recipe
from qdrant_tools.encoding import ChunkEncoder, document_token_counter
from qdrant_tools.scroll import ascroll_pages, scroll_pages
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
from qdrant_tools.writer import QdrantWriter, spec_for_vectors

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import AsyncStoreLike, StoreLike

__all__ = ["PosFairVectorStore"]

_DENSE_MODES = (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.SEMANTIC_HYBRID)
_SPARSE_MODES = (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH)
#: MMR re-ranks this many times ``similarity_top_k`` candidates (LlamaIndex's default prefetch factor).
MMR_PREFETCH_FACTOR = 4.0


class PosFairVectorStore(BasePydanticVectorStore):
    """Position-fair LlamaIndex vector store over Qdrant (embedded Qdrant Edge, local mode or a server).

    Args:
        collection_name: the Qdrant collection (created on the first ``add``).
        client: a ``QdrantClient`` or the embedded store (:func:`qdrant_tools.store.open_store`); the caller
            closes it. Or pass ``path`` / ``url``, or ``aclient`` alone.
        aclient: an ``AsyncQdrantClient`` (or :class:`~qdrant_tools.store.async_store.AsyncStore`) for the async
            methods (with ``url`` one is made). Given alone, the store is async only: the collection's layout
            is read on the first async call, and the synchronous methods refuse.
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
            ``posfair storage migrate --from-llamaindex``), or none or several of client / path / url
            (``aclient`` alone is accepted).
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

    _client: StoreLike | None = PrivateAttr(default=None)
    _aclient: AsyncStoreLike | None = PrivateAttr(default=None)
    _owns_client: bool = PrivateAttr(default=False)
    _recipe: Recipe = PrivateAttr()
    _gate: Gate = PrivateAttr()
    _embed: Any = PrivateAttr(default=None)
    _encoder: Any = PrivateAttr(default=None)
    _loaded: Any = PrivateAttr(default=None)
    _own: Any = PrivateAttr(default=None)
    _trusted: bool = PrivateAttr(default=False)
    _writer: Any = PrivateAttr(default=None)
    _ensured: Any = PrivateAttr(default=None)
    _empty_skipped: int = PrivateAttr(default=0)
    _vectors: CollectionVectors | None = PrivateAttr(default=None)
    _bm25: Bm25Sparse | None = PrivateAttr(default=None)
    _search: SearchSettings = PrivateAttr()
    _write_lock: Any = PrivateAttr(default_factory=threading.Lock)
    _layout_given: Recipe | None = PrivateAttr(default=None)
    _ready: bool = PrivateAttr(default=False)

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
        self._client, self._owns_client = _open(client, aclient, path, url, api_key)
        self._aclient = _async_face(self._client, aclient, url, api_key)
        self._embed = embed_model
        self._layout_given = layout
        if self._client is None:
            return  # async only: the layout is read on the first async call (_aready)
        try:
            self._prepare(self._read_or_new_recipe(layout))
        except BaseException:
            self.close()
            raise

    @classmethod
    def class_name(cls) -> str:
        return "PosFairVectorStore"

    @property
    def client(self) -> StoreLike | None:
        return self._client

    @property
    def aclient(self) -> AsyncStoreLike | None:
        return self._aclient

    @property
    def layout(self) -> Recipe:
        """The collection's layout (its recipe): encoders, node and sub-chunk sizes, BM25, default search.

        Raises:
            ValueError: an async-only store that has not made an async call yet.
        """
        if not self._ready:
            raise ValueError(
                "this PosFairVectorStore has only an async client and has not read its layout yet; await one "
                "async call first (e.g. aget_nodes or aquery), or pass client= as well"
            )
        return self._recipe

    def close(self) -> None:
        """Close the storage if this store opened it (``path=`` / ``url=``)."""
        if self._owns_client:
            self._client.close()
            self._owns_client = False

    # ------------------------------------------------------------------ clients and layout
    def _sync_client(self, method: str) -> StoreLike:
        """The synchronous client, for ``method``.

        Raises:
            ValueError: the store was given only ``aclient=``.
        """
        if self._client is None:
            raise ValueError(
                f"PosFairVectorStore.{method} needs a synchronous client, but this store was given only aclient=; "
                "use the async methods (aquery, aget_nodes, async_add, adelete, adelete_nodes, aclear), or pass "
                "client= as well"
            )
        return self._client

    def _prepare(self, recipe: Recipe) -> None:
        """Adopt ``recipe`` (the collection's layout): its BM25 model and search; the embed model is checked."""
        self._recipe = recipe
        self._gate = Gate.of(self.collection_name, recipe, client=self._client)
        self._bm25 = recipe.sparse_encoder()
        self._check_embed_model()
        self._search = recipe.search.overridden(**self.search_overrides)
        self._ready = True

    async def _aready(self) -> None:
        """Read the layout through the async client if the store has not read it yet (``aclient=`` alone)."""
        if self._ready:
            return
        if await self._aclient.collection_exists(self.collection_name):
            recipe = await aread_recipe(self._aclient, self.collection_name)
            if recipe is None:
                raise _not_posfair(self.collection_name)
        else:
            recipe = self._new_recipe(self._layout_given)
        self._prepare(recipe)

    def _read_or_new_recipe(self, layout: Recipe | None) -> Recipe:
        if self._client.collection_exists(self.collection_name):
            recipe = read_recipe(self._client, self.collection_name)
            if recipe is None:
                raise _not_posfair(self.collection_name)
            return recipe
        return self._new_recipe(layout)

    def _new_recipe(self, layout: Recipe | None) -> Recipe:
        if layout is not None:
            return layout
        spec = self._embed.spec if _is_posfair(self._embed) else EncoderSpec()
        return Recipe.for_encoder(spec)

    def _check_embed_model(self) -> None:
        """The embed model must be the encoder of the searched vector (the gate's ``check_reader``); without one,
        the embeddings the index sends are checked on the first query and on every ``add`` (:meth:`_check_given`)."""
        if self._embed is not None:
            self._gate.check_reader(self._embed, own=self._own_encoder, who="the embed model")
            self._trusted = True

    def _model(self) -> Any:
        """The loaded model that encodes for the collection: a ``PosFairEmbedding`` embed model's own encoder,
        else the recorded spec's, loaded here once (for the embedding checks and the writer alike)."""
        if self._loaded is None:
            self._loaded = self._embed.encoder if _is_posfair(self._embed) else self._recipe.encoder_spec().load()
        return self._loaded

    def _own_encoder(self) -> Any:
        """The collection's encoder of the searched vector (:meth:`_model`, bound to the recipe's vectors)."""
        if self._own is None:
            self._own = self._recipe.bind(self._model())[self._node_vector()]
        return self._own

    def _check_given(self, texts: Sequence[str], embedding: Any, what: str, query: bool = False) -> None:
        """Unless the embed model is known to be the collection's encoder, check one embedding the index sent
        (:meth:`~llamaindex_posfair.integrations.gate.Gate.check_embedding`; raises before anything is written)."""
        if self._trusted or embedding is None or not texts or not texts[0].strip():
            return
        self._gate.check_embedding(self._own_encoder(), texts, embedding, what, query=query)
        if query:
            self._trusted = True

    def _check_nodes(self, nodes: Sequence[BaseNode]) -> None:
        """The first node with an embedding is the collection encoder's vector of its text, with its metadata (as
        LlamaIndex embeds it) or alone."""
        node = next((n for n in nodes if n.embedding is not None), None)
        if node is not None:
            texts = [node.get_content(metadata_mode=mode) for mode in (MetadataMode.EMBED, MetadataMode.NONE)]
            self._check_given(texts, node.embedding, f"node {node.node_id!r}")

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
            if _is_posfair(self._embed):  # in the recorded precision and runtime (queries may use others)
                self._gate.check_writer(self._embed, who="the embed model")
            vectors = self._recipe.bind(self._model())
            encoding = self._recipe.ingest_settings(show_progress=False).point_encoding(vectors)
            metadata = encoding.metadata(self._recipe.metadata())
            spec = spec_for_vectors(
                self.collection_name, encoding.vector_configs(), None, metadata, sparse=encoding.sparse_configs()
            )
            writer = QdrantWriter(self._client, spec, descriptions=encoding.descriptions)
            if self._client is not None:  # async only: async_add creates the collection (QdrantWriter.aensure)
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
        self._sync_client("add")
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
        await self._aready()
        kept, chunks = await asyncio.to_thread(self._plan, nodes)
        if kept:
            if self._client is not None:
                await asyncio.to_thread(self._ready_writer)
            await self._writer.aensure(self._aclient)
            for batch_nodes, batch_chunks in self._batches(kept, chunks):
                batch = await asyncio.to_thread(self._encode, batch_nodes, batch_chunks)
                await self._writer.aupsert(self._aclient, batch)
        self._vectors = None
        return [n.node_id for n in kept]

    # ------------------------------------------------------------------ querying
    def _sparse_query(self, text: str | None) -> Any:
        bm25 = self._bm25
        return bm25.embed_query(text) if bm25 is not None and text and text.strip() else None

    def _filter(
        self,
        filters: MetadataFilters | None,
        *,
        doc_ids: Sequence[str] | None = None,
        node_ids: Sequence[str] | None = None,
        qdrant_filters: Any = None,
    ) -> models.Filter | None:
        """The Qdrant filter of ``filters`` and the ids, with a native ``qdrant_filters`` required beside them.

        Raises:
            TypeError: ``qdrant_filters`` is not a ``qdrant_client.models.Filter``.
            UnsupportedFilterError: see :func:`~llamaindex_posfair.integrations.filters.to_qdrant_filter`.
        """
        if qdrant_filters is not None and not isinstance(qdrant_filters, models.Filter):
            raise TypeError(
                f"qdrant_filters must be a qdrant_client.models.Filter, got {type(qdrant_filters).__name__}; "
                "e.g. models.Filter(must=[models.FieldCondition(key='lang', match=models.MatchValue(value='en'))])"
            )
        extra = [] if qdrant_filters is None else [qdrant_filters]
        return to_qdrant_filter(filters, doc_ids=doc_ids, node_ids=node_ids, extra=extra)

    def _plan_query(self, query: VectorStoreQuery, kwargs: Mapping[str, Any]) -> _Plan:
        """How to answer a LlamaIndex query: a BM25 ranking, the default search, or MMR over its candidates.

        Raises:
            ValueError: an unsupported mode, an empty query, a query without the embedding / text its mode
                needs, or a BM25 setting (``sparse_top_k``, ``alpha``, ``HYBRID``) on a collection without BM25.
        """
        flt = self._filter(
            query.filters, doc_ids=query.doc_ids, node_ids=query.node_ids, qdrant_filters=kwargs.get("qdrant_filters")
        )
        self._check_bm25_fields(query)
        if query.mode in _SPARSE_MODES or (query.mode in _DENSE_MODES and query.alpha == 0.0):
            sparse = self._sparse_query(query.query_str)
            if sparse is None:
                raise ValueError(
                    f"query mode {query.mode.value!r} (alpha={query.alpha!r}) ranks by BM25: give query_str "
                    "(a non-empty query)"
                )
            limit = (query.sparse_top_k or query.similarity_top_k) if query.mode in _SPARSE_MODES else _hits(query)
            return _Plan("sparse", {"sparse_query": sparse, "limit": limit}, flt)
        if query.mode not in (*_DENSE_MODES, VectorStoreQueryMode.MMR):
            raise ValueError(
                f"query mode {query.mode.value!r} is not supported by PosFairVectorStore; use "
                f"{[m.value for m in (*_DENSE_MODES, *_SPARSE_MODES, VectorStoreQueryMode.MMR)]}"
            )
        if query.query_embedding is None:
            raise _no_embedding(query)
        self._check_given([query.query_str or ""], query.query_embedding, "the query", query=True)
        limit = _hits(query)
        mmr = None
        if query.mode == VectorStoreQueryMode.MMR:
            mmr = kwargs.get("mmr_threshold", query.mmr_threshold)
            limit = _mmr_candidates(query.similarity_top_k, kwargs)
        settings = self._search.overridden(
            evidence=True,
            limit=limit,
            evidence_limit=self.evidence_hits,
            sparse_limit=query.sparse_top_k,
            **_alpha_settings(query.alpha, self._search),
        )
        args = {
            "query_vector": query.query_embedding,
            "settings": settings,
            "sparse_query": self._sparse_query(query.query_str),
        }
        return _Plan("mmr" if query.mode == VectorStoreQueryMode.MMR else "dense", args, flt, mmr)

    def _check_bm25_fields(self, query: VectorStoreQuery) -> None:
        """A query that weighs or sizes the BM25 ranking needs a collection that stores BM25."""
        if self._bm25 is not None:
            return
        asked = []
        if query.mode in (VectorStoreQueryMode.HYBRID, *_SPARSE_MODES):
            asked.append(f"mode={query.mode.value!r}")
        if query.sparse_top_k is not None:
            asked.append(f"sparse_top_k={query.sparse_top_k}")
        if query.alpha not in (None, 1.0):
            asked.append(f"alpha={query.alpha}")
        if asked:
            raise ValueError(
                f"collection {self.collection_name!r} stores no BM25 vectors (written without BM25), so "
                f"{', '.join(asked)} cannot be honoured; query in the default mode without them, or write the "
                "nodes into a collection with BM25 (the default layout)"
            )

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` best nodes for ``query`` (see the module docstring for the modes and fields).

        Args:
            query: the LlamaIndex query.
            **kwargs: ``qdrant_filters`` (a native Qdrant filter), and for MMR ``mmr_threshold``,
                ``mmr_prefetch_k`` or ``mmr_prefetch_factor``.

        Raises:
            UnsupportedFilterError: a filter operator the translation does not know.
            ValueError: see :meth:`_plan_query`; or the store has only an async client.
        """
        client = self._sync_client("query")
        if self._vectors is None and not client.collection_exists(self.collection_name):
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        plan = self._plan_query(query, kwargs)
        vectors = self._current_vectors()
        if plan.kind == "sparse":
            request = sparse_request(plan.args["sparse_query"], vectors, plan.args["limit"], plan.query_filter)
            return _result(hits_of(client.query_points(self.collection_name, **request, with_payload=True).points))
        hits = search(client, self.collection_name, vectors=vectors, query_filter=plan.query_filter, **plan.args)
        if plan.kind == "mmr":
            records = client.retrieve(self.collection_name, **self._vector_request(hits)) if hits else []
            hits = self._mmr(hits, records, query, plan.mmr_threshold)
        return _result(hits)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """:meth:`query` through the async client, without blocking the loop: an ``AsyncQdrantClient`` for a
        server; for the embedded store, concurrent queries are sent together as one batch
        (:class:`qdrant_tools.store.async_store.AsyncStore`)."""
        if self._vectors is None and not await self._aclient.collection_exists(self.collection_name):
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        await self._aready()
        plan = self._plan_query(query, kwargs)
        vectors = await self._acurrent_vectors()
        if plan.kind == "sparse":
            request = sparse_request(plan.args["sparse_query"], vectors, plan.args["limit"], plan.query_filter)
            points = (await self._aclient.query_points(self.collection_name, **request, with_payload=True)).points
            return _result(hits_of(points))
        hits = await asearch(
            self._aclient, self.collection_name, vectors=vectors, query_filter=plan.query_filter, **plan.args
        )
        if plan.kind == "mmr":
            records = await self._aclient.retrieve(self.collection_name, **self._vector_request(hits)) if hits else []
            hits = self._mmr(hits, records, query, plan.mmr_threshold)
        return _result(hits)

    def _vector_request(self, hits: Sequence[Hit]) -> dict[str, Any]:
        """The ``retrieve`` arguments that read the node vectors of ``hits``."""
        return {"ids": [h.id for h in hits], "with_payload": False, "with_vectors": [self._node_vector()]}

    def _mmr(
        self, hits: Sequence[Hit], records: Sequence[Any], query: VectorStoreQuery, threshold: float | None
    ) -> list[Hit]:
        """The ``similarity_top_k`` of ``hits`` chosen by maximal marginal relevance over their node vectors
        (LlamaIndex's ``get_top_k_mmr_embeddings``; ``threshold`` 1: relevance only, 0: diversity first),
        each scored by its MMR value."""
        name = self._node_vector()
        stored = {str(r.id): (r.vector or {}).get(name) for r in records}
        known = [h for h in hits if stored.get(h.id) is not None]
        if not known:
            return []
        scores, ids = get_top_k_mmr_embeddings(
            list(query.query_embedding),
            [list(stored[h.id]) for h in known],
            similarity_top_k=query.similarity_top_k,
            embedding_ids=[h.id for h in known],
            mmr_threshold=threshold,
        )
        by_id = {h.id: h for h in known}
        return [dataclasses.replace(by_id[i], score=float(s)) for s, i in zip(scores, ids)]

    # ------------------------------------------------------------------ reading and deleting
    def get_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> list[BaseNode]:
        """The stored nodes with these ids and/or matching ``filters`` (all nodes when neither is given), each
        with its embedding (the node vector).

        Args:
            node_ids: only these nodes.
            filters: only the nodes matching these metadata filters.
            limit: at most this many nodes (``None``: all).
            **kwargs: ``qdrant_filters``, a native Qdrant filter required beside the others.

        Raises:
            ValueError: the collection does not exist (nothing was added yet, or :meth:`clear` deleted it), as
                LlamaIndex's ``QdrantVectorStore``; or the store has only an async client.
        """
        client = self._sync_client("get_nodes")
        if not client.collection_exists(self.collection_name):
            raise _missing(self.collection_name)
        flt = self._filter(filters, node_ids=node_ids, qdrant_filters=kwargs.get("qdrant_filters"))
        pages = scroll_pages(client, self.collection_name, **self._scroll_options(flt, limit))
        return [self._stored_node(r) for page in pages for r in page]

    async def aget_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> list[BaseNode]:
        """:meth:`get_nodes` through the async client."""
        if not await self._aclient.collection_exists(self.collection_name):
            raise _missing(self.collection_name)
        await self._aready()
        flt = self._filter(filters, node_ids=node_ids, qdrant_filters=kwargs.get("qdrant_filters"))
        pages = ascroll_pages(self._aclient, self.collection_name, **self._scroll_options(flt, limit))
        return [self._stored_node(r) async for page in pages for r in page]

    def _scroll_options(self, flt: models.Filter | None, limit: int | None) -> dict[str, Any]:
        """What :meth:`get_nodes` scrolls: payloads and node vectors, at most ``limit`` points."""
        return {"scroll_filter": flt, "limit": limit, "with_payload": True, "with_vectors": [self._node_vector()]}

    def _stored_node(self, record: Any) -> BaseNode:
        """A scrolled point as its node, with the node vector as its embedding."""
        node = hit_to_node(record).node
        vector = (record.vector or {}).get(self._node_vector()) if isinstance(record.vector, dict) else None
        if vector is not None:
            node.embedding = [float(x) for x in vector]
        return node

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
        client = self._sync_client("delete")
        if client.collection_exists(self.collection_name):
            with self._write_lock:
                selector = models.FilterSelector(filter=flt)
                client.delete(self.collection_name, points_selector=selector, wait=True)
                self._vectors = None

    async def _adelete(self, flt: models.Filter) -> None:
        if await self._aclient.collection_exists(self.collection_name):
            selector = models.FilterSelector(filter=flt)
            await self._aclient.delete(self.collection_name, points_selector=selector, wait=True)
            self._vectors = None

    def clear(self) -> None:
        """Delete the collection (its layout is kept by this store: the next ``add`` recreates it)."""
        client = self._sync_client("clear")
        with self._write_lock:
            if client.collection_exists(self.collection_name):
                client.delete_collection(self.collection_name)
            self._writer, self._vectors = None, None

    async def aclear(self) -> None:
        """:meth:`clear` through the async client."""
        if await self._aclient.collection_exists(self.collection_name):
            await self._aclient.delete_collection(self.collection_name)
        self._writer, self._vectors = None, None


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How a query is answered: ``kind`` ``"sparse"`` (``args``: the BM25 query and limit), ``"dense"`` or
    ``"mmr"`` (``args``: :func:`~qdrant_tools.search.search` keywords), under ``query_filter``."""

    kind: str
    args: dict[str, Any]
    query_filter: models.Filter | None
    mmr_threshold: float | None = None


def _not_posfair(collection: str) -> ValueError:
    return ValueError(
        f"collection {collection!r} was not written by posfair (it records no layout); adopt a LlamaIndex "
        f"collection with `posfair storage migrate --from-llamaindex {collection} --to NEW`, or choose a new "
        "collection name"
    )


def _missing(collection: str) -> ValueError:
    return ValueError(
        f"Collection {collection} not found: nothing was added to it yet, or clear() deleted it; add nodes first"
    )


def _no_embedding(query: VectorStoreQuery) -> ValueError:
    if not (query.query_str or "").strip():
        return ValueError(
            f"the query is empty (query_str={query.query_str!r}, no query_embedding): ask a non-empty question, "
            "e.g. retriever.retrieve('how do tides form?')"
        )
    return ValueError(
        f"query mode {query.mode.value!r} needs query.query_embedding: give the index an embed model (e.g. "
        "PosFairEmbedding), or use mode='sparse' to rank by BM25 alone"
    )


def _hits(query: VectorStoreQuery) -> int:
    """The hits a ranking query returns: ``hybrid_top_k`` in ``HYBRID`` mode when given, else ``similarity_top_k``."""
    if query.mode == VectorStoreQueryMode.HYBRID and query.hybrid_top_k:
        return query.hybrid_top_k
    return query.similarity_top_k


def _alpha_settings(alpha: float | None, search: SearchSettings) -> dict[str, Any]:
    """The search settings that weigh the dense ranking by ``alpha`` against BM25's ``1 - alpha``.

    Raises:
        ValueError: ``alpha`` outside [0, 1], or a weight other than 0.5 where the search fuses by DBSF.
    """
    if alpha is None:
        return {}
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1] (1: dense only, 0: BM25 only, 0.5: equal weights), got {alpha!r}")
    if alpha == 1.0:
        return {"sparse": False}
    if alpha == 0.0:  # the ranking modes answer alpha=0 by BM25 alone before they get here
        raise ValueError("alpha=0 ranks by BM25 alone, but MMR re-ranks the dense search's candidates; give alpha > 0")
    if search.fusion == "dbsf":
        if alpha != 0.5:
            raise ValueError(
                f"alpha={alpha!r} weighs the rankings in reciprocal rank fusion, but this store's search fuses by "
                "DBSF, which takes no weights; give search_overrides={'fusion': 'rrf'}, or leave alpha unset"
            )
        return {}
    return {"sparse_weight": (1.0 - alpha) / alpha}


def _mmr_candidates(top_k: int, kwargs: Mapping[str, Any]) -> int:
    """The candidates MMR chooses from: ``mmr_prefetch_k``, else ``mmr_prefetch_factor`` (default
    :data:`MMR_PREFETCH_FACTOR`) times ``top_k``.

    Raises:
        ValueError: both are given, or one is not positive.
    """
    k, factor = kwargs.get("mmr_prefetch_k"), kwargs.get("mmr_prefetch_factor")
    if k is not None and factor is not None:
        raise ValueError("give mmr_prefetch_k or mmr_prefetch_factor, not both")
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"mmr_prefetch_k must be a positive integer, got {k!r}; e.g. 20")
        return max(k, top_k)
    factor = MMR_PREFETCH_FACTOR if factor is None else factor
    if not factor > 0:
        raise ValueError(f"mmr_prefetch_factor must be > 0, got {factor!r}; e.g. 4.0")
    return max(top_k, int(top_k * factor))


def _is_posfair(embed: Any) -> bool:
    """Whether ``embed`` is a ``PosFairEmbedding`` (it carries the spec of its encoder)."""
    return embed is not None and isinstance(getattr(embed, "spec", None), EncoderSpec)


def _selection(node_ids: list[str] | None, filters: MetadataFilters | None) -> models.Filter:
    flt = to_qdrant_filter(filters, node_ids=node_ids)
    if flt is None:
        raise ValueError("delete_nodes needs node_ids or filters; clear() deletes every node")
    return flt


def _result(hits: Sequence[Hit]) -> VectorStoreQueryResult:
    nodes = [hit_to_node(h) for h in hits]
    return VectorStoreQueryResult(
        nodes=[n.node for n in nodes], similarities=[h.score for h in hits], ids=[n.node.node_id for n in nodes]
    )


def _open(
    client: StoreLike | None, aclient: AsyncStoreLike | None, path: str | None, url: str | None, api_key: str | None
) -> tuple[StoreLike | None, bool]:
    """The store's synchronous client (``None``: ``aclient`` alone) and whether the store opened it."""
    given = sum(x is not None for x in (client, path, url))
    if given == 0 and aclient is not None:
        return None, False
    if given != 1:
        raise ValueError(
            "PosFairVectorStore needs exactly one of client=, path= (embedded folder) and url= (server), or "
            "aclient= alone (an async app)"
        )
    if client is not None:
        return client, False
    from qdrant_tools.store import open_store

    return open_store(path, url=url, api_key=api_key, warm=True), True


def _async_face(
    client: StoreLike | None, aclient: AsyncStoreLike | None, url: str | None, api_key: str | None
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
