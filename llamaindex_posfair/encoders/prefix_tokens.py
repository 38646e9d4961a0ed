"""Which tokens of a tokenizer are ``[DUMP_k]`` / ``[SOFT_k]`` prefix tokens (one home).

The encoders read the ``[DUMP_k]`` ids to isolate those positions during
calibration; the :mod:`llamaindex_posfair.dump` package (which adds and trains
the prefix, a layer above the encoders) reads them to build and check its
models. Both import these functions from here.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["dump_token_ids", "prefix_token_ids"]

_PREFIX_TOKEN_RE = re.compile(r"^\[(DUMP|SOFT)_(\d+)\]$")


def prefix_token_ids(tokenizer: Any, kind: str | None = None) -> list[int]:
    """Ids of the ``[DUMP_k]`` / ``[SOFT_k]`` tokens in a tokenizer, ordered by ``k``.

    Args:
        tokenizer: A Hugging Face tokenizer (anything without
            ``get_added_vocab`` has no prefix).
        kind: ``"DUMP"``, ``"SOFT"`` or None (both).

    Returns:
        The ids, empty for a tokenizer without a prefix; ordered by kind, then
        by ``k`` (not by vocabulary id).

    Example:
        >>> class Tok:
        ...     def get_added_vocab(self):
        ...         return {"[DUMP_2]": 7, "[DUMP_1]": 8, "[SOFT_1]": 9}
        >>> prefix_token_ids(Tok(), kind="DUMP")
        [8, 7]
    """
    vocab = tokenizer.get_added_vocab() if hasattr(tokenizer, "get_added_vocab") else {}
    found: list[tuple[str, int, int]] = []
    for token, token_id in vocab.items():
        match = _PREFIX_TOKEN_RE.match(token)
        if match and (kind is None or match.group(1) == kind):
            found.append((match.group(1), int(match.group(2)), int(token_id)))
    return [token_id for _, _, token_id in sorted(found)]


def _resolve_tokenizer(model_or_tokenizer: Any) -> Any:
    if isinstance(model_or_tokenizer, str) or hasattr(model_or_tokenizer, "__fspath__"):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(model_or_tokenizer))
    st = getattr(model_or_tokenizer, "sentence_transformer", None)
    if st is not None and st is not model_or_tokenizer:
        return st.tokenizer
    inner = getattr(model_or_tokenizer, "tokenizer", None)
    return inner if inner is not None and inner is not model_or_tokenizer else model_or_tokenizer


def dump_token_ids(model_or_tokenizer: Any) -> list[int]:
    """Ids of ``[DUMP_1]..[DUMP_K]``, ordered by ``k``: the positions attention calibration isolates.

    Accepts a HF tokenizer, a ``SentenceTransformer``, a ``PosFairEncoder``
    (anything with ``.sentence_transformer`` or ``.tokenizer``) or a model
    folder. Soft-prompt tokens (``[SOFT_k]``) are content, not dump positions,
    and are not returned. A plain model gives ``[]``.

    Example:
        >>> from llamaindex_posfair import bundled_model_path  # doctest: +SKIP
        >>> dump_token_ids(bundled_model_path())  # doctest: +SKIP
        []
    """
    return prefix_token_ids(_resolve_tokenizer(model_or_tokenizer), kind="DUMP")
