"""Turn a SentenceTransformer into a DUMP-prefixed one; save and load it.

A DUMP model is a *stock* SentenceTransformer: the prefix lives in the
tokenizer (see :mod:`llamaindex_posfair.dump.tokens`) and in K new rows of the
input embedding matrix, so ``SentenceTransformer(path)`` reloads it without
``trust_remote_code`` and applies the prefix inside its own tokenisation.
``posfair_dump.json`` next to the weights records ``K`` and the mode.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from llamaindex_posfair.dump.config import DumpConfig, read_dump_config, read_dump_record, save_dump_config
from llamaindex_posfair.dump.tokens import add_prefix_tokens
from llamaindex_posfair.encoders.prefix_tokens import prefix_token_ids


def _transformer_module(model: Any) -> Any:
    first = model[0]
    if getattr(first, "auto_model", None) is None or getattr(first, "tokenizer", None) is None:
        raise TypeError(
            f"the first module of the SentenceTransformer must be a Transformer with a tokenizer, got "
            f"{type(first).__name__}; DUMP prefixes need a text transformer backbone"
        )
    return first


def input_embeddings(model: Any) -> torch.nn.Embedding:
    """The input (word) embedding matrix of a SentenceTransformer's backbone."""
    return _transformer_module(model).auto_model.get_input_embeddings()


def init_prefix_rows(weight: torch.Tensor, num_vocab: int, config: DumpConfig, tokenizer: Any = None) -> torch.Tensor:
    """Initial values of the K prefix rows (pure: returns a new ``[K, dim]`` tensor).

    * ``full`` / ``dump_only``: mean of the first ``num_vocab`` rows plus noise
      of ``init_noise`` times the per-dimension std (breaks the K-fold symmetry).
    * ``random_prefix``: ``N(mean, std)`` per dimension — vocabulary scale, no content.
    * ``soft_prompt``: the embeddings of the first K tokens of
      ``config.soft_prompt_text`` (cycled if shorter).

    Args:
        weight: The embedding matrix (rows ``>= num_vocab`` are ignored).
        num_vocab: Number of original vocabulary rows.
        config: The prefix settings.
        tokenizer: Needed for ``soft_prompt`` (the original tokenizer).

    Returns:
        A float tensor ``[K, dim]`` in ``weight``'s dtype.
    """
    vocab = weight[:num_vocab].detach().float()
    mean, std = vocab.mean(dim=0), vocab.std(dim=0)
    gen = torch.Generator().manual_seed(config.seed)
    noise = torch.randn(config.num_tokens, vocab.shape[1], generator=gen)
    if config.mode in ("full", "dump_only"):
        rows = mean + config.init_noise * std * noise
    elif config.mode == "random_prefix":
        rows = mean + std * noise
    else:  # soft_prompt
        if tokenizer is None:
            raise ValueError("init_prefix_rows needs the tokenizer in mode 'soft_prompt', got tokenizer=None")
        ids = tokenizer(config.soft_prompt_text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"soft_prompt_text {config.soft_prompt_text!r} has no tokens; use a longer text")
        picked = [ids[i % len(ids)] for i in range(config.num_tokens)]
        rows = vocab[torch.tensor(picked)]
    return rows.to(weight.dtype)


