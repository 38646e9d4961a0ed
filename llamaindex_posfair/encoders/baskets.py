"""Turn a tokenised batch and a :class:`CalibrationConfig` into a basket assignment."""

from __future__ import annotations

from typing import Any

import torch

from llamaindex_posfair.calibration.baskets import (
    POLICY_EQUAL,
    POLICY_FIXED,
    POLICY_NONE,
    POLICY_ORIGINAL,
    BasketAssignment,
    assign_baskets,
)
from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.prefix_tokens import dump_token_ids

__all__ = ["ST_POOLING", "baskets_for_batch", "pooling_from_sentence_transformer"]

#: sentence-transformers ``Pooling.pooling_mode`` -> our pooling name.
ST_POOLING = {
    "cls": "cls",
    "lasttoken": "last",
    "mean": "mean",
    "weightedmean": "mean",
    "mean_sqrt_len_tokens": "mean",
}


def pooling_from_sentence_transformer(st_model: Any) -> str | None:
    """Read the pooling of a SentenceTransformer from its ``Pooling`` module.

    Returns ``"cls"``, ``"last"``, ``"mean"``, or ``None`` when there is no
    Pooling module. Raises ``ValueError`` for a pooling calibration cannot serve.
    """
    for module in st_model.modules():
        mode = getattr(module, "pooling_mode", None)
        if mode is None:
            continue
        modes = (mode,) if isinstance(mode, str) else tuple(mode)
        if len(modes) != 1 or modes[0] not in ST_POOLING:
            raise ValueError(
                f"the model pools with {mode!r}; calibration supports 'cls', 'lasttoken' and mean-type "
                "pooling. Pass calibration=None, or set CalibrationConfig(pooling=...) explicitly"
            )
        return ST_POOLING[modes[0]]
    return None


def _kind_token_ids(tokenizer: Any, kind: str) -> list[int]:
    attr = {"cls": "cls_token_id", "bos": "bos_token_id", "sep": "sep_token_id", "eos": "eos_token_id"}.get(kind)
    if attr is not None:
        value = getattr(tokenizer, attr, None)
        return [] if value is None else [int(value)]
    if kind == "dump":
        return dump_token_ids(tokenizer)
    return []


def _policy_code(policy) -> tuple[int, float]:
    if policy == "equal":
        return POLICY_EQUAL, 0.0
    if policy == "original":
        return POLICY_ORIGINAL, 0.0
    return POLICY_FIXED, float(policy)


def baskets_for_batch(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    tokenizer: Any,
    config: CalibrationConfig,
    pooling: str,
    prompt_length: int | None = None,
) -> BasketAssignment:
    """Build the :class:`BasketAssignment` for one padded batch.

    Args:
        input_ids: ``[B, L]`` token ids.
        attention_mask: ``[B, L]`` 1 for tokens, 0 for padding (left or right).
        tokenizer: the model's tokenizer (special-token ids, added vocabulary).
        config: the calibration settings.
        pooling: ``"cls"``, ``"last"`` or ``"mean"``.
        prompt_length: tokens of an instruction prompt at the start of every
            sequence (counted from the first valid token), isolated if the config
            isolates ``"prompt"``.
    """
    valid = attention_mask.bool()
    batch, length = valid.shape
    mode = torch.zeros(batch, length, dtype=torch.long)
    value = torch.zeros(batch, length, dtype=torch.float32)
    ids = input_ids.cpu()
    valid_cpu = valid.cpu()
    first = valid_cpu.float().argmax(-1)
    for kind in config.isolated_kinds(pooling):
        code, fixed = _policy_code(config.policy_for(kind))
        if kind == "prompt":
            if not prompt_length:
                continue
            positions = torch.arange(length).view(1, -1)
            hit = (positions >= first.view(-1, 1)) & (positions < first.view(-1, 1) + prompt_length)
        else:
            token_ids = _kind_token_ids(tokenizer, kind)
            if not token_ids:
                continue
            hit = torch.isin(ids, torch.tensor(token_ids))
        hit &= valid_cpu & (mode == POLICY_NONE)
        mode[hit] = code
        value[hit] = fixed
    if pooling in ("cls", "last"):  # the first or the last valid token of each sequence
        row = first if pooling == "cls" else length - 1 - valid_cpu.flip(-1).float().argmax(-1)
        rows = torch.zeros(batch, length, dtype=torch.bool)
        rows[torch.arange(batch), row] = True
    elif pooling == "mean":
        rows = valid_cpu.clone()
    else:
        raise ValueError(f'pooling must be "cls", "last" or "mean", got {pooling!r}')
    return assign_baskets(
        valid_cpu,
        mode,
        value,
        rows,
        basket_size=config.basket_size,
        layout=config.basket_layout,
        skip_single_basket=config.skip_single_basket,
        all_rows=pooling == "mean",
        weighting=config.basket_weighting,
        length_reference=config.length_reference,
    )
