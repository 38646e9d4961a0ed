"""LlamaIndex peers: what LlamaIndex users run today, as systems of the harness.

Each peer indexes the benchmark's passages as LlamaIndex ``Document`` objects (``id_`` =
passage id) with a recipe from LlamaIndex's documentation, answers every query
through that recipe's retriever (and postprocessors), and is scored at passage
(file) level as the default pipeline is (:mod:`.system`): a passage scores its best node
(:func:`llamaindex_posfair.scoring.max_over_owners`), a passage without a node among the
hits scores ``-inf`` and ranks last. A node's score is its place in the list
LlamaIndex returns (``-rank``), so ties are broken as LlamaIndex breaks them (this
matters for reciprocal-rank fusion, whose scores tie often).

The recipes (:func:`llamaindex_peers`):

* ``llamaindex-default``: ``SentenceSplitter()`` (1024/200 tokens of tiktoken's
  ``cl100k_base``) into a ``VectorStoreIndex``; the embedding model truncates each node
  at its own window (256 tokens for all-MiniLM-L6-v2);
* ``SentenceSplitter`` with other sizes (256/20, 128/20);
* ``SentenceWindowNodeParser`` (single sentences retrieved; ``window_size`` sentences
  either side put back by ``MetadataReplacementPostProcessor`` afterwards);
* LlamaIndex's hybrid recipe: ``QueryFusionRetriever([vector, BM25Retriever], mode=
  "reciprocal_rerank", num_queries=1)`` over ``SentenceSplitter`` nodes
  (``llama-index-retrievers-bm25``, in the ``bench`` and ``test`` extras).

Costs (:class:`PeerStats`): dense vectors per passage (BM25's postings not counted),
bytes per float32 vector, ingest passages/s (splitting, embedding, building every
index: all in) and query p50/p99 in ms (retrieval and postprocessing; the query
embedding is computed beforehand and excluded).

Example:
    >>> from research.default_pipeline.peers import llamaindex_peers
    >>> # peers = llamaindex_peers(bundled_minilm_embedding())
    >>> # run_eval(load_shipped("natural-docs", "dev"), peers)[0].ndcg.harmonic, peers[0].stats.query_p50_ms
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter, SentenceWindowNodeParser
from llama_index.core.schema import NodeWithScore, QueryBundle

from llamaindex_posfair.scoring import max_over_owners
from research.eval.harness.systems import EncodeCache

__all__ = [
    "DEFAULT_TOP_K",
    "LlamaIndexPeer",
    "PeerBuilder",
    "PeerIndex",
    "PeerStats",
    "bundled_minilm_embedding",
    "hybrid_recipe",
    "llamaindex_peers",
    "passage_documents",
    "passage_scores",
    "posfair_store_recipe",
    "sentence_window_recipe",
    "splitter_recipe",
]

#: Nodes retrieved per query (enough for an exact passage top 10 when they cover ≥ 10 passages).
DEFAULT_TOP_K = 100


@dataclass
class PeerIndex:
    """What a recipe builds.

    Args:
        retriever: the retriever a user would query.
        nodes: the nodes stored, one dense vector each.
        postprocessors: applied to the retrieved nodes, in order (as a query engine does).
    """

    retriever: Any
    nodes: list[Any]
    postprocessors: list[Any] = field(default_factory=list)
    vectors: int | None = None  # dense vectors stored, when a node stores more than one (default: one each)


#: ``(documents, embed_model, top_k) -> PeerIndex``: how a peer indexes a corpus.
PeerBuilder = Callable[[list[Any], Any, int], PeerIndex]


@dataclass(frozen=True)
class PeerStats:
    """What one peer cost, next to its quality.

    Attributes:
        nodes / passages / dim: stored nodes (one dense vector each), passages, vector size.
        ingest_seconds: splitting, embedding and index building.
        query_p50_ms / query_p99_ms: one retrieval with postprocessing, query embedding excluded.
        min_passages_hit: fewest distinct passages among any query's hits (below 10 the
            passage top 10 may be cut short).

    Example:
        >>> s = PeerStats(nodes=6, passages=2, dim=384, ingest_seconds=0.5, query_p50_ms=1.0,
        ...               query_p99_ms=2.0, min_passages_hit=2)
        >>> s.vectors_per_passage, s.bytes_per_vector, s.ingest_docs_per_second
        (3.0, 1536, 4.0)
    """

    nodes: int
    passages: int
    dim: int
    ingest_seconds: float
    query_p50_ms: float
    query_p99_ms: float
    min_passages_hit: int
    vectors: int | None = None

    @property
    def vectors_per_passage(self) -> float:
        return (self.nodes if self.vectors is None else self.vectors) / max(self.passages, 1)

    @property
    def bytes_per_vector(self) -> int:
        return 4 * self.dim

    @property
    def ingest_docs_per_second(self) -> float:
        return self.passages / self.ingest_seconds if self.ingest_seconds > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "passages": self.passages,
            "vectors_per_passage": round(self.vectors_per_passage, 3),
            "bytes_per_vector": self.bytes_per_vector,
            "ingest_docs_per_second": round(self.ingest_docs_per_second, 2),
            "query_p50_ms": round(self.query_p50_ms, 2),
            "query_p99_ms": round(self.query_p99_ms, 2),
            "min_passages_hit": self.min_passages_hit,
        }


# ------------------------------------------------------------------ scoring (no model)
def passage_documents(cache: EncodeCache) -> list[Any]:
    """The benchmark's passages as LlamaIndex ``Document`` objects, ``id_`` = passage id, no metadata."""
    return [Document(text=text, id_=doc_id) for doc_id, text in zip(cache.doc_ids, cache.docs)]