def add_dump_prefix(model: Any, config: DumpConfig | None = None) -> Any:
    """Add ``K`` trainable prefix tokens to a SentenceTransformer, in place.

    Adds ``[DUMP_1]..[DUMP_K]`` (``[SOFT_k]`` for the soft-prompt control) to the tokenizer, which then prepends
    them to every text (:func:`~llamaindex_posfair.dump.tokens.add_prefix_tokens`), resizes the embedding matrix and
    initialises the new rows (:func:`init_prefix_rows`); pooling is untouched (docs/dump.md, "How the prefix is
    applied").

    Args:
        model: A ``SentenceTransformer`` whose first module is a Transformer.
        config: The prefix settings (default ``DumpConfig()``: K = 4, mode ``full``).

    Returns:
        The same model object (for chaining); ``model.posfair_dump`` holds the config.

    Raises:
        ValueError: If the model already has a prefix.

    Example:
        >>> from sentence_transformers import SentenceTransformer
        >>> from llamaindex_posfair import bundled_model_path  # doctest: +SKIP
        >>> model = add_dump_prefix(SentenceTransformer(bundled_model_path()), DumpConfig(num_tokens=4))  # doctest: +SKIP
        >>> model.tokenizer.convert_ids_to_tokens(model.tokenize(["hi"])["input_ids"][0])  # doctest: +SKIP
        ['[CLS]', '[DUMP_1]', '[DUMP_2]', '[DUMP_3]', '[DUMP_4]', 'hi', '[SEP]']
    """
    config = config or DumpConfig()
    module = _transformer_module(model)
    old_tokenizer = module.tokenizer
    if prefix_token_ids(old_tokenizer):
        raise ValueError(
            f"model already has prefix tokens {prefix_token_ids(old_tokenizer)}; "
            "load a saved DUMP model with load_dump_model(path) instead of prefixing it again"
        )
    new_tokenizer = add_prefix_tokens(
        old_tokenizer, config.token_strings, split_special_tokens=config.split_special_tokens
    )
    embedding = module.auto_model.get_input_embeddings()
    num_vocab = embedding.weight.shape[0]
    ids = prefix_token_ids(new_tokenizer)
    needed = max(max(ids) + 1, len(new_tokenizer))
    if needed > num_vocab:
        module.auto_model.resize_token_embeddings(needed, mean_resizing=False)
        embedding = module.auto_model.get_input_embeddings()
    base_rows = min(ids)  # rows below the first prefix id are the original vocabulary
    with torch.no_grad():
        rows = init_prefix_rows(embedding.weight, base_rows, config, tokenizer=old_tokenizer)
        embedding.weight[torch.tensor(ids)] = rows.to(embedding.weight.device)
    module.processor = new_tokenizer
    model.posfair_dump = config
    return model


def save_dump_model(model: Any, path: str | os.PathLike[str], extra: dict[str, Any] | None = None) -> Path:
    """Save a DUMP model so that ``SentenceTransformer(path)`` reloads it, prefix included.

    Args:
        model: A model prepared by :func:`add_dump_prefix` (and possibly trained).
        path: Output folder.
        extra: Optional record stored under ``"extra"`` in ``posfair_dump.json``.

    Returns:
        The output folder.
    """
    config = getattr(model, "posfair_dump", None)
    if not isinstance(config, DumpConfig):
        raise ValueError(
            "model has no DUMP prefix (model.posfair_dump is missing); call add_dump_prefix(model, config) first"
        )
    out = Path(path)
    model.save(str(out))
    save_dump_config(out, config, prefix_token_ids(model.tokenizer), extra=extra)
    return out


def load_dump_model(path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """Load a saved DUMP model (equivalent to ``SentenceTransformer(path)``).

    Also sets ``model.posfair_dump`` from ``posfair_dump.json`` and checks that
    the tokenizer really applies the recorded prefix exactly once.

    Args:
        path: A folder written by :func:`save_dump_model`.
        **kwargs: Passed to ``SentenceTransformer`` (``device``, ``model_kwargs`` ...).

    Returns:
        The ``SentenceTransformer``.

    Raises:
        ValueError: If the folder has no ``posfair_dump.json`` or its tokenizer
            does not apply the recorded prefix.

    Example:
        >>> model = load_dump_model("runs/minilm-dump")  # doctest: +SKIP
        >>> model.posfair_dump.num_tokens  # doctest: +SKIP
        4
    """
    from sentence_transformers import SentenceTransformer

    config = read_dump_config(path)
    if config is None:
        raise ValueError(
            f"{path} has no posfair_dump.json, so it is not a DUMP model; load it with SentenceTransformer(path)"
        )
    model = SentenceTransformer(str(path), **kwargs)
    record = read_dump_record(path) or {}
    ids = prefix_token_ids(model.tokenizer)
    if ids != record.get("token_ids"):
        raise ValueError(
            f"{path}: tokenizer prefix ids {ids} differ from posfair_dump.json {record.get('token_ids')}; "
            "the folder was edited after saving — re-save it with save_dump_model"
        )
    probe = model.preprocess(["probe"])["input_ids"][0].tolist()
    if [t for t in probe if t in ids] != ids:
        raise ValueError(
            f"{path}: the tokenizer does not prepend the prefix {ids} (got ids {probe}); "
            "tokenizer_config.json must name tokenizer_class 'TokenizersBackend'"
        )
    model.posfair_dump = config
    return model
