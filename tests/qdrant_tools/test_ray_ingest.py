"""Ray ingestion: congruence with single-process ingestion, crash/resume, token-budget batching.

One local Ray session (2 CPUs) is shared by the module. The encoder is a real
``PosFairEncoder`` on the tiny random BERT from ``tests/conftest.py`` (with
calibration), loaded in the Ray workers from an ``EncoderSet`` (one ``EncoderSpec`` per vector).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair import CalibrationConfig, EncoderSet, EncoderSpec
from qdrant_tools.encoding import token_budget_batches
from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.ray_ingest import RayIngestConfig, ray_ingest_path
from qdrant_tools.store import open_store

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
CHUNK = 64
#: The layout of these tests: sub-chunks, no fused rows, float node vectors (the resume test builds it by hand).
LAYOUT = NodeLayout(chunk_tokens=CHUNK, fused_weight=None, node_quantization=None)


# ---------------------------------------------------------------------- fast, no Ray
@settings(max_examples=100, deadline=None)
@given(lengths=st.lists(st.integers(1, 600), max_size=60), budget=st.integers(1, 5000))
def test_token_budget_batches_cover_each_row_once_within_budget(lengths, budget):
    batches = token_budget_batches(lengths, budget)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for b in batches:
        padded = len(b) * max(lengths[i] for i in b)
        assert padded <= budget or len(b) == 1


def test_token_budget_batches_fill_greedily_longest_first():
    assert token_budget_batches([10, 40, 30, 5], 80) == [[1, 2], [0, 3]]
    assert token_budget_batches([100, 100], 50) == [[0], [1]]


def test_config_and_recipe_validation_name_the_parameter():
    with pytest.raises(ValueError, match="num_workers must be a positive integer, got 0"):
        RayIngestConfig(num_workers=0)
    with pytest.raises(ValueError, match='write_ordering must be "weak", "medium" or "strong", got \'fast\''):
        RayIngestConfig(write_ordering="fast")
    with pytest.raises(ValueError, match="num_gpus_per_worker must be >= 0"):
        RayIngestConfig(num_gpus_per_worker=-1)
    with pytest.raises(ValueError, match="both vectors need calibration on"):
        EncoderSet.single(EncoderSpec(calibration=None), both=True)


def test_point_batches_survive_the_ray_columns_also_with_multivectors():
    from qdrant_tools.ray_ingest import _from_columns, _to_columns
    from qdrant_tools.writer import PointBatch

    rng = np.random.default_rng(0)
    dense, multi = rng.normal(size=(2, 4)).astype(np.float32), [rng.normal(size=(k, 4)) for k in (3, 1)]
    batch = PointBatch(ids=["a", "b"], payloads=[{"x": 1}, {"x": 2}], vectors={"dense": dense, "subchunks": multi})
    back = _from_columns(_to_columns(batch), ["dense", "subchunks"])
    assert back.ids == ["a", "b"] and back.payloads == [{"x": 1}, {"x": 2}]
    np.testing.assert_array_equal(back.vectors["dense"], dense)
    assert [np.asarray(m).shape for m in back.vectors["subchunks"]] == [(3, 4), (1, 4)]
    np.testing.assert_allclose(back.vectors["subchunks"][0], multi[0], atol=1e-6)


def test_a_document_with_metadata_and_pages_survives_the_ray_row():
    from qdrant_tools.chunking import SourceDocument
    from qdrant_tools.plan import DocumentPlan
    from qdrant_tools.ray_ingest import _doc_of_row, _row

    doc = SourceDocument("a.pdf", "one\n\ntwo", "/d/a.pdf", "h", {"year": 2021, "team": "x"}, ((0, "i"), (5, "1")))
    row = _row(DocumentPlan(doc=doc, version="v", action="new"))
    assert _doc_of_row({k: np.array([v], dtype=object) for k, v in row.items()}, 0) == doc


# ---------------------------------------------------------------------- Ray
@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def recipe(tiny_bert_path):
    spec = EncoderSpec(model=tiny_bert_path, calibration=CalibrationConfig(basket_size=16, strength=0.5))
    return EncoderSet.single(spec, both=True)


@pytest.fixture(scope="module")
def reference(recipe):
    """Single-process ingestion of the shipped examples/data folder: {id: (payload, {name: vector})}."""
    from llamaindex_posfair import CalibrationView

    enc = recipe.vectors["calibrated"].load(device="cpu")
    client = open_store(":memory:")
    report = ingest_path(
        client,
        "single",
        DATA,
        {"vanilla": CalibrationView(enc, None), "calibrated": enc},
        IngestConfig(show_progress=False, layout=LAYOUT),
    )
    assert report.chunks_written > 20 and len(report.new) == 5
    points = dump(client, "single")
    client.close()
    return points


def dump(client, collection):
    out, offset = {}, None
    while True:
        pts, offset = client.scroll(collection, limit=1000, offset=offset, with_vectors=True, with_payload=True)
        for p in pts:
            out[str(p.id)] = (p.payload, {k: np.asarray(v) for k, v in p.vector.items()})
        if offset is None:
            return out


def assert_same_points(got, want):
    assert sorted(got) == sorted(want)  # same ids, each exactly once
    for pid, (payload, vecs) in want.items():
        g_payload, g_vecs = got[pid]
        assert g_payload == payload
        assert sorted(g_vecs) == sorted(vecs) == ["calibrated", "subchunks", "vanilla"]  # LAYOUT
        for name in vecs:
            np.testing.assert_allclose(g_vecs[name], vecs[name], atol=1e-5, rtol=0)


def config(**kw) -> RayIngestConfig:
    base = dict(
        num_workers=1,
        layout=LAYOUT,
        docs_per_task=2,
        write_batch_size=8,
        token_budget=512,
        show_progress=False,
    )
    base.update(kw)
    return RayIngestConfig(**base)


@pytest.mark.slow
def test_ray_ingestion_equals_single_process_and_rerun_is_a_noop(ray_session, recipe, reference):
    client = open_store(":memory:")
    report = ray_ingest_path(client, "ray", DATA, recipe, config())
    assert report.chunks_written == len(reference) and sorted(report.new) == sorted(
        ["honeybees.txt", "lighthouse.md", "printing.md", "sourdough.txt", "tides.md"]
    )
    assert_same_points(dump(client, "ray"), reference)
    again = ray_ingest_path(client, "ray", DATA, recipe, config())
    assert again.chunks_written == 0 and len(again.unchanged) == 5
    client.close()


def index_calls(recorded) -> list[tuple]:
    """(field, schema) of every create_payload_index call a Mock(wraps=client) saw."""
    return [c.args[1:3] for c in recorded.create_payload_index.call_args_list]


@pytest.mark.slow
def test_both_paths_write_the_same_points_and_payload_indexes(ray_session, recipe, tiny_bert_path):
    from unittest.mock import Mock

    from qdrant_client import models

    local, ray_client = Mock(wraps=open_store(":memory:")), Mock(wraps=open_store(":memory:"))
    vectors = recipe.load(device="cpu")
    ingest_path(local, "c", DATA, vectors, IngestConfig(show_progress=False, layout=LAYOUT))
    ray_ingest_path(ray_client, "c", DATA, recipe, config())
    assert_same_points(dump(ray_client, "c"), dump(local, "c"))
    keyword, integer = models.PayloadSchemaType.KEYWORD, models.PayloadSchemaType.INTEGER
    expected = [("doc_id", keyword), ("_posfair.version", keyword), ("_posfair.format", integer)]
    assert index_calls(ray_client) == index_calls(local) == expected


@pytest.mark.slow
def test_ray_resumes_a_partly_stored_document_chunk_by_chunk(ray_session, recipe, reference):
    from qdrant_client import models

    missing = sorted(pid for pid, (payload, _) in reference.items() if payload["doc_id"] == "tides.md")[:2]
    size = len(next(iter(reference.values()))[1]["calibrated"])
    client = open_store(":memory:")
    client.create_collection(
        "part",
        vectors_config={
            **{n: models.VectorParams(size=size, distance=models.Distance.COSINE) for n in ("vanilla", "calibrated")},
            "subchunks": models.VectorParams(
                size=size,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            ),
        },
    )
    kept = [models.PointStruct(id=pid, vector={k: v.tolist() for k, v in vecs.items()}, payload=payload)
            for pid, (payload, vecs) in reference.items() if pid not in missing]  # fmt: skip
    client.upsert("part", kept, wait=True)
    n_tides = sum(1 for payload, _ in reference.values() if payload["doc_id"] == "tides.md")
    report = ray_ingest_path(client, "part", DATA, recipe, config())
    assert report.resumed == ["tides.md"] and len(report.unchanged) == 4
    assert report.chunks_resumed == n_tides - 2 and report.chunks_written == 2  # only the missing chunks encoded
    assert_same_points(dump(client, "part"), reference)
    client.close()


class KillFirstWorker:
    """Factory wrapper: the first worker to encode dies with os._exit (like an OOM kill or a lost node)."""

    def __init__(self, inner, marker: str):
        self.inner, self.marker = inner, marker

    def __call__(self, device):
        vectors = self.inner(device)
        marker = self.marker

        class Dying:
            def __init__(self, enc):
                self._enc = enc

            def __getattr__(self, name):
                return getattr(self._enc, name)

            @property
            def dimension(self):
                return self._enc.dimension

            @property
            def max_length(self):
                return self._enc.max_length

            def fingerprint(self):
                return self._enc.fingerprint()

            def encode_documents(self, texts, **kw):
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return self._enc.encode_documents(texts, **kw)
                os.close(fd)
                os._exit(1)

        return {name: Dying(enc) for name, enc in vectors.items()}


@pytest.mark.slow
def test_killed_worker_is_restarted_and_every_chunk_is_stored_once(ray_session, recipe, reference, tmp_path):
    ray_session.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    marker = tmp_path / "killed"
    client = open_store(":memory:")
    report = ray_ingest_path(client, "killed", DATA, KillFirstWorker(recipe, str(marker)), config())
    assert marker.exists()  # a worker really died mid-run
    assert report.chunks_written >= len(reference)  # the lost batch was re-run
    assert_same_points(dump(client, "killed"), reference)
    assert client.count("killed", exact=True).count == len(reference)
    client.close()


DRIVER = textwrap.dedent(
    """
    import os, sys, time, pickle
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import ray
    from qdrant_tools.layout import NodeLayout
    from qdrant_tools.ray_ingest import RayIngestConfig, ray_ingest_path
    from qdrant_tools.store import open_store
    address, storage, data, recipe_file = sys.argv[1:5]
    recipe = pickle.load(open(recipe_file, "rb"))
    ray.init(address=address, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False

    def on_write(n):
        print("WROTE", n, flush=True)
        time.sleep(60)  # the test kills -9 the driver here

    config = RayIngestConfig(num_workers=1, layout=NodeLayout(chunk_tokens=CHUNK_TOKENS, fused_weight=None, node_quantization=None), docs_per_task=2, write_batch_size=8,
                             token_budget=512, show_progress=False, point_encoding_on="driver")
    ray_ingest_path(open_store(storage), "resume", data, recipe, config, on_write=on_write)
    print("FINISHED", flush=True)
""".replace("CHUNK_TOKENS", str(CHUNK))
)


@pytest.mark.slow
def test_driver_killed_mid_run_then_rerun_stores_every_chunk_once(ray_session, recipe, reference, tmp_path):
    import pickle

    storage = tmp_path / "qdrant"
    (tmp_path / "driver.py").write_text(DRIVER)
    with open(tmp_path / "recipe.pkl", "wb") as f:
        pickle.dump(recipe, f)
    address = ray_session.get_runtime_context().gcs_address
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "driver.py"), address, str(storage), str(DATA), str(tmp_path / "recipe.pkl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        deadline = time.time() + 150
        line = ""
        while time.time() < deadline:
            line = proc.stdout.readline()
            if line.startswith("WROTE") or not line:
                break
        assert line.startswith("WROTE"), f"driver did not write (last line {line!r}, rc {proc.poll()})"
        os.kill(proc.pid, signal.SIGKILL)  # kill -9 the driver after its first upsert
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    client = open_store(storage)
    partial = client.count("resume", exact=True).count
    assert 0 < partial < len(reference)
    report = ray_ingest_path(client, "resume", DATA, recipe, config())
    complete = sum(1 for payload, _ in reference.values() if payload["doc_id"] in report.unchanged)
    assert report.chunks_resumed == partial - complete  # chunks of the half-written document, not re-encoded
    assert report.chunks_written == len(reference) - partial  # only the missing chunks were encoded
    assert_same_points(dump(client, "resume"), reference)
    client.close()
