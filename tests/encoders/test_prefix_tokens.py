"""One DUMP-token-id function for the encoders (calibration isolation) and the dump package.

The encoders used to carry their own copy that sorted by vocabulary id and
returned ``[]`` for anything but a bare tokenizer; the dump package ordered by
``k`` and accepted models. Both call sites must now agree on the inputs where
the copies disagreed.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

import llamaindex_posfair.dump
from llamaindex_posfair.calibration.baskets import POLICY_NONE
from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders import baskets as encoder_baskets
from llamaindex_posfair.encoders.prefix_tokens import dump_token_ids, prefix_token_ids


@pytest.fixture
def shuffled_prefix_tokenizer(minilm_path):
    """MiniLM's tokenizer with [DUMP_2], [DUMP_1], [SOFT_1] added in that order (ids out of k order)."""
    tok = AutoTokenizer.from_pretrained(minilm_path)
    tok.add_tokens(["[DUMP_2]", "[DUMP_1]", "[SOFT_1]"], special_tokens=True)
    return tok


def _ids(tok, *tokens):
    return [tok.convert_tokens_to_ids(t) for t in tokens]


def test_dump_ids_are_ordered_by_k_not_by_vocabulary_id(shuffled_prefix_tokenizer):
    tok = shuffled_prefix_tokenizer
    assert dump_token_ids(tok) == _ids(tok, "[DUMP_1]", "[DUMP_2]")
    assert prefix_token_ids(tok) == _ids(tok, "[DUMP_1]", "[DUMP_2]", "[SOFT_1]")


@pytest.mark.parametrize(
    "call_site",
    [lambda: encoder_baskets.dump_token_ids, lambda: llamaindex_posfair.dump.dump_token_ids],
    ids=["encoders.baskets", "dump"],
)
def test_both_layers_see_the_same_ids(call_site, shuffled_prefix_tokenizer):
    """Fails on the old copies: the encoders' one sorted by id, the dump one by k."""
    tok = shuffled_prefix_tokenizer
    assert call_site()(tok) == _ids(tok, "[DUMP_1]", "[DUMP_2]")


def test_a_model_wrapper_is_resolved_to_its_tokenizer(shuffled_prefix_tokenizer):
    """The encoders' old copy returned [] for anything that was not a bare tokenizer."""

    class Wrapper:
        tokenizer = shuffled_prefix_tokenizer

    assert dump_token_ids(Wrapper()) == dump_token_ids(shuffled_prefix_tokenizer) != []


def test_assignment_isolates_dump_positions_and_leaves_soft_tokens_as_content(shuffled_prefix_tokenizer):
    tok = shuffled_prefix_tokenizer
    d1, d2, s1 = _ids(tok, "[DUMP_1]", "[DUMP_2]", "[SOFT_1]")
    ids = torch.tensor([[tok.cls_token_id, d1, d2, s1, 2000, 2001, tok.sep_token_id]])
    assignment = encoder_baskets.baskets_for_batch(ids, torch.ones_like(ids), tok, CalibrationConfig(), "cls")
    by_position = dict(zip(ids[0].tolist(), (assignment.iso_mode[0] != POLICY_NONE).tolist()))
    assert by_position[d1] and by_position[d2] and not by_position[s1]
