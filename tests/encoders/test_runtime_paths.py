"""The exported runtime on every path the encoder runs: ``posfair ingest`` / ``query``, a ``posfair serve`` replica,
and the Ray ingestion's workers.

The encoder is the tiny random BERT of ``tests/conftest.py`` on ONNX Runtime, exported into a fresh cache
(``own_cache``). The serve replica is the real deployment class without Ray (as ``tests/serve/test_ingress.py``
builds it); the Ray ingestion runs its real driver, worker class and writer with the actor pool replaced by the
same worker class called in this process on a pickled copy of what Ray ships (a local Ray cluster costs more
than this module's budget; ``tests/qdrant_tools/test_ray_ingest.py`` runs the pool itself).
"""

from __future__ import annotations

import json
import logging
import pickle
import shutil

import numpy as np
import pytest

from llamaindex_posfair.cli import build_parser, main
from llamaindex_posfair.cli.options import CliError
from llamaindex_posfair.encoders import runtime
from llamaindex_posfair.encoders.spec import EncoderSpec
from qdrant_tools import payload as P
from qdrant_tools.store import open_store

pytest.importorskip("onnxruntime")

TEXTS = ["short", "the river carried silt past old mills", " ".join(["quiet towns toward the sea"] * 20)]


# ---------------------------------------------------------------------- helpers
class Spy:
    """The specs the CLI loads, and the forward passes of exported transformers."""

    def __init__(self, monkeypatch):
        from llamaindex_posfair.cli import options

        self.specs: list[EncoderSpec] = []
        self.exported_passes = 0
        load, forward = options.load_spec, runtime.ExportedTransformer.forward

        def loading(spec, args):
            self.specs.append(spec)
            return load(spec, args)

        def counting(exported, st, features):
            self.exported_passes += 1
            return forward(exported, st, features)

        monkeypatch.setattr(options, "load_spec", loading)
        monkeypatch.setattr(runtime.ExportedTransformer, "forward", counting)


@pytest.fixture
def spy(monkeypatch):
    return Spy(monkeypatch)


@pytest.fixture
def docs(tmp_path, example_data):
    """A copy of examples/data (tests add files to it)."""
    return shutil.copytree(example_data, tmp_path / "docs")


@pytest.fixture(scope="module")
def example_data():
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "examples" / "data"


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def ingest(capsys, command, docs, store, collection, *flags):
    return run(capsys, command, docs, "--collection", collection, "--path", store, "--no-progress", "--json", *flags)


def points(store, collection):
    """``{(doc_id, chunk_index): (payload, {vector name: array})}`` of every point, and the recipe."""
    from llamaindex_posfair.integrations.recipe import read_recipe

    client = open_store(store)
    try:
        out, offset = {}, None
        while True:
            batch, offset = client.scroll(collection, limit=256, offset=offset, with_vectors=True, with_payload=True)
            for p in batch:
                f = P.posfair_fields(p.payload)
                out[(f[P.DOC_ID], f[P.CHUNK_INDEX])] = (p.payload, {k: _array(v) for k, v in p.vector.items()})
            if offset is None:
                return out, read_recipe(client, collection, notice=False)
    finally:
        client.close()


def _array(vector):
    """A dense vector or multivector as an array; a sparse one as the rows of its indices and its values."""
    if hasattr(vector, "indices"):
        return np.array([vector.indices, vector.values], dtype=np.float64)
    return np.asarray(vector)


def assert_same_vectors(got, want, same_payloads=True):
    assert sorted(got) == sorted(want) and len(want) > 5
    for key, (payload, vectors) in want.items():
        assert sorted(got[key][1]) == sorted(vectors)
        if same_payloads:
            assert got[key][0] == payload
        for name, vector in vectors.items():
            np.testing.assert_allclose(got[key][1][name], vector, atol=1e-5, rtol=0, err_msg=f"{key} {name}")


@pytest.fixture
def onnx_store(tmp_path, capsys, docs, tiny_bert_path, own_cache, spy):
    """An embedded store with collection ``c`` ingested by ``posfair ingest --runtime onnx``."""
    store = tmp_path / "q"
    rc, out, err = ingest(capsys, "ingest", docs, store, "c", "--model", tiny_bert_path, "--runtime", "onnx")
    assert rc == 0, err
    assert len(json.loads(out)["new"]) == 5
    return store


