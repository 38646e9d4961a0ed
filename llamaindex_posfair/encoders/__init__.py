"""Encoders: the encoder spec, loading, tokenising, the calibrated forward, pooling."""

from llamaindex_posfair._lazy import lazy_exports

_EXPORTS = {
    "BUNDLED_MINILM": "llamaindex_posfair.encoders.models",
    "bundled_model_path": "llamaindex_posfair.encoders.models",
    "EncoderSpec": "llamaindex_posfair.encoders.spec",
    "EncoderSet": "llamaindex_posfair.encoders.spec",
    "DEFAULT": "llamaindex_posfair.encoders.encoder",
    "PosFairEncoder": "llamaindex_posfair.encoders.encoder",
    "CalibrationView": "llamaindex_posfair.encoders.view",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
