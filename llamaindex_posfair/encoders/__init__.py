"""Encoders: load a model, tokenise, run the calibrated forward, pool."""

from llamaindex_posfair.encoders.encoder import BUNDLED_MINILM, DEFAULT, PosFairEncoder, bundled_model_path

__all__ = ["BUNDLED_MINILM", "DEFAULT", "PosFairEncoder", "bundled_model_path"]