def passage_scores(hits: Sequence[Sequence[NodeWithScore]], doc_ids: Sequence[str]) -> np.ndarray:
    """``[n_queries, n_docs]`` passage scores from each query's node list, in LlamaIndex's order.

    A node scores ``-rank`` (0 for the first); a passage scores its best node; a passage with
    no node in a query's list scores ``-inf``.

    Raises:
        ValueError: a node has no source document, or one outside ``doc_ids``.

    Example:
        >>> from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
        >>> def node(i, doc):
        ...     return NodeWithScore(node=TextNode(id_=i, text=i, relationships={
        ...         NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)}), score=1.0)
        >>> passage_scores([[node("n1", "b"), node("n2", "a"), node("n3", "b")]], ["a", "b", "c"]).tolist()
        [[-1.0, 0.0, -inf]]
    """
    column = {d: i for i, d in enumerate(doc_ids)}
    node_col: dict[str, int] = {}
    owners: list[int] = []
    for row in hits:
        for hit in row:
            node = hit.node
            if node.node_id in node_col:
                continue
            if node.ref_doc_id not in column:
                raise ValueError(
                    f"node {node.node_id!r} comes from document {node.ref_doc_id!r}, which is not a passage of the "
                    "benchmark; index passage_documents(cache) so every node keeps its passage id"
                )
            node_col[node.node_id] = len(owners)
            owners.append(column[node.ref_doc_id])
    sim = np.full((len(hits), len(owners)), -np.inf, dtype=np.float64)
    for i, row in enumerate(hits):
        for rank, hit in enumerate(row):
            j = node_col[hit.node.node_id]
            sim[i, j] = max(sim[i, j], float(-rank))
    return max_over_owners(sim, np.asarray(owners, dtype=np.int64), len(doc_ids))


# ------------------------------------------------------------------ the system
@dataclass
class LlamaIndexPeer:
    """A LlamaIndex recipe as a ``RetrievalSystem``: index ``cache.docs`` with ``recipe``, query its retriever.

    Args:
        name: Row label.
        embed_model: a LlamaIndex embedding model (e.g. :func:`bundled_minilm_embedding`).
        recipe: how the passages are indexed (:func:`splitter_recipe`, :func:`sentence_window_recipe`,
            :func:`hybrid_recipe`).
        top_k: nodes retrieved per query (capped at the number of nodes).

    Attributes:
        stats: :class:`PeerStats`, set by ``score``.

    Raises:
        ValueError: ``top_k`` is not a positive integer.

    Example:
        >>> from research.default_pipeline.peers import LlamaIndexPeer, splitter_recipe
        >>> # peer = LlamaIndexPeer("SentenceSplitter 128/20", embed, splitter_recipe(128, 20))
        >>> # run_eval(bench, [peer]); peer.stats.query_p50_ms
    """

    name: str
    embed_model: Any
    recipe: PeerBuilder
    top_k: int = DEFAULT_TOP_K
    kind: str = "llamaindex"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = float("nan")
    stats: PeerStats | None = None

    def __post_init__(self) -> None:
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {self.top_k!r}; e.g. 100 nodes per query")
        self.params = {"top_k": self.top_k, **self.params}

    def score(self, cache: EncodeCache) -> np.ndarray:
        docs = passage_documents(cache)
        t0 = time.perf_counter()
        index = self.recipe(docs, self.embed_model, self.top_k)
        ingest_seconds = time.perf_counter() - t0
        embeddings = [self.embed_model.get_query_embedding(q) for q in cache.queries]
        hits, seconds = _answer(index, cache.queries, embeddings)
        ms = 1000.0 * seconds if len(seconds) else np.array([np.nan])
        self.stats = PeerStats(
            nodes=len(index.nodes),
            passages=cache.n_docs,
            dim=len(embeddings[0]) if embeddings else 0,
            ingest_seconds=ingest_seconds,
            query_p50_ms=float(np.percentile(ms, 50)),
            query_p99_ms=float(np.percentile(ms, 99)),
            min_passages_hit=min((len({h.node.ref_doc_id for h in row}) for row in hits), default=0),
            vectors=index.vectors,
        )
        self.vectors_per_passage = self.stats.vectors_per_passage
        return passage_scores(hits, cache.doc_ids)


