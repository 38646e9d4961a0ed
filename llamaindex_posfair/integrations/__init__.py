"""LlamaIndex integrations over posfair's encoders and Qdrant collections.

Modules:
    vector_store  PosFairVectorStore: the LlamaIndex vector store (reading and writing a collection)
    embedding     PosFairEmbedding: the encoder as a LlamaIndex embedding model
    node_parser   PosFairNodeParser: posfair's nodes (deterministic ids) for any LlamaIndex pipeline
    retriever     PosFairRetriever: the default search of a collection ``posfair ingest`` wrote
    rerank        PosFairRerank: node / best sub-chunk / node-weighted scoring of retrieved nodes
    recipe        Recipe: how a collection was written (encoders, layout, default search), read back by every reader
    gate          Gate: may this encoder read or write this collection (one rule for every reader and writer)
    nodes         LlamaIndex nodes <-> posfair points
    filters       MetadataFilters -> one Qdrant filter
    readers       LlamaIndex's file readers for ``posfair ingest``
    encoder_site  an encoder in this process or behind a ``posfair serve`` endpoint
    node_scoring  the scorings ``PosFairRerank`` and serve's rerank share
    adopt         a LlamaIndex ``QdrantVectorStore`` collection into posfair's layout

Qdrant ingestion and search live in the top-level ``qdrant_tools`` package. Names load
lazily, so importing this package does not import LlamaIndex.
"""

from __future__ import annotations

from llamaindex_posfair._lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_MODEL": "llamaindex_posfair.integrations.embedding",
    "PosFairEmbedding": "llamaindex_posfair.integrations.embedding",
    "PosFairRerank": "llamaindex_posfair.integrations.rerank",
    "CalibrationView": "llamaindex_posfair.encoders.view",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