# ---------------------------------------------------------------------- posfair ingest / posfair query
def test_ingest_records_onnx_and_stores_torchs_vectors(onnx_store, capsys, docs, tiny_bert_path, own_cache, spy):
    assert [s.runtime for s in spy.specs] == ["onnx"] and spy.exported_passes > 0 and len(own_cache) == 1
    onnx_points, recipe = points(onnx_store, "c")
    assert {name: spec.runtime for name, spec in recipe.vectors.items()} == {"vanilla": "onnx"}
    passes = spy.exported_passes
    rc, _, err = ingest(capsys, "ingest", docs, onnx_store, "t", "--model", tiny_bert_path)
    assert rc == 0, err
    torch_points, torch_recipe = points(onnx_store, "t")
    assert spy.specs[-1].runtime == "torch" and spy.exported_passes == passes
    assert torch_recipe.vectors["vanilla"].fingerprint() != recipe.vectors["vanilla"].fingerprint()
    # same chunks and vectors; the payloads differ only in the fingerprints of the vectors
    assert_same_vectors(onnx_points, torch_points, same_payloads=False)


def test_query_runs_on_the_recorded_runtime(onnx_store, capsys, spy):
    passes = spy.exported_passes
    rc, out, err = run(capsys, "query", "silt and mills", "--collection", "c", "--path", onnx_store, "--json")
    assert rc == 0, err
    assert spy.specs[-1].runtime == "onnx" and spy.exported_passes > passes
    assert json.loads(out)["results"]


def test_query_with_runtime_torch_reads_an_onnx_collection_with_the_same_scores(
    onnx_store, capsys, caplog, monkeypatch, spy
):
    from llamaindex_posfair.encoders import precision

    argv = ("query", "silt and mills", "--collection", "c", "--path", onnx_store, "--json", "--top-k", "100")
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    onnx_scores = {(r["doc_id"], r["chunk_index"]): r["score"] for r in json.loads(out)["results"]}
    passes = spy.exported_passes
    monkeypatch.setattr(precision, "_noticed", set())
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        rc, out, err = run(capsys, *argv, "--runtime", "torch")
    assert rc == 0, err
    assert spy.specs[-1].runtime == "torch" and spy.exported_passes == passes
    notices = [r.getMessage() for r in caplog.records if r.name == precision.__name__]
    assert len(notices) == 1 and "written with runtime onnx in float32 and is queried with runtime torch" in notices[0]
    torch_scores = {(r["doc_id"], r["chunk_index"]): r["score"] for r in json.loads(out)["results"]}
    assert sorted(torch_scores) == sorted(onnx_scores) and len(onnx_scores) > 5
    assert max(abs(torch_scores[k] - onnx_scores[k]) for k in onnx_scores) <= 1e-4


def test_a_later_ingest_without_runtime_keeps_onnx(onnx_store, capsys, docs, spy):
    (docs / "mills.txt").write_text("The old mills along the river ground grain for the quiet towns.")
    passes = spy.exported_passes
    rc, out, err = ingest(capsys, "ingest", docs, onnx_store, "c")
    assert rc == 0, err
    report = json.loads(out)
    assert report["new"] == ["mills.txt"] and len(report["unchanged"]) == 5
    assert spy.specs[-1].runtime == "onnx" and spy.exported_passes > passes
    _, recipe = points(onnx_store, "c")
    assert recipe.vectors["vanilla"].runtime == "onnx"


@pytest.mark.parametrize("command", ["ingest", "ingest-ray"])
def test_runtime_torch_on_a_write_to_an_onnx_collection_is_refused_naming_both(onnx_store, capsys, docs, spy, command):
    (docs / "mills.txt").write_text("The old mills along the river ground grain for the quiet towns.")
    before, _ = points(onnx_store, "c")
    loads = len(spy.specs)
    rc, _, err = ingest(capsys, command, docs, onnx_store, "c", "--runtime", "torch")
    assert rc == 2 and err.startswith(f"posfair {command}: error:"), err
    assert "collection 'c' was written with runtime 'onnx', but --runtime gives 'torch'" in err
    assert "drop --runtime to use the collection's" in err
    assert len(spy.specs) == loads  # refused before the model loads
    after, _ = points(onnx_store, "c")
    assert sorted(after) == sorted(before)


