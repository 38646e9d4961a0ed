"""``posfair train-dump --corpus`` end to end on a tiny BERT: pairs, resume, and the folder in ingest/query."""

from __future__ import annotations

import json

import pytest

from llamaindex_posfair.cli import main

TOPICS = {
    "bees.txt": "Honeybees dance to tell the hive where the flowers grow.",
    "tides.txt": "The moon pulls the oceans and raises two bulges of water.",
    "bread.txt": "A sourdough starter is flour and water full of wild yeast.",
    "stars.txt": "A star burns hydrogen into helium in its hot dense core.",
    "rivers.txt": "Rivers carve valleys as they carry sand down to the sea.",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    for name, sentence in TOPICS.items():
        lines = [f"{sentence[:-1]} in part {i} of this short note." for i in range(12)]
        (folder / name).write_text(" ".join(lines), encoding="utf-8")
    return folder


def _args(corpus, out, *extra):
    return [
        "train-dump",
        "--corpus",
        str(corpus),
        "--save-model",
        str(out),
        "--max-steps",
        "2",
        "--train-batch-size",
        "4",
        "--chunk-tokens",
        "32",
        "--checkpoint-steps",
        "1",
        "--no-progress",
        *extra,
    ]


@pytest.fixture(scope="module")
def trained(tiny_bert_path, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "model"
    assert main(_args(corpus, out, "--model", tiny_bert_path, "--num-tokens", "2")) == 0
    return out


def test_corpus_run_saves_a_dump_model_and_reports_the_pairs_and_the_split(trained):
    from llamaindex_posfair.dump.model import load_dump_model

    report = json.loads((trained / "train_report.json").read_text())
    assert report["train"]["steps"] == 2 and report["passage_tokens"] == 32
    assert not set(report["train_documents"]) & set(report["dev_documents"]) and len(report["dev_documents"]) == 1
    assert 3 * report["train_passages"] < report["pair_statistics"]["pairs"] <= 4 * report["train_passages"]
    assert set(report["eval_after"]) == {"dev, sentence kept", "dev, sentence removed"}
    assert load_dump_model(str(trained), device="cpu").posfair_dump.num_tokens == 2
    assert not (trained / "checkpoints").exists()


def test_a_finished_folder_is_not_trained_again(trained, corpus, tiny_bert_path, capsys):
    assert main(_args(corpus, trained, "--model", tiny_bert_path, "--num-tokens", "2")) == 2
    assert "already holds a trained model" in capsys.readouterr().err


def test_an_interrupted_run_resumes_with_the_same_flags_and_refuses_other_flags(
    corpus, tiny_bert_path, tmp_path, monkeypatch, capsys
):
    import llamaindex_posfair.dump.training as training

    class Stop(Exception):
        pass

    class StopAtTwo:  # raises before step 2's checkpoint is written: checkpoint-1 is the latest
        def __getattr__(self, name):
            return lambda *a, **k: None

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= 2:
                raise Stop

    real = training.train_contrastive
    out, args = tmp_path / "model", _args(corpus, tmp_path / "model", "--model", tiny_bert_path, "--mode", "plain")
    monkeypatch.setattr(training, "train_contrastive", lambda *a, **k: real(*a, **{**k, "callbacks": [StopAtTwo()]}))
    with pytest.raises(Stop):
        main(args)
    monkeypatch.setattr(training, "train_contrastive", real)
    assert main([*args, "--lr", "2e-4"]) == 2
    assert "other settings (training differ)" in capsys.readouterr().err
    assert main(args) == 0
    report = json.loads((out / "train_report.json").read_text())
    assert report["resumed"] and report["train"]["resumed_from"].endswith("checkpoint-1")
    assert report["train"]["steps"] == 2 and not (out / "posfair_dump.json").exists()


def test_corpus_and_data_together_are_a_user_error(corpus, tmp_path, capsys):
    assert main(_args(corpus, tmp_path / "o", "--data", "x.jsonl")) == 2
    assert capsys.readouterr().err.startswith("posfair train-dump: error: --corpus builds training pairs")


def test_missing_corpus_names_the_flag(tmp_path, capsys):
    assert main(_args(tmp_path / "nope", tmp_path / "o", "--no-eval")) == 2
    err = capsys.readouterr().err
    assert err.startswith("posfair train-dump: error: --corpus ") and "does not exist" in err


def test_the_trained_folder_works_in_posfair_ingest_and_query(trained, corpus, tmp_path, capsys):
    store = str(tmp_path / "store")
    common = ["--collection", "c", "--path", store, "--model", str(trained)]
    assert main(["ingest", str(corpus), *common, "--no-progress", "--json"]) == 0
    ingest = json.loads(capsys.readouterr().out)
    assert ingest["chunks_written"] > 0
    assert main(["query", "where do the flowers grow", *common, "--json", "--top-k", "3"]) == 0
    hits = json.loads(capsys.readouterr().out)["results"]
    assert len(hits) == 3 and {h["doc_id"] for h in hits} <= set(TOPICS)


class _Model(list):
    def __init__(self, max_seq_length, max_positions):
        config = type("C", (), {"max_position_embeddings": max_positions})()
        super().__init__([type("T", (), {"auto_model": type("A", (), {"config": config})()})()])
        self.max_seq_length = max_seq_length


@pytest.mark.parametrize(("window", "positions", "expected"), [(256, 512, 260), (512, 512, 512)])
def test_the_prefix_takes_no_room_from_the_text_when_positions_allow(window, positions, expected):
    from llamaindex_posfair.cli.train_dump import _keep_text_window

    model = _Model(window, positions)
    assert _keep_text_window(model, 4) == expected == model.max_seq_length