def _answer(
    index: PeerIndex, queries: Sequence[str], embeddings: Sequence[list[float]]
) -> tuple[list[list[NodeWithScore]], np.ndarray]:
    """Every query through the retriever and postprocessors; per-query seconds (embedding excluded)."""
    hits: list[list[NodeWithScore]] = []
    seconds = np.zeros(len(queries))
    for i, (text, embedding) in enumerate(zip(queries, embeddings)):
        bundle = QueryBundle(query_str=text, embedding=embedding)
        t0 = time.perf_counter()
        nodes = index.retriever.retrieve(bundle)
        for post in index.postprocessors:
            nodes = post.postprocess_nodes(nodes, query_bundle=bundle)
        seconds[i] = time.perf_counter() - t0
        hits.append(list(nodes))
    return hits, seconds


# ------------------------------------------------------------------ recipes
def _vector_index(nodes: list[Any], embed_model: Any) -> Any:
    return VectorStoreIndex(nodes, embed_model=embed_model, show_progress=False)


def splitter_recipe(chunk_size: int | None = None, chunk_overlap: int | None = None) -> PeerBuilder:
    """``SentenceSplitter`` nodes in a ``VectorStoreIndex`` (``None``: LlamaIndex's defaults, 1024/200)."""
    sizes = {k: v for k, v in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)) if v is not None}

    def build(docs: list[Any], embed_model: Any, top_k: int) -> PeerIndex:
        nodes = SentenceSplitter(**sizes).get_nodes_from_documents(docs)
        index = _vector_index(nodes, embed_model)
        return PeerIndex(index.as_retriever(similarity_top_k=min(top_k, len(nodes))), nodes)

    return build


def sentence_window_recipe(window_size: int = 3) -> PeerBuilder:
    """Single-sentence nodes (``SentenceWindowNodeParser``); the ``window`` replaces the text after retrieval."""
    from llama_index.core.postprocessor import MetadataReplacementPostProcessor

    def build(docs: list[Any], embed_model: Any, top_k: int) -> PeerIndex:
        parser = SentenceWindowNodeParser.from_defaults(window_size=window_size)
        nodes = parser.get_nodes_from_documents(docs)
        index = _vector_index(nodes, embed_model)
        post = MetadataReplacementPostProcessor(target_metadata_key="window")
        return PeerIndex(index.as_retriever(similarity_top_k=min(top_k, len(nodes))), nodes, [post])

    return build


def hybrid_recipe(chunk_size: int = 128, chunk_overlap: int = 20) -> PeerBuilder:
    """LlamaIndex's hybrid recipe: dense and BM25 retrievers over the same nodes, fused by reciprocal rank.

    ``num_queries=1`` generates no query, so no LLM is called; ``llm=MockLLM()`` only keeps the
    constructor from resolving ``Settings.llm`` (OpenAI by default).

    Raises:
        ImportError: ``llama-index-retrievers-bm25`` is not installed (the ``bench`` extra).
    """
    try:
        from llama_index.retrievers.bm25 import BM25Retriever
    except ImportError as exc:
        raise ImportError(
            "the hybrid peer needs llama-index-retrievers-bm25; pip install 'llamaindex-posfair[bench]'"
        ) from exc
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever

    def build(docs: list[Any], embed_model: Any, top_k: int) -> PeerIndex:
        nodes = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap).get_nodes_from_documents(docs)
        k = min(top_k, len(nodes))
        vector = _vector_index(nodes, embed_model).as_retriever(similarity_top_k=k)
        bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=k)
        fusion = QueryFusionRetriever(
            [vector, bm25],
            similarity_top_k=k,
            num_queries=1,
            mode="reciprocal_rerank",
            use_async=False,
            llm=MockLLM(),
        )
        return PeerIndex(fusion, nodes)

    return build


