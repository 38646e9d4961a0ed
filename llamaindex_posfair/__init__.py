"""llamaindex-posfair: position-fair retrieval for LlamaIndex and Qdrant.

``__all__`` is the public API the README's examples use; heavy modules load on
first use, so ``import llamaindex_posfair`` stays fast. The package layers are
drawn in ``docs/architecture.md``.
"""

from __future__ import annotations

from llamaindex_posfair._lazy import lazy_exports

__version__ = "0.1.0"

#: The public API (what README.md and docs/*.md import from here), name -> home module.
_PUBLIC = {
    "BUNDLED_MINILM": "llamaindex_posfair.encoders.models",
    "bundled_model_path": "llamaindex_posfair.encoders.models",
    "CalibrationConfig": "llamaindex_posfair.calibration.config",
    "preset": "llamaindex_posfair.calibration.presets",
    "EncoderSpec": "llamaindex_posfair.encoders.spec",
    "PosFairEncoder": "llamaindex_posfair.encoders.encoder",
    "PosFairEmbedding": "llamaindex_posfair.integrations.embedding",
    "PosFairRerank": "llamaindex_posfair.integrations.rerank",
    "PosFairRetriever": "llamaindex_posfair.integrations.retriever",
    "PosFairVectorStore": "llamaindex_posfair.integrations.vector_store",
    "PosFairNodeParser": "llamaindex_posfair.integrations.node_parser",
    "PosFairImageRerank": "llamaindex_posfair.multimodal.rerank",
    "Recipe": "llamaindex_posfair.integrations.recipe",
    "SearchSettings": "qdrant_tools.search",
}

#: Still importable from here, not advertised: the advanced encoder API, whose home is
#: ``llamaindex_posfair.encoders``.
_COMPATIBLE = {
    "EncoderSet": "llamaindex_posfair.encoders.spec",
    "CalibrationView": "llamaindex_posfair.encoders.view",
}

_EXPORTS = {**_PUBLIC, **_COMPATIBLE}

__all__ = sorted(_PUBLIC)

__getattr__ = lazy_exports(__name__, _EXPORTS)
