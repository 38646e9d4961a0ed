"""A saved DUMP model through every component: PosFairEncoder, basket assignment, LlamaIndex, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llamaindex_posfair.dump.tokens import prefix_mask
from llamaindex_posfair.encoders.prefix_tokens import dump_token_ids

pytestmark = pytest.mark.slow
TEXTS = ["what causes the tides", "The moon's gravity pulls on the oceans and raises two bulges of water."]


@pytest.fixture(scope="module")
def st_model(saved_dump_dir):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(saved_dump_dir, device="cpu")


def test_posfair_encoder_without_calibration_equals_sentence_transformers(saved_dump_dir, st_model):
    from llamaindex_posfair import PosFairEncoder

    enc = PosFairEncoder(saved_dump_dir, calibration=None, device="cpu")
    expected = st_model.encode(TEXTS, normalize_embeddings=True)
    assert enc.dump_tokens == 4
    assert np.allclose(enc.encode(TEXTS), expected, atol=1e-5)


def test_basket_assignment_isolates_exactly_the_dump_positions(saved_dump_dir, st_model):
    from llamaindex_posfair import CalibrationConfig
    from llamaindex_posfair.calibration.baskets import ISOLATED
    from llamaindex_posfair.encoders.baskets import baskets_for_batch

    features = st_model.preprocess(["short", "word " * 300])
    assignment = baskets_for_batch(
        features["input_ids"],
        features["attention_mask"],
        st_model.tokenizer,
        CalibrationConfig(basket_size=32, strength=0.5),
        "mean",
    )
    isolated = (assignment.basket_ids == ISOLATED) & features["attention_mask"].bool()
    assert isolated.tolist() == prefix_mask(features["input_ids"], dump_token_ids(st_model)).tolist()


def test_calibrated_dump_encoder_runs_and_changes_long_documents_only(saved_dump_dir):
    from llamaindex_posfair import CalibrationConfig, PosFairEncoder

    enc = PosFairEncoder(saved_dump_dir, calibration=CalibrationConfig(basket_size=32, strength=0.5), device="cpu")
    texts = ["tides", "The moon pulls the sea. " * 40]
    plain, calibrated = enc.encode(texts, calibration=None), enc.encode(texts)
    assert np.allclose(plain[0], calibrated[0], atol=1e-6) and not np.allclose(plain[1], calibrated[1], atol=1e-4)


def test_llamaindex_embedding_uses_the_prefix_transparently(saved_dump_dir, st_model):
    from llamaindex_posfair import PosFairEmbedding

    embed = PosFairEmbedding(model_name=saved_dump_dir, calibration=None, device="cpu")
    got = np.asarray(embed.get_text_embedding(TEXTS[1]))
    assert embed.encoder.dump_tokens == 4
    assert np.allclose(got, st_model.encode([TEXTS[1]], normalize_embeddings=True)[0], atol=1e-5)


def test_reranker_with_a_dump_model_puts_the_answer_first(saved_dump_dir):
    from llama_index.core.schema import NodeWithScore, TextNode

    from llamaindex_posfair import PosFairRerank

    rerank = PosFairRerank(top_n=2, model_name=saved_dump_dir, calibration=None, device="cpu")
    nodes = [
        NodeWithScore(node=TextNode(text=t), score=0.0)
        for t in (
            "Cats sleep twelve to sixteen hours a day.",
            TEXTS[1],
            "Bread goes stale as its starch recrystallises.",
        )
    ]
    out = rerank.postprocess_nodes(nodes, query_str=TEXTS[0])
    assert out[0].node.text == TEXTS[1]


def test_posfair_ingest_accepts_a_dump_model(saved_dump_dir, tmp_path, capsys):
    from llamaindex_posfair.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tides.txt").write_text(TEXTS[1])
    (docs / "cats.txt").write_text("Cats sleep twelve to sixteen hours a day.")
    store = str(tmp_path / "q")
    rc = main(
        [
            "ingest",
            str(docs),
            "--collection",
            "d",
            "--path",
            store,
            "--model",
            saved_dump_dir,
            "--no-calibration",
            "--no-progress",
            "--json",
        ]
    )
    assert rc == 0 and json.loads(capsys.readouterr().out)["chunks_written"] == 2


def test_train_dump_cli_trains_saves_and_reports(tmp_path, capsys):
    from sentence_transformers import SentenceTransformer

    from llamaindex_posfair.cli import main
    from llamaindex_posfair.dump.data import bundled_split

    lines = bundled_split("train").read_text().splitlines()
    data, held = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    data.write_text("\n".join(lines[:8]) + "\n")
    held.write_text("\n".join(lines[8:14]) + "\n")
    out = tmp_path / "model"
    rc = main(
        [
            "train-dump",
            "--save-model",
            str(out),
            "--data",
            str(data),
            "--eval",
            str(held),
            "--train-batch-size",
            "4",
            "--max-steps",
            "2",
            "--num-tokens",
            "2",
            "--mode",
            "dump_only",
            "--no-progress",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["train"]["steps"] == 2
    assert {"eval_base", "eval_before", "eval_after"} <= set(report)
    assert len(dump_token_ids(SentenceTransformer(str(out), device="cpu"))) == 2


def test_train_dump_cli_rejects_bad_k_before_loading_anything(tmp_path, capsys):
    from llamaindex_posfair.cli import main

    assert main(["train-dump", "--save-model", str(tmp_path / "m"), "--num-tokens", "0"]) == 2
    assert "num_tokens must be an integer" in capsys.readouterr().err
