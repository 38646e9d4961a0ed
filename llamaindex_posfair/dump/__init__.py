"""Trainable ``[DUMP_k]`` prefix tokens for dense retrieval encoders (docs/methods.md part B).

A DUMP model is a stock SentenceTransformer whose tokenizer prepends
``[DUMP_1]..[DUMP_K]`` to every text, so ``SentenceTransformer(path)``,
``PosFairEncoder``, the LlamaIndex components and ``posfair ingest`` use it
without any special handling. Heavy modules load on first use.

Example:
    >>> from sentence_transformers import SentenceTransformer  # doctest: +SKIP
    >>> from llamaindex_posfair.dump import DumpConfig, add_dump_prefix, train_dump, load_triples, bundled_split
    >>> model = add_dump_prefix(SentenceTransformer(path), DumpConfig(num_tokens=4, mode="full"))  # doctest: +SKIP
    >>> train_dump(model, load_triples(bundled_split("train")))  # doctest: +SKIP
    >>> save_dump_model(model, "runs/minilm-dump")  # doctest: +SKIP
"""

from __future__ import annotations

from llamaindex_posfair._lazy import lazy_exports

_EXPORTS = {
    "DumpConfig": "llamaindex_posfair.dump.config",
    "DumpTrainingConfig": "llamaindex_posfair.dump.config",
    "DUMP_MODES": "llamaindex_posfair.dump.config",
    "read_dump_config": "llamaindex_posfair.dump.config",
    "dump_token_ids": "llamaindex_posfair.encoders.prefix_tokens",
    "prefix_token_ids": "llamaindex_posfair.encoders.prefix_tokens",
    "add_prefix_tokens": "llamaindex_posfair.dump.tokens",
    "prefix_mask": "llamaindex_posfair.dump.tokens",
    "add_dump_prefix": "llamaindex_posfair.dump.model",
    "save_dump_model": "llamaindex_posfair.dump.model",
    "load_dump_model": "llamaindex_posfair.dump.model",
    "train_dump": "llamaindex_posfair.dump.training",
    "evaluate_retrieval": "llamaindex_posfair.dump.training",
    "load_triples": "llamaindex_posfair.dump.training",
    "Triple": "llamaindex_posfair.dump.training",
    "bundled_split": "llamaindex_posfair.dump.data",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