def posfair_store_recipe(node_parser: Any = None, store_embed_model: Any = None) -> PeerBuilder:
    """Nodes in a ``VectorStoreIndex`` over :class:`~llamaindex_posfair.PosFairVectorStore` (embedded Qdrant Edge).

    Args:
        node_parser: how the passages are cut (default: :class:`~llamaindex_posfair.PosFairNodeParser` of the
            index's embed model: the CLI's nodes).
        store_embed_model: the store's encoder of the sub-chunks (default: the index's embed model, a
            ``PosFairEmbedding``); give one when the index embeds with another class (e.g. ``HuggingFaceEmbedding``),
            so that only the vector store changes.
    """
    from llama_index.core import StorageContext

    from llamaindex_posfair.integrations.node_parser import PosFairNodeParser
    from llamaindex_posfair.integrations.vector_store import PosFairVectorStore
    from qdrant_tools.store import open_store

    def build(docs: list[Any], embed_model: Any, top_k: int) -> PeerIndex:
        store_embed = store_embed_model or embed_model
        parser = node_parser or PosFairNodeParser.from_embed_model(store_embed)
        nodes = parser.get_nodes_from_documents(docs)
        store = PosFairVectorStore("peer", client=open_store(":memory:"), embed_model=store_embed)
        context = StorageContext.from_defaults(vector_store=store)
        index = VectorStoreIndex(nodes, storage_context=context, embed_model=embed_model, show_progress=False)
        retriever = index.as_retriever(similarity_top_k=min(top_k, len(nodes)))
        return PeerIndex(retriever, nodes, vectors=_stored_vectors(store))

    return build


def _stored_vectors(store: Any) -> int:
    """Dense vectors a posfair collection holds: per point its node vector and each multivector's rows."""
    from qdrant_tools import payload as P
    from qdrant_tools.scroll import scroll_pages

    records = [r for page in scroll_pages(store.client, store.collection_name, page=1000) for r in page]
    rows = sum(len(P.posfair_fields(r.payload).get(P.SUBCHUNK_SPANS) or []) for r in records)
    multivectors = len(store.client.get_collection(store.collection_name).config.params.vectors) - 1
    return len(records) + rows * multivectors


def llamaindex_peers(embed_model: Any, top_k: int = DEFAULT_TOP_K) -> list[LlamaIndexPeer]:
    """The five peers, in table order: defaults, 256/20, 128/20, sentence window, hybrid 128/20."""
    specs: list[tuple[str, PeerBuilder, dict[str, Any]]] = [
        ("llamaindex-default (SentenceSplitter 1024/200)", splitter_recipe(), {"chunk": "1024/200"}),
        ("SentenceSplitter 256/20", splitter_recipe(256, 20), {"chunk": "256/20"}),
        ("SentenceSplitter 128/20", splitter_recipe(128, 20), {"chunk": "128/20"}),
        ("SentenceWindow (window 3)", sentence_window_recipe(3), {"chunk": "sentence", "window": 3}),
        ("LlamaIndex hybrid (dense + BM25, RRF) 128/20", hybrid_recipe(128, 20), {"chunk": "128/20", "bm25": True}),
    ]
    return [LlamaIndexPeer(name, embed_model, recipe, top_k, params=params) for name, recipe, params in specs]


def bundled_minilm_embedding(**kwargs: Any) -> Any:
    """The bundled all-MiniLM-L6-v2 as a LlamaIndex user loads it: ``HuggingFaceEmbedding(model_name=FOLDER)``.

    Args:
        **kwargs: further ``HuggingFaceEmbedding`` settings (``device``, ``embed_batch_size``, ...);
            ``max_length`` defaults to the model's own (256).

    Raises:
        ImportError: ``llama-index-embeddings-huggingface`` is not installed (the ``bench`` extra).
    """
    try:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    except ImportError as exc:
        raise ImportError(
            "the peers' embedding needs llama-index-embeddings-huggingface; pip install 'llamaindex-posfair[bench]'"
        ) from exc
    from llamaindex_posfair.encoders.models import BUNDLED_MINILM, resolve_model_path

    return HuggingFaceEmbedding(model_name=resolve_model_path(BUNDLED_MINILM), **kwargs)
