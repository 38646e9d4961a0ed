"""llamaindex-posfair: position-fair retrieval for LlamaIndex and Qdrant.

Heavy modules load on first use, so ``import llamaindex_posfair`` stays fast.
"""

from __future__ import annotations

from llamaindex_posfair._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "CalibrationConfig": "llamaindex_posfair.calibration.config",
    "PosFairEncoder": "llamaindex_posfair.encoders.encoder",
    "BUNDLED_MINILM": "llamaindex_posfair.encoders.models",
    "bundled_model_path": "llamaindex_posfair.encoders.models",
    "EncoderSpec": "llamaindex_posfair.encoders.spec",
    "EncoderSet": "llamaindex_posfair.encoders.spec",
    "CalibrationView": "llamaindex_posfair.encoders.view",
    "PosFairEmbedding": "llamaindex_posfair.integrations.embedding",
    "PositionFairRerank": "llamaindex_posfair.integrations.rerank",
    "PosFairRetriever": "llamaindex_posfair.integrations.retriever",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