def test_calibration_flags_for_an_onnx_collection_name_its_record(onnx_store, capsys, docs, tiny_bert_path):
    from llamaindex_posfair.cli.options import CliError
    from llamaindex_posfair.cli.serve import config_from_args

    want = "collection 'c' was written with calibration none, but the calibration flags"
    fix = "drop the calibration flags (--preset/--basket-size/--strength/--layers/--no-calibration) to use the collection's"
    for argv in (
        ("ingest", docs, "--collection", "c", "--path", onnx_store, "--preset", "paper"),
        ("query", "silt", "--collection", "c", "--path", onnx_store, "--strength", "0.3"),
    ):
        rc, _, err = run(capsys, *argv)
        assert rc == 2 and want in err and fix in err and "\n" not in err.strip(), err
    args = build_parser().parse_args(["serve", "--collection", "c", "--path", str(onnx_store), "--preset", "paper"])
    with pytest.raises(CliError, match=want):
        config_from_args(args)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("ingest", "{docs}", "--collection", "n", "--runtime", "onnx", "--model", "{model}", "--no-subchunks"),
         "--runtime onnx runs the plain encoder only, and calibration is on: calibration needs attention hooks, "
         "which only --runtime torch has; pass --no-calibration for the plain encoder, or --runtime torch to "
         "calibrate"),
        (("ingest", "{docs}", "--collection", "n", "--runtime", "openvino", "--model", "{model}", "--both-vectors"),
         "--both-vectors stores a calibrated vector, which --runtime openvino cannot compute"),
        (("ingest", "{docs}", "--collection", "c", "--device", "cuda"),
         "--runtime onnx runs on the CPU, got --device cuda; pass --device cpu (or drop --device)"),
        (("query", "silt", "--collection", "c", "--dtype", "bfloat16"),
         "--runtime onnx computes in float32, got --dtype bfloat16; pass --dtype float32 (or drop --dtype), "
         "or --runtime torch to compute in bfloat16"),
        (("ingest-ray", "{docs}", "--collection", "c", "--gpus-per-worker", "1"),
         "--gpus-per-worker 1 puts each worker's encoder on a GPU, but runtime 'onnx' runs on the CPU; "
         "pass --gpus-per-worker 0"),
    ],
)  # fmt: skip
def test_settings_an_exported_runtime_cannot_run_are_named_by_their_flags(
    onnx_store, capsys, docs, tiny_bert_path, spy, argv, message
):
    loads = len(spy.specs)
    argv = [str(a).format(docs=docs, model=tiny_bert_path) for a in argv]
    rc, _, err = run(capsys, *argv, "--path", onnx_store)
    assert rc == 2 and err.startswith(f"posfair {argv[0]}: error: {message}"), err
    assert len(spy.specs) == loads  # refused before the model loads


# ---------------------------------------------------------------------- posfair serve's replica (no Ray cluster)
def test_serve_flags_and_collection_carry_onnx_to_the_replicas_config(onnx_store, tiny_bert_path):
    from llamaindex_posfair.cli.serve import config_from_args

    by_flags = config_from_args(build_parser().parse_args(["serve", "--model", tiny_bert_path, "--runtime", "onnx"]))
    by_collection = config_from_args(
        build_parser().parse_args(["serve", "--collection", "c", "--path", str(onnx_store)])
    )
    for config in (by_flags, by_collection):
        shipped = pickle.loads(pickle.dumps(config))  # what Ray hands each replica
        assert shipped.encoder.runtime == "onnx" and shipped.encoder.weights is not None
    _, recipe = points(onnx_store, "c")
    assert by_collection.encoder.fingerprint() == recipe.vectors["vanilla"].fingerprint()
    with pytest.raises(CliError, match="--num-gpus 1 reserves GPUs for each text replica, but runtime 'onnx'"):
        config_from_args(build_parser().parse_args(["serve", "--collection", "c", "--path", str(onnx_store),
                                                    "--num-gpus", "1"]))  # fmt: skip


