"""A DUMP model built on real MiniLM: prefix placement in sentence-transformers, save/load, init, pooling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from llamaindex_posfair.dump.config import DumpConfig
from llamaindex_posfair.dump.model import add_dump_prefix, init_prefix_rows, input_embeddings, load_dump_model
from llamaindex_posfair.encoders.prefix_tokens import dump_token_ids, prefix_token_ids
from tests.dump.conftest import count_prefix_runs

pytestmark = pytest.mark.slow
TEXTS = ["what causes the tides", "The moon's gravity pulls on the oceans and raises two bulges of water."]


@pytest.fixture(scope="module")
def reloaded(saved_dump_dir):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(saved_dump_dir, device="cpu")


def test_plain_reload_gives_identical_embeddings(saved_dump_dir, reloaded):
    first = load_dump_model(saved_dump_dir, device="cpu").encode(TEXTS)
    assert np.allclose(first, reloaded.encode(TEXTS), atol=1e-6)


def test_saved_modules_are_stock_sentence_transformers_classes(saved_dump_dir):
    types = [m["type"] for m in json.loads((Path(saved_dump_dir) / "modules.json").read_text())]
    assert types and all(t.startswith("sentence_transformers.") for t in types)


def test_saved_config_records_k_mode_and_ids(saved_dump_dir, reloaded):
    record = json.loads((Path(saved_dump_dir) / "posfair_dump.json").read_text())
    assert (record["dump"]["num_tokens"], record["dump"]["mode"]) == (4, "full")
    assert record["token_ids"] == dump_token_ids(reloaded)


def test_reloaded_tokenize_applies_the_prefix_once_after_cls(reloaded):
    ids = reloaded.preprocess(["hello world"])["input_ids"][0].tolist()
    assert ids[0] == reloaded.tokenizer.cls_token_id and ids[1:5] == dump_token_ids(reloaded)
    assert count_prefix_runs(ids, dump_token_ids(reloaded)) == 1


@pytest.mark.parametrize("prompt", ["query: ", "passage: "])
def test_prompt_goes_after_the_prefix_and_the_prefix_stays_single(reloaded, prompt):
    ids = reloaded.preprocess(["hello world"], prompt=prompt)["input_ids"][0].tolist()
    dump = dump_token_ids(reloaded)
    prompt_ids = reloaded.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert ids[1:5] == dump and ids[5 : 5 + len(prompt_ids)] == prompt_ids
    assert count_prefix_runs(ids, dump) == 1


def test_truncated_text_keeps_prefix_and_sep_in_sentence_transformers(reloaded):
    ids = reloaded.preprocess(["long " * 2000])["input_ids"][0].tolist()
    assert len(ids) == reloaded.max_seq_length
    assert ids[1:5] == dump_token_ids(reloaded) and ids[-1] == reloaded.tokenizer.sep_token_id


def test_query_and_document_encoding_both_carry_the_prefix(reloaded):
    for ids in (
        reloaded.preprocess([TEXTS[0]], task="query")["input_ids"][0],
        reloaded.preprocess([TEXTS[1]], task="document")["input_ids"][0],
    ):
        assert count_prefix_runs(ids.tolist(), dump_token_ids(reloaded)) == 1


def test_prefixing_an_already_prefixed_model_is_refused(reloaded):
    with pytest.raises(ValueError, match="already has prefix tokens"):
        add_dump_prefix(reloaded, DumpConfig())


def test_load_dump_model_rejects_a_plain_model(minilm_path):
    with pytest.raises(ValueError, match="not a DUMP model"):
        load_dump_model(minilm_path)


def test_mean_init_rows_sit_near_the_vocabulary_mean(reloaded, minilm_tokenizer):
    weight = input_embeddings(reloaded).weight.detach()
    vocab = weight[: len(minilm_tokenizer)]
    rows = weight[dump_token_ids(reloaded)]
    spread = (rows - vocab.mean(0)).norm(dim=-1) / vocab.std(0).norm()
    assert bool((spread < 0.05).all()) and bool((spread > 0).all())
    assert torch.unique(rows, dim=0).shape[0] == 4  # noise breaks the K-fold symmetry


def test_soft_prompt_rows_copy_the_prompt_token_embeddings():
    weight = torch.randn(50, 8)
    tok = type("Tok", (), {"__call__": lambda self, text, add_special_tokens: {"input_ids": [3, 7]}})()
    rows = init_prefix_rows(weight, 50, DumpConfig(num_tokens=3, mode="soft_prompt"), tokenizer=tok)
    assert torch.equal(rows, weight[[3, 7, 3]])


def test_random_prefix_rows_have_vocabulary_scale_not_mean():
    weight = torch.randn(2000, 16) * 3 + 1
    rows = init_prefix_rows(weight, 2000, DumpConfig(num_tokens=64, mode="random_prefix"))
    assert abs(float(rows.std()) - 3.0) < 0.5


def test_cls_pooling_reads_position_zero_not_a_dump_position(tiny_bert_path):
    from sentence_transformers import SentenceTransformer

    model = add_dump_prefix(SentenceTransformer(tiny_bert_path, device="cpu"), DumpConfig(num_tokens=2))
    features = model.preprocess(["a short text"])
    with torch.no_grad():
        out = model(features)
    assert torch.allclose(out["sentence_embedding"], out["token_embeddings"][:, 0])
    assert features["input_ids"][0, 0].item() == model.tokenizer.cls_token_id


def test_last_token_pooling_reads_the_eos_with_left_padding(tiny_qwen3_path):
    from sentence_transformers import SentenceTransformer

    model = add_dump_prefix(SentenceTransformer(tiny_qwen3_path, device="cpu"), DumpConfig(num_tokens=2))
    features = model.preprocess(["a", "a noticeably longer text here"])
    with torch.no_grad():
        out = model(features)
    assert features["input_ids"][:, -1].tolist() == [model.tokenizer.eos_token_id] * 2
    assert torch.allclose(out["sentence_embedding"], out["token_embeddings"][:, -1])
    assert [count_prefix_runs(r.tolist(), prefix_token_ids(model.tokenizer)) for r in features["input_ids"]] == [1, 1]
