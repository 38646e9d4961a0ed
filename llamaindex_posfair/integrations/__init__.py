"""LlamaIndex integrations over posfair's encoders and Qdrant collections.

What each module holds: docs/architecture.md, "The packages" (`integrations`).

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