async def test_serve_replica_on_onnx_embeds_as_the_in_process_encoder(tiny_bert_path, own_cache, monkeypatch):
    pytest.importorskip("ray.serve")
    import torch

    from llamaindex_posfair.cli.serve import config_from_args
    from llamaindex_posfair.serve import deployments
    from llamaindex_posfair.serve.worker import EmbedJob

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the replica's thread setting: not this process
    args = build_parser().parse_args(["serve", "--model", tiny_bert_path, "--runtime", "onnx"])
    config = pickle.loads(pickle.dumps(config_from_args(args)))
    replica = deployments.EmbedDeployment.func_or_class(config)
    local = EncoderSpec(model=tiny_bert_path, calibration=None, runtime="onnx").load()
    assert replica._worker.encoder._exported is not None and len(own_cache) == 1
    card = replica.card()
    assert card.spec["runtime"] == "onnx" and card.fingerprint == local.fingerprint()
    documents = await replica.embed(EmbedJob(tuple(TEXTS), "document"))
    queries = await replica.embed(EmbedJob(tuple(TEXTS[:2]), "query"))
    assert np.abs(documents.vectors - local.encode_documents(TEXTS)).max() <= 1e-5
    assert np.abs(queries.vectors - local.encode_queries(TEXTS[:2])).max() <= 1e-5


# ---------------------------------------------------------------------- posfair ingest-ray (the pool in this process)
class InProcessPool:
    """Ray's part of :mod:`qdrant_tools.ray_ingest` in this process: the factory and encoding are pickled as Ray
    ships them, each block of rows goes through the real ``ChunkEncodeWorker``, and its columns come back."""

    def __init__(self, monkeypatch):
        from qdrant_tools import ray_ingest

        self.factories: list = []
        self.rows = 0
        monkeypatch.setattr(ray_ingest, "_ensure_ray", lambda address, local_cpus: None)
        monkeypatch.setattr(ray_ingest, "_point_encoding", self._point_encoding)
        monkeypatch.setattr(ray_ingest, "_encoded_batches", self._encoded_batches)

    def _point_encoding(self, factory, config, on_cluster):
        from qdrant_tools.ray_ingest import point_encoding_from_factory

        return point_encoding_from_factory(factory, config)

    def _encoded_batches(self, rows, factory, encoding, config):
        from qdrant_tools.ray_ingest import ChunkEncodeWorker, _from_columns, with_sparse

        shipped = pickle.loads(pickle.dumps({"factory": factory, "encoding": encoding}))
        self.factories.append(shipped["factory"])
        worker = ChunkEncodeWorker(
            shipped["factory"], shipped["encoding"], config.token_budget, num_cpus=0, use_gpu=False
        )
        names = [v.name for v in encoding.vector_configs()]
        for start in range(0, len(rows), config.docs_per_task):
            block = rows[start : start + config.docs_per_task]
            self.rows += len(block)
            cols = worker({key: np.array([r[key] for r in block], dtype=object) for key in block[0]})
            yield with_sparse(_from_columns(cols, names), encoding)


def test_ingest_ray_ships_onnx_to_the_workers_and_stores_the_ingests_vectors(
    onnx_store, capsys, docs, tiny_bert_path, monkeypatch, spy
):
    import torch

    pool = InProcessPool(monkeypatch)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the worker's thread setting: not this process
    passes = spy.exported_passes
    flags = ("--model", tiny_bert_path, "--runtime", "onnx", "--docs-per-task", "2")
    rc, out, err = ingest(capsys, "ingest-ray", docs, onnx_store, "r", *flags)
    assert rc == 0, err
    assert len(json.loads(out)["new"]) == 5 and pool.rows == 5
    [factory] = pool.factories
    assert {name: (s.runtime, s.weights is not None) for name, s in factory.vectors.items()} == {
        "vanilla": ("onnx", True)
    }
    assert spy.exported_passes > passes
    ray_points, recipe = points(onnx_store, "r")
    ingest_points, ingest_recipe = points(onnx_store, "c")
    assert recipe.vectors["vanilla"].fingerprint() == ingest_recipe.vectors["vanilla"].fingerprint()
    assert_same_vectors(ray_points, ingest_points)
