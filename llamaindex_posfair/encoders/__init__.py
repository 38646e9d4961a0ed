"""Encoders: the encoder spec, loading, tokenising, the calibrated forward, pooling.

Inside the package, imports flow one way: the leaves :mod:`.settings`,
:mod:`.loader`, :mod:`.models`, :mod:`.weights`, :mod:`.prefix_tokens`, :mod:`.precision` <-
:mod:`.runtime` (inference runtimes) <- :mod:`.view` <- :mod:`.spec` <- :mod:`.encoder` (with :mod:`.baskets`). The
package registers the loader :meth:`EncoderSpec.load <llamaindex_posfair.encoders.spec.EncoderSpec.load>` calls
(:mod:`.loader` says why).
"""

from typing import Any

from llamaindex_posfair._lazy import lazy_exports
from llamaindex_posfair.encoders.loader import register_loader

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


def _load_posfair_encoder(spec: Any) -> Any:
    """The loader of :meth:`EncoderSpec.load`: ``PosFairEncoder.from_spec`` (imports torch on first use)."""
    from llamaindex_posfair.encoders.encoder import PosFairEncoder

    return PosFairEncoder.from_spec(spec)


register_loader(_load_posfair_encoder)
