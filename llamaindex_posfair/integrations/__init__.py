"""LlamaIndex integrations: ``PosFairEmbedding`` (index time) and ``PositionFairRerank`` (query time).

Qdrant ingestion lives in the top-level ``qdrant_tools`` package.
"""

from llamaindex_posfair.integrations.embedding import DEFAULT_MODEL, PosFairEmbedding, load_encoder
from llamaindex_posfair.integrations.rerank import PositionFairRerank

__all__ = ["DEFAULT_MODEL", "PosFairEmbedding", "PositionFairRerank", "load_encoder"]
