"""Prefix placement at the token-id level (tokenizer only, real MiniLM vocabulary)."""

from __future__ import annotations

import pytest

from llamaindex_posfair.dump.tokens import add_prefix_tokens, prefix_mask
from llamaindex_posfair.encoders.prefix_tokens import dump_token_ids
from tests.dump.conftest import count_prefix_runs

DUMP = ["[DUMP_1]", "[DUMP_2]", "[DUMP_3]", "[DUMP_4]"]


def test_prefix_sits_after_cls_exactly_once(dump_tokenizer, minilm_tokenizer):
    ids = dump_tokenizer("where do rivers meet the sea")["input_ids"]
    plain = minilm_tokenizer("where do rivers meet the sea")["input_ids"]
    assert ids == [plain[0], *dump_token_ids(dump_tokenizer), *plain[1:]]


def test_dump_ids_are_the_k_new_ids_in_order(dump_tokenizer, minilm_tokenizer):
    assert dump_token_ids(dump_tokenizer) == [len(minilm_tokenizer) + i for i in range(4)]


def test_plain_tokenizer_has_no_dump_ids(minilm_tokenizer):
    assert dump_token_ids(minilm_tokenizer) == []


def test_truncation_keeps_the_prefix_and_the_final_sep(dump_tokenizer):
    ids = dump_tokenizer("word " * 300, truncation=True, max_length=12)["input_ids"]
    dump = dump_token_ids(dump_tokenizer)
    assert len(ids) == 12
    assert ids[1:5] == dump and ids[-1] == dump_tokenizer.sep_token_id
    assert count_prefix_runs(ids, dump) == 1


def test_literal_prefix_text_does_not_add_a_second_prefix(dump_tokenizer):
    ids = dump_tokenizer("[DUMP_1] [DUMP_2] [DUMP_3] [DUMP_4] hello")["input_ids"]
    assert sum(i in dump_token_ids(dump_tokenizer) for i in ids) == 4


def test_batch_with_padding_prefixes_every_row_once(dump_tokenizer):
    batch = dump_tokenizer(["a", "a much longer second text"], padding=True)
    dump = dump_token_ids(dump_tokenizer)
    assert [count_prefix_runs(row, dump) for row in batch["input_ids"]] == [1, 1]


def test_pair_inputs_get_one_prefix_before_the_first_text(dump_tokenizer):
    ids = dump_tokenizer("query", "document")["input_ids"]
    assert ids[1:5] == dump_token_ids(dump_tokenizer) and count_prefix_runs(ids, dump_token_ids(dump_tokenizer)) == 1


def test_prefixing_a_prefixed_tokenizer_is_refused(dump_tokenizer):
    with pytest.raises(ValueError, match="already has prefix tokens"):
        add_prefix_tokens(dump_tokenizer, ["[DUMP_1]"])


def test_saved_tokenizer_reloads_with_the_prefix(dump_tokenizer, tmp_path):
    from transformers import AutoTokenizer

    dump_tokenizer.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again("hello world")["input_ids"] == dump_tokenizer("hello world")["input_ids"]


def test_prefix_mask_marks_only_prefix_positions(dump_tokenizer):
    ids = dump_tokenizer(["hi there"], return_tensors="pt")["input_ids"]
    assert prefix_mask(ids, dump_token_ids(dump_tokenizer)).tolist() == [
        [False, True, True, True, True, False, False, False]
    ]


def test_decoder_without_bos_gets_the_prefix_first_and_keeps_eos_last(minilm_tokenizer):
    from tokenizers import processors
    from transformers import AutoTokenizer

    # A decoder-style tokenizer: no leading special token, EOS appended (as Qwen3-Embedding's).
    decoder = AutoTokenizer.from_pretrained(minilm_tokenizer.name_or_path)
    decoder._tokenizer.post_processor = processors.TemplateProcessing(
        single="$A [SEP]", special_tokens=[("[SEP]", 102)]
    )
    tok = add_prefix_tokens(decoder, ["[DUMP_1]", "[DUMP_2]"])
    ids = tok("hello world")["input_ids"]
    assert ids[:2] == dump_token_ids(tok) and ids[-1] == 102 and count_prefix_runs(ids, dump_token_ids(tok)) == 1


def test_input_tokenizer_is_left_unchanged(minilm_tokenizer, dump_tokenizer):
    assert minilm_tokenizer("hello")["input_ids"] == [101, 7592, 102]
