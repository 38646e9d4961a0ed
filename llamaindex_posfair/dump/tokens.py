"""Prefix tokens at the tokenizer level.

The prefix is applied by the tokenizer itself: its ``post_processor`` template becomes
``<leading specials> [DUMP_1..K] $A <trailing specials>`` (BERT: ``[CLS] [DUMP_1..K] x [SEP]``). Every caller that
tokenises through the model's tokenizer gets the prefix exactly once, truncation keeps it, and the saved folder
reloads it without custom code; why: docs/dump.md, "How the prefix is applied". Only fast (``tokenizers``-backed)
tokenizers are supported.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tokenizers import Tokenizer

from llamaindex_posfair.encoders.prefix_tokens import prefix_token_ids

_TEMPLATE_TYPES = {"TemplateProcessing", "BertProcessing", "RobertaProcessing"}


def _rust_tokenizer(tokenizer: Any) -> Tokenizer:
    rust = getattr(tokenizer, "_tokenizer", None)
    if not isinstance(rust, Tokenizer):
        raise TypeError(
            f"tokenizer must be a fast (tokenizers-backed) Hugging Face tokenizer, got {type(tokenizer).__name__}; "
            "load it with AutoTokenizer.from_pretrained(..., use_fast=True) or convert the model's tokenizer first"
        )
    return rust


def _probe(rust: Tokenizer, *texts: str) -> Any:
    """Encode with special tokens, without padding/truncation (copies the Rust tokenizer only if it pads/truncates)."""
    if rust.padding is not None or rust.truncation is not None:
        rust = Tokenizer.from_str(rust.to_str())
        rust.no_padding()
        rust.no_truncation()
    return rust.encode(*texts, add_special_tokens=True)


def _processor_from_json(data: dict[str, Any]) -> Any:
    """A ``tokenizers`` post-processor object from its JSON (the route pickling takes)."""
    from tokenizers import processors

    processor = processors.BertProcessing(("[SEP]", 0), ("[CLS]", 1))
    processor.__setstate__(json.dumps(data).encode("utf-8"))
    return processor


def _template_from_probe(encoding: Any, rust: Tokenizer, prefix: Sequence[str]) -> list[dict[str, Any]]:
    """Template pieces of one probe encoding, with ``prefix`` inserted before sequence A."""
    pieces: list[dict[str, Any]] = []
    previous_seq: object = "start"
    inserted = False
    for token_id, type_id, seq in zip(encoding.ids, encoding.type_ids, encoding.sequence_ids):
        if seq is None:
            pieces.append({"SpecialToken": {"id": rust.id_to_token(token_id), "type_id": int(type_id)}})
            previous_seq = None
            continue
        if seq != previous_seq:
            if seq == 0 and not inserted:
                pieces.extend({"SpecialToken": {"id": tok, "type_id": int(type_id)}} for tok in prefix)
                inserted = True
            pieces.append({"Sequence": {"id": "A" if seq == 0 else "B", "type_id": int(type_id)}})
        previous_seq = seq
    if not inserted:  # pragma: no cover - a tokenizer that drops the text entirely
        raise ValueError("could not locate the text in the tokenizer's output; cannot place the prefix")
    return pieces


def build_prefix_post_processor(tokenizer: Any, prefix: Sequence[str]) -> dict[str, Any]:
    """The JSON of a post-processor that adds ``prefix`` before the text, once.

    Pure with respect to ``tokenizer`` (not modified). The prefix tokens must
    already be in the tokenizer's vocabulary.

    Args:
        tokenizer: A fast Hugging Face tokenizer (with the prefix tokens added).
        prefix: The prefix token strings, in order.

    Returns:
        The ``post_processor`` JSON object for ``tokenizer.json``.
    """
    rust = _rust_tokenizer(tokenizer)
    single = _template_from_probe(_probe(rust, "probe text"), rust, prefix)
    try:
        pair = _template_from_probe(_probe(rust, "probe text", "second text"), rust, prefix)
    except Exception:  # pragma: no cover - tokenizers without pair support
        pair = None
    special_names = {p["SpecialToken"]["id"] for p in single + (pair or []) if "SpecialToken" in p}
    special_tokens = {
        name: {"id": name, "ids": [int(rust.token_to_id(name))], "tokens": [name]} for name in sorted(special_names)
    }
    for name, entry in special_tokens.items():
        if entry["ids"][0] is None:  # pragma: no cover - defensive
            raise ValueError(f"token {name!r} is not in the tokenizer vocabulary")
    template = {
        "type": "TemplateProcessing",
        "single": single,
        "pair": pair or single,
        "special_tokens": special_tokens,
    }

    old = None if rust.post_processor is None else json.loads(rust.post_processor.__getstate__())
    if old is None or old.get("type") in _TEMPLATE_TYPES:
        return template
    if old.get("type") == "Sequence":
        members = [p for p in old["processors"] if p.get("type") not in _TEMPLATE_TYPES]
        return {"type": "Sequence", "processors": members + [template]}
    # e.g. ByteLevel (offset trimming only): keep it, then add the template.
    return {"type": "Sequence", "processors": [old, template]}


def add_prefix_tokens(tokenizer: Any, token_strings: Sequence[str], *, split_special_tokens: bool = True) -> Any:
    """Return a new tokenizer that prefixes every text with ``token_strings``.

    The input tokenizer is not modified. The returned tokenizer is a
    ``TokenizersBackend`` (transformers' generic fast tokenizer) carrying the
    same vocabulary plus the prefix tokens, the same special-token attributes
    and max length, and a post-processor that inserts the prefix after the
    model's leading special token(s) and before the text.

    Args:
        tokenizer: A fast Hugging Face tokenizer without a prefix.
        token_strings: The prefix tokens, e.g. ``("[DUMP_1]", "[DUMP_2]")``.
        split_special_tokens: Tokenise literal special-token strings in the text
            as plain text (so the prefix can never be applied twice).

    Returns:
        The new tokenizer.

    Raises:
        ValueError: If the tokenizer already has prefix tokens.
        TypeError: If the tokenizer is not a fast tokenizer.

    Example:
        >>> from transformers import AutoTokenizer
        >>> from llamaindex_posfair import bundled_model_path  # doctest: +SKIP
        >>> tok = add_prefix_tokens(AutoTokenizer.from_pretrained(bundled_model_path()), ["[DUMP_1]"])  # doctest: +SKIP
        >>> tok.convert_ids_to_tokens(tok("hi")["input_ids"])  # doctest: +SKIP
        ['[CLS]', '[DUMP_1]', 'hi', '[SEP]']
    """
    from transformers import AddedToken
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    if not token_strings:
        raise ValueError("token_strings must name at least one prefix token, got an empty sequence")
    if prefix_token_ids(tokenizer):
        raise ValueError(
            f"tokenizer already has prefix tokens {prefix_token_ids(tokenizer)}; "
            "a DUMP model cannot be prefixed twice — load it as it is"
        )
    new_rust = Tokenizer.from_str(_rust_tokenizer(tokenizer).to_str())  # private copy; the input stays untouched
    new_rust.no_padding()  # transformers sets padding/truncation per call
    new_rust.no_truncation()
    new_rust.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in token_strings])
    new_rust.post_processor = _processor_from_json(build_prefix_post_processor(_Wrap(new_rust), token_strings))

    specials = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
    special_kwargs = {a: str(v) for a in specials if (v := getattr(tokenizer, a, None)) is not None}
    return TokenizersBackend(
        tokenizer_object=new_rust,
        model_max_length=tokenizer.model_max_length,
        padding_side=tokenizer.padding_side,
        truncation_side=tokenizer.truncation_side,
        split_special_tokens=split_special_tokens,
        extra_special_tokens=list(token_strings),
        model_input_names=list(tokenizer.model_input_names),
        **special_kwargs,
    )


class _Wrap:
    """Minimal stand-in exposing ``_tokenizer`` for :func:`build_prefix_post_processor`."""

    def __init__(self, rust: Tokenizer) -> None:
        self._tokenizer = rust


def prefix_mask(input_ids: Any, prefix_ids: Sequence[int]) -> Any:
    """Boolean tensor marking prefix positions in a ``[batch, seq]`` id tensor (pure).

    Example:
        >>> import torch
        >>> prefix_mask(torch.tensor([[101, 7, 8, 5, 102]]), [7, 8]).tolist()
        [[False, True, True, False, False]]
    """
    import torch

    ids = torch.as_tensor(input_ids)
    if not prefix_ids:
        return torch.zeros_like(ids, dtype=torch.bool)
    return torch.isin(ids, torch.tensor(list(prefix_ids), device=ids.device))
