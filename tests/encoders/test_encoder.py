"""PosFairEncoder behaviour."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from llamaindex_posfair import BUNDLED_MINILM, CalibrationConfig, PosFairEncoder
from llamaindex_posfair.encoders.baskets import baskets_for_batch


@pytest.fixture(scope="module")
def minilm(minilm_path):
    return PosFairEncoder(minilm_path, calibration=CalibrationConfig(basket_size=32), device="cpu", max_length=512)


@pytest.fixture(scope="module")
def minilm_st(minilm_path):
    st = SentenceTransformer(minilm_path, device="cpu")
    st.max_seq_length = 512
    return st


def test_zero_strength_equals_sentence_transformers(minilm, minilm_st, mixed_texts):
    ours = minilm.encode_documents(mixed_texts, calibration=CalibrationConfig(strength=0.0, basket_size=32))
    theirs = minilm_st.encode(mixed_texts, normalize_embeddings=True)
    assert np.abs(ours - theirs).max() <= 1e-6


def test_calibration_off_equals_sentence_transformers(minilm, minilm_st, mixed_texts):
    ours = minilm.encode_documents(mixed_texts, calibration=None)
    theirs = minilm_st.encode(mixed_texts, normalize_embeddings=True)
    assert np.abs(ours - theirs).max() <= 1e-6


@pytest.mark.parametrize("fixture", ["tiny_bert_path", "tiny_qwen3_path"])
def test_zero_strength_equals_sentence_transformers_on_tiny_models(request, fixture, mixed_texts):
    path = request.getfixturevalue(fixture)
    enc = PosFairEncoder(path, calibration=CalibrationConfig(strength=0.0, basket_size=8), device="cpu")
    theirs = SentenceTransformer(path, device="cpu").encode(mixed_texts, normalize_embeddings=True)
    assert np.abs(enc.encode_documents(mixed_texts) - theirs).max() <= 1e-6


def test_bundled_alias_loads_the_shipped_minilm(minilm_st):
    enc = PosFairEncoder(BUNDLED_MINILM, calibration=None, device="cpu")
    assert enc.dimension == 384
    expected = minilm_st.encode(["a small test"], normalize_embeddings=True)
    assert np.abs(enc.encode_queries(["a small test"]) - expected).max() <= 1e-6


def test_pooling_is_detected_from_the_sentence_transformer(minilm, tiny_bert_path, tiny_qwen3_path):
    assert minilm._pooling_for(minilm.calibration) == "mean"
    assert PosFairEncoder(tiny_bert_path, device="cpu")._pooling_for(CalibrationConfig()) == "cls"
    assert PosFairEncoder(tiny_qwen3_path, device="cpu")._pooling_for(CalibrationConfig()) == "last"


def test_calibrate_documents_only_leaves_queries_plain(minilm, mixed_texts):
    cfg = CalibrationConfig(basket_size=32, strength=1.0, calibrate_queries=False)
    plain = minilm.encode_queries(mixed_texts, calibration=None)
    as_queries = minilm.encode_queries(mixed_texts, calibration=cfg)
    as_docs = minilm.encode_documents(mixed_texts, calibration=cfg)
    assert np.abs(as_queries - plain).max() == 0.0
    assert np.abs(as_docs - plain).max() > 1e-3


def test_per_call_config_does_not_change_the_default(minilm, mixed_texts):
    default = minilm.encode_documents(mixed_texts)
    minilm.encode_documents(mixed_texts, calibration=CalibrationConfig(strength=1.0, basket_size=16))
    assert np.array_equal(default, minilm.encode_documents(mixed_texts))


def test_batch_size_does_not_change_embeddings(minilm, mixed_texts):
    one = minilm.encode_documents(mixed_texts, batch_size=1)
    many = minilm.encode_documents(mixed_texts, batch_size=5)
    assert np.abs(one - many).max() <= 1e-5


def test_several_batches_are_formed_longest_first_by_token_count(minilm, monkeypatch):
    texts = ["a" + " " * 400 + "b", "one two three four five six seven eight nine ten", "x y"]  # chars ≠ tokens
    seen = []
    encode_batch = minilm._encode_batch
    monkeypatch.setattr(
        minilm, "_encode_batch", lambda batch, *args: (seen.append(batch), encode_batch(batch, *args))[1]
    )
    minilm.encode_documents(texts, batch_size=1)
    assert seen == [[texts[1]], [texts[0]], [texts[2]]]


def test_token_sorted_batches_still_equal_sentence_transformers(minilm, minilm_st, mixed_texts):
    ours = minilm.encode_documents(mixed_texts, calibration=None, batch_size=2)
    theirs = minilm_st.encode(mixed_texts, normalize_embeddings=True, batch_size=2)
    assert np.abs(ours - theirs).max() <= 1e-6


def test_fingerprint_tracks_settings(minilm):
    assert minilm.fingerprint() != minilm.fingerprint(calibration=None)
    assert minilm.fingerprint() == minilm.fingerprint(calibration=CalibrationConfig(basket_size=32))


def test_count_tokens_counts_before_truncation(minilm):
    long = "word " * 1000
    assert minilm.count_tokens(["hello", long]) == [3, 1002]


def test_empty_input_gives_an_empty_matrix(minilm):
    assert minilm.encode_documents([]).shape == (0, 384)


def test_single_string_is_rejected_with_the_fix(minilm):
    with pytest.raises(TypeError, match=r"wrap it: \[text\]"):
        minilm.encode_documents("not a list")


def test_unknown_backend_is_rejected(minilm_path):
    with pytest.raises(ValueError, match='backend must be "fast" or "reference"'):
        PosFairEncoder(minilm_path, backend="turbo")


def test_unknown_model_names_the_model_and_the_fix(tmp_path):
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(OSError, match="could not load model"):
        PosFairEncoder(missing)


def test_prompt_tokens_can_be_isolated(minilm):
    tok = minilm.tokenizer
    batch = tok(["query: where is the mill", "query: a"], padding=True, return_tensors="pt")
    cfg = CalibrationConfig(isolate=("prompt",), basket_size=2)
    assignment = baskets_for_batch(batch["input_ids"], batch["attention_mask"], tok, cfg, "mean", prompt_length=3)
    assert (assignment.basket_ids[0, :3] == -2).all() and (assignment.basket_ids[0, 3:] >= 0).all()


def test_dump_tokens_are_isolated_by_default(minilm_path, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(minilm_path)
    tok.add_special_tokens({"additional_special_tokens": ["[DUMP_1]", "[DUMP_2]"]})
    ids = tok.convert_tokens_to_ids(["[CLS]", "[DUMP_1]", "[DUMP_2]", "the", "mill", "[SEP]"])
    input_ids = torch.tensor([ids])
    assignment = baskets_for_batch(input_ids, torch.ones_like(input_ids), tok, CalibrationConfig(basket_size=2), "cls")
    assert assignment.basket_ids[0].tolist()[:3] == [-2, -2, -2]
    assert assignment.row_mask[0].tolist() == [True, False, False, False, False, False]


def test_plain_transformers_folder_with_explicit_pooling(tiny_qwen3_path, mixed_texts):
    from pathlib import Path

    hf_path = str(Path(tiny_qwen3_path).parent / "hf")
    cfg = CalibrationConfig(basket_size=8, strength=0.5)
    from_hf = PosFairEncoder(hf_path, pooling="last", calibration=cfg, device="cpu")
    from_st = PosFairEncoder(tiny_qwen3_path, calibration=cfg, device="cpu")
    assert np.abs(from_hf.encode_documents(mixed_texts) - from_st.encode_documents(mixed_texts)).max() <= 1e-6


def test_invalid_pooling_is_named(tiny_qwen3_path):
    from pathlib import Path

    with pytest.raises(ValueError, match='pooling must be "cls", "last", "mean" or None'):
        PosFairEncoder(str(Path(tiny_qwen3_path).parent / "hf"), pooling="max")
