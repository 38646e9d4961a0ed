"""Encoders: load a model, tokenise, run the calibrated forward, pool.

Names load their module on first use, so ``encoders.models`` (the default
model name) can be imported without torch.
"""

from __future__ import annotations

from llamaindex_posfair._lazy import lazy_exports

_EXPORTS = {
    "BUNDLED_MINILM": "llamaindex_posfair.encoders.models",
    "DEFAULT": "llamaindex_posfair.encoders.encoder",
    "PosFairEncoder": "llamaindex_posfair.encoders.encoder",
    "bundled_model_path": "llamaindex_posfair.encoders.encoder",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
