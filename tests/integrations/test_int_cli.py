"""`posfair ingest` / `posfair query` end to end (fake encoder for logic, real MiniLM in the slow test)."""

from __future__ import annotations

import json
import os

import pytest

from llamaindex_posfair.cli import main
from qdrant_tools.schema import ensure_collection
from qdrant_tools.spec import VectorConfig
from qdrant_tools.store import open_store


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_ingest_then_query_json_ranks_the_right_file(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    rc, out, _ = run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    assert rc == 0 and "5 files seen, 5 new" in out
    rc, out, _ = run(
        capsys, "query", "waggle dance of honeybees", "--collection", "demo", "--path", store, "--json", "--top-k", "3"
    )
    res = json.loads(out)["results"]
    assert rc == 0 and res[0]["doc_id"] == "honeybees.txt" and [r["rank"] for r in res] == [1, 2, 3]
    assert [r["score"] for r in res] == sorted((r["score"] for r in res), reverse=True)


def test_second_ingest_writes_nothing(tmp_path, capsys, fake_cli, example_data):
    args = (
        "ingest",
        str(example_data),
        "--collection",
        "demo",
        "--path",
        str(tmp_path / "q"),
        "--no-progress",
        "--json",
    )
    run(capsys, *args)
    rc, out, _ = run(capsys, *args)
    rep = json.loads(out)
    assert rc == 0 and rep["chunks_written"] == 0 and len(rep["unchanged"]) == 5


def test_ingest_json_is_the_report_dict_plus_storage_and_precision(tmp_path, capsys, fake_cli, example_data):
    from qdrant_tools.report import IngestReport

    store = str(tmp_path / "q")
    rc, out, _ = run(
        capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress", "--json"
    )
    rep = json.loads(out)
    assert rc == 0 and set(rep) == set(IngestReport(collection="demo").to_dict()) | {"storage", "precision"}
    # the sub-chunk layout (default) is stored uncalibrated unless a calibration flag is given
    assert rep["storage"] == store and rep["vectors"] == {"vanilla": fake_cli.encoders[-1].fingerprint()}
    assert len(rep["new"]) == 5 and rep["resumed"] == [] and rep["created_collection"] is True
    assert rep["precision"] == "float32"  # the session pins automatic precision to float32


def test_query_on_vanilla_vector_uses_plain_encoder(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--both-vectors", "--no-progress")
    rc, out, _ = run(
        capsys, "query", "tides", "--collection", "demo", "--path", store, "--vector-name", "vanilla", "--json"
    )
    assert rc == 0 and json.loads(out)["vector"] == "vanilla"
    assert [c for c in fake_cli.calls if c[0] == "query"][-1][2] is None


@pytest.mark.parametrize("flags", [(), ("--no-calibration",)], ids=["no-flag", "no-calibration"])
def test_query_on_a_collection_without_a_recipe_calibrates_unless_told(
    tmp_path, capsys, fake_cli, make_fake, example_data, flags
):
    from llamaindex_posfair import CalibrationConfig, EncoderSpec
    from qdrant_tools.ingest import IngestConfig, ingest_path

    calibration = None if flags else CalibrationConfig()  # what the default of then wrote, or --no-calibration
    store, writer = (
        str(tmp_path / "q"),
        make_fake(dimension=256, max_length=128, spec=EncoderSpec(calibration=calibration)),
    )
    with open_store(store) as client:  # ingest_path records no recipe: a collection written before recipes
        ingest_path(client, "old", example_data, {"v": writer}, IngestConfig(show_progress=False))
    rc, out, err = run(capsys, "query", "tides", "--collection", "old", "--path", store, "--json", *flags)
    assert rc == 0, err
    assert fake_cli.encoders[-1].spec.calibration == calibration and json.loads(out)["results"]


def test_query_rerank_keeps_retrieval_scores(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    rc, out, _ = run(
        capsys, "query", "sourdough starter", "--collection", "demo", "--path", store, "--rerank", "--json"
    )
    doc = json.loads(out)
    assert rc == 0 and doc["reranked"] and all("retrieval_score" in r for r in doc["results"])


def test_locked_embedded_storage_is_reported(tmp_path, capsys, fake_cli, example_data):
    from qdrant_tools.store.lock import FolderLock

    (tmp_path / "q").mkdir()
    holder = FolderLock.acquire(tmp_path / "q")  # a lock outside open_store (which shares a folder in-process)
    try:
        rc, _, err = run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", str(tmp_path / "q"))
    finally:
        holder.release()
    assert rc == 2 and f"is in use by process {os.getpid()}" in err


def test_api_key_over_plain_http_is_refused_and_not_printed(capsys, monkeypatch, fake_cli):
    monkeypatch.setenv("QDRANT_API_KEY", "secret-key-123")
    rc, out, err = run(capsys, "query", "q", "--collection", "demo", "--qdrant-url", "http://localhost:6333")
    assert rc == 2 and "refusing to send $QDRANT_API_KEY over plain http" in err
    assert "secret-key-123" not in out + err


def test_unreachable_server_is_reported(capsys, monkeypatch, fake_cli):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    rc, _, err = run(capsys, "query", "q", "--collection", "demo", "--qdrant-url", "http://127.0.0.1:9")
    assert rc == 2 and "cannot reach Qdrant at http://127.0.0.1:9" in err


def test_schema_mismatch_via_cli_writes_nothing(tmp_path, capsys, fake_cli, example_data):
    c = open_store(tmp_path / "q")
    ensure_collection(c, "demo", [VectorConfig(name="calibrated", size=8)])
    c.close()
    rc, _, err = run(
        capsys, "ingest", str(example_data), "--collection", "demo", "--path", str(tmp_path / "q"), "--preset", "paper"
    )
    c = open_store(tmp_path / "q")
    n = c.count("demo").count
    c.close()
    assert rc == 2 and "has size 8" in err and "produces size 256" in err and n == 0


def test_query_without_storage_says_to_ingest_first(tmp_path, capsys, fake_cli):
    rc, _, err = run(capsys, "query", "q", "--collection", "demo", "--path", str(tmp_path / "none"))
    assert rc == 2 and "run `posfair ingest" in err


def test_query_unknown_collection_lists_existing(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    rc, _, err = run(capsys, "query", "q", "--collection", "nope", "--path", store)
    assert rc == 2 and "collection 'nope' not found (existing: ['demo'])" in err


def test_missing_source_path_is_reported(tmp_path, capsys, fake_cli):
    rc, _, err = run(capsys, "ingest", str(tmp_path / "missing"), "--collection", "demo", "--path", str(tmp_path / "q"))
    assert rc == 2 and "does not exist" in err


def test_invalid_strength_is_reported(tmp_path, capsys, example_data):
    rc, _, err = run(capsys, "ingest", str(example_data), "--path", str(tmp_path / "q"), "--strength", "2")
    assert rc == 2 and "strength must lie in [0, 1], got 2.0" in err


@pytest.mark.slow
def test_unknown_model_is_reported(tmp_path, capsys, example_data):
    rc, _, err = run(capsys, "ingest", str(example_data), "--path", str(tmp_path / "q"), "--model", "no-such/model-xyz")
    assert rc == 2 and "--model 'no-such/model-xyz'" in err


@pytest.mark.slow
def test_readme_quickstart_on_real_minilm(tmp_path, capsys, example_data):
    store = str(tmp_path / "q")
    rc, out, _ = run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    assert rc == 0 and "10 written" in out
    rc, out, err = run(
        capsys,
        "query",
        "Who was the last keeper of the lighthouse?",
        "--collection",
        "demo",
        "--path",
        store,
        "--json",
        "--top-k",
        "3",
    )
    assert rc == 0, err
    res = json.loads(out)["results"]
    assert res[0]["doc_id"] == "lighthouse.md" and any("Ada Pennock" in r["text"] for r in res)


@pytest.mark.slow
def test_a_bf16_collection_ranks_alike_when_queried_in_float32_on_real_minilm(
    tmp_path, capsys, example_data, device_has_bf16
):
    store = str(tmp_path / "q")
    device_has_bf16(True)
    ingest = ("ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress", "--json")
    rc, out, err = run(capsys, *ingest)
    assert rc == 0 and json.loads(out)["precision"] == "bfloat16", err
    questions = ["Who was the last keeper of the lighthouse?", "How do bees share where flowers are?", "spring tides"]
    ranked = {}
    for dtype in ("bfloat16", "float32"):
        for q in questions:
            query = ("query", q, "--collection", "demo", "--path", store, "--json", "--dtype", dtype)
            rc, out, err = run(capsys, *query)
            assert rc == 0, err
            ranked[dtype, q] = [r["point_id"] for r in json.loads(out)["results"]]
    assert all(ranked["bfloat16", q] == ranked["float32", q] for q in questions)


RESULT_KEYS = {"rank", "score", "doc_id", "source", "chunk_index", "start_char", "end_char", "text"}


@pytest.mark.parametrize("jsonl", [True, False])
def test_batch_queries_write_one_json_object_per_query(tmp_path, capsys, fake_cli, example_data, jsonl):
    store = str(tmp_path / "q")
    run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    questions = ["waggle dance of honeybees", "tides and the moon"]
    qfile = tmp_path / ("q.jsonl" if jsonl else "q.txt")
    lines = [json.dumps({"id": f"q{i}", "text": q}) for i, q in enumerate(questions)] if jsonl else questions
    qfile.write_text("\n".join(lines) + "\n")
    out_file = tmp_path / "answers.jsonl"
    rc, _, err = run(
        capsys, "query", "--queries-file", str(qfile), "--collection", "demo", "--path", store, "--top-k", "2",
        "--out", str(out_file),
    )  # fmt: skip
    assert rc == 0, err
    answers = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [a["id"] for a in answers] == (["q0", "q1"] if jsonl else ["1", "2"])
    assert [a["query"] for a in answers] == questions
    assert answers[0]["results"][0]["doc_id"] == "honeybees.txt"
    for a in answers:
        assert [r["rank"] for r in a["results"]] == [1, 2]
        assert all(set(r) >= RESULT_KEYS for r in a["results"])
    assert len(fake_cli.encoders) == 2  # one model load for ingest, one for all the queries


def test_batch_queries_go_to_stdout_without_out(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    (tmp_path / "q.txt").write_text("tides\n\nbees\n")
    rc, out, _ = run(
        capsys, "query", "--queries-file", str(tmp_path / "q.txt"), "--collection", "demo", "--path", store
    )
    assert rc == 0 and [json.loads(line)["query"] for line in out.splitlines()] == ["tides", "bees"]


def test_a_query_and_a_queries_file_together_are_refused(tmp_path, capsys, fake_cli):
    (tmp_path / "q.txt").write_text("tides\n")
    rc, _, err = run(capsys, "query", "tides", "--queries-file", str(tmp_path / "q.txt"))
    assert rc == 2 and "pass either a query or --queries-file, not both" in err


def test_a_bad_jsonl_line_is_named(tmp_path, capsys, fake_cli):
    (tmp_path / "q.jsonl").write_text('{"id": 1}\n')
    rc, _, err = run(capsys, "query", "--queries-file", str(tmp_path / "q.jsonl"))
    assert rc == 2 and "line 1: expected {'id': ..., 'text': ...}" in err


def test_no_subchunks_flag_writes_the_single_vector_layout(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    base = ("ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    rc, _, _ = run(capsys, *base, "--no-subchunks")
    from qdrant_tools.store import open_store

    client = open_store(store)
    vectors = client.get_collection("demo").config.params.vectors
    client.close()
    assert rc == 0 and set(vectors) == {"calibrated"}
    rc, _, err = run(capsys, *base, "--subchunk-tokens", "32")  # the sub-chunk layout must not be mixed into it
    assert rc == 2 and "written with subchunks none, but --subchunk-tokens / --subchunk-overlap / --no-subchunks" in err
    assert "gives SubchunkConfig(max_tokens=32, overlap_sentences=0)" in err


def test_reingest_with_other_vector_flags_is_refused(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    base = ("ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    assert run(capsys, *base)[0] == 0
    assert run(capsys, *base, "--vector-name", "vanilla")[0] == 0
    rc, _, err = run(capsys, *base, "--vector-name", "calibrated")
    assert (
        rc == 2
        and "collection 'demo' was written with vectors ['vanilla'], but --vector-name gives ['calibrated']" in err
    )
    assert "drop --vector-name to use the collection's, or write a new collection" in err


def test_bad_subchunk_budget_names_the_flag(tmp_path, capsys, fake_cli, example_data):
    rc, _, err = run(capsys, "ingest", str(example_data), "--path", str(tmp_path / "q"), "--subchunk-tokens", "2")
    assert rc == 2 and "--subchunk-tokens must be an integer >= 4, got 2" in err


@pytest.mark.parametrize(
    ("flags", "vector"),
    [((), "vanilla"), (("--no-subchunks",), "calibrated"), (("--preset", "paper"), "calibrated")],
)
def test_ingest_calibrates_by_default_only_without_subchunks(tmp_path, capsys, fake_cli, example_data, flags, vector):
    store = str(tmp_path / "q")
    rc, out, _ = run(
        capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress", "--json", *flags
    )
    assert rc == 0 and list(json.loads(out)["vectors"]) == [vector]
    assert (fake_cli.encoders[-1].spec.calibration is None) == (vector == "vanilla")


def _ingest_json(capsys, store, example_data, *flags):
    rc, out, err = run(
        capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress", "--json", *flags
    )
    assert rc == 0, err
    return json.loads(out)


def test_ingest_records_and_reports_the_automatic_precision(tmp_path, capsys, fake_cli, example_data, device_has_bf16):
    from llamaindex_posfair.integrations.recipe import read_recipe

    device_has_bf16(True)
    store = str(tmp_path / "q")
    assert _ingest_json(capsys, store, example_data)["precision"] == "bfloat16"
    client = open_store(store)
    assert read_recipe(client, "demo").encoder_spec().dtype == "bfloat16"
    client.close()
    assert fake_cli.encoders[-1].spec.dtype == "bfloat16"


def test_reingest_on_a_machine_without_bf16_re_embeds_nothing(
    tmp_path, capsys, fake_cli, example_data, device_has_bf16
):
    store = str(tmp_path / "q")
    device_has_bf16(True)
    _ingest_json(capsys, store, example_data)
    device_has_bf16(False)
    rep = _ingest_json(capsys, store, example_data)
    assert rep["precision"] == "bfloat16" and rep["chunks_written"] == 0 and len(rep["unchanged"]) == 5
    assert fake_cli.encoders[-1].spec.dtype == "bfloat16"


def test_dtype_float32_forces_float32_on_a_bf16_machine(tmp_path, capsys, fake_cli, example_data, device_has_bf16):
    device_has_bf16(True)
    rep = _ingest_json(capsys, str(tmp_path / "q"), example_data, "--dtype", "float32")
    assert rep["precision"] == "float32" and fake_cli.encoders[-1].spec.dtype == "float32"


def test_reingest_with_another_dtype_is_refused(tmp_path, capsys, fake_cli, example_data, device_has_bf16):
    store = str(tmp_path / "q")
    device_has_bf16(True)
    _ingest_json(capsys, store, example_data)
    rc, _, err = run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--dtype", "float32")
    assert rc == 2 and "collection 'demo' was written with dtype 'bfloat16', but --dtype gives 'float32'" in err


def test_a_bf16_collection_is_queried_in_float32_with_one_notice(
    tmp_path, capsys, caplog, monkeypatch, fake_cli, example_data, device_has_bf16
):
    import logging

    from llamaindex_posfair.encoders import precision

    store = str(tmp_path / "q")
    device_has_bf16(True)
    _ingest_json(capsys, store, example_data)
    query = ("query", "waggle dance of honeybees", "--collection", "demo", "--path", store, "--json")
    want = [r["point_id"] for r in json.loads(run(capsys, *query)[1])["results"]]
    device_has_bf16(False)
    caplog.set_level(logging.WARNING, logger=precision.__name__)
    monkeypatch.setattr(precision, "_noticed", set())
    rc, out, err = run(capsys, *query)
    rc2, out2, _ = run(capsys, *query)
    assert rc == rc2 == 0, err
    assert fake_cli.encoders[-1].spec.dtype == "float32"
    assert (
        [r["point_id"] for r in json.loads(out)["results"]]
        == want
        == [r["point_id"] for r in json.loads(out2)["results"]]
    )
    notices = [r.getMessage() for r in caplog.records if "rankings agree" in r.getMessage()]
    assert len(notices) == 1 and "written in bfloat16 and is queried in float32" in notices[0]
