"""Inference runtimes: the spec's runtime field, its fingerprint, the ONNX export cache, and exported vs torch vectors."""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
from importlib import resources

import numpy as np
import pytest
from pydantic import ValidationError

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders import runtime
from llamaindex_posfair.encoders.encoder import PosFairEncoder
from llamaindex_posfair.encoders.spec import EncoderSet, EncoderSpec
from llamaindex_posfair.encoders.weights import file_sha256

PLAIN = {"calibration": None}
needs_onnxruntime = pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None,
    reason="onnxruntime is not installed (pip install 'llamaindex-posfair[onnx]')",
)
needs_openvino = pytest.mark.skipif(
    importlib.util.find_spec("openvino") is None or importlib.util.find_spec("onnx") is None,
    reason="openvino is not installed (pip install 'llamaindex-posfair[openvino]')",
)


# ---------------------------------------------------------------------- the spec
def test_runtime_defaults_to_torch_and_torch_hashes_as_before():
    spec = EncoderSpec(**PLAIN)
    assert spec.runtime == "torch"
    assert "runtime" not in spec.vector_settings()
    onnx = spec.model_copy(update={"runtime": "onnx"})
    assert onnx.vector_settings()["runtime"] == "onnx"
    assert onnx.fingerprint() != spec.fingerprint()


def test_invalid_runtime_is_named():
    with pytest.raises(ValidationError, match='runtime must be "torch", "onnx" or "openvino", got \'tensorrt\''):
        EncoderSpec(runtime="tensorrt", **PLAIN)


def test_onnx_refuses_calibration_and_names_the_fix():
    with pytest.raises(ValidationError, match="pass calibration=None for the plain encoder, or runtime='torch'"):
        EncoderSpec(runtime="onnx", calibration=CalibrationConfig())
    with pytest.raises(ValueError, match="calibration needs attention hooks"):
        EncoderSpec(runtime="onnx").with_calibration(CalibrationConfig())
    with pytest.raises(ValueError, match="both vectors need calibration on"):
        EncoderSet.single(EncoderSpec(runtime="onnx"), both=True)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"dtype": "bfloat16"}, "computes in float32, got dtype='bfloat16'; pass dtype='float32'"),
        ({"device": "cuda"}, "runs on the CPU, got device='cuda'; pass device='cpu'"),
    ],
)
def test_onnx_refuses_other_precisions_and_devices(settings, message):
    with pytest.raises(ValidationError, match=message):
        EncoderSpec(runtime="onnx", **PLAIN, **settings)


def test_onnx_auto_precision_is_float32_where_torch_picks_bfloat16(device_has_bf16):
    device_has_bf16(True)
    assert EncoderSpec(**PLAIN).resolved().dtype == "bfloat16"
    assert EncoderSpec(runtime="onnx", **PLAIN).resolved().dtype == "float32"


def test_runtime_twin_is_found_for_the_plain_spec_only():
    torch_spec = EncoderSpec(dtype="float32", **PLAIN).pinned()
    onnx_fp = torch_spec.model_copy(update={"runtime": "onnx"}).fingerprint()
    twin = torch_spec.precision_twin(onnx_fp)
    assert twin is not None and (twin.runtime, twin.dtype) == ("onnx", "float32")
    calibrated = EncoderSpec(dtype="float32", calibration=CalibrationConfig()).pinned()
    assert calibrated.precision_twin(onnx_fp) is None


def test_query_side_check_accepts_a_runtime_twin_with_one_notice(caplog):
    from llamaindex_posfair.integrations.gate import FingerprintMismatchError, Gate

    onnx_spec = EncoderSpec(runtime="onnx", **PLAIN).pinned()
    gate = Gate("twin-test", "vanilla", stored=EncoderSpec(dtype="bfloat16", **PLAIN).fingerprint())
    with caplog.at_level(logging.WARNING, logger="llamaindex_posfair.encoders.precision"):
        assert gate.check_reader(onnx_spec) is onnx_spec
        assert gate.check_reader(onnx_spec) is onnx_spec
    notices = [r.getMessage() for r in caplog.records if "twin-test" in r.getMessage()]
    assert len(notices) == 1
    assert "written with runtime torch in bfloat16 and is queried with runtime onnx in float32" in notices[0]
    with pytest.raises(FingerprintMismatchError, match="written in bfloat16, but .* computes float32 on onnx"):
        gate.check_writer(onnx_spec)
    other_prompt = EncoderSpec(query_prompt="query: ", **PLAIN).fingerprint()
    with pytest.raises(FingerprintMismatchError):
        Gate("twin-test", "vanilla", stored=other_prompt).check_reader(onnx_spec)


@pytest.mark.parametrize(("name", "module"), [("onnx", "onnxruntime"), ("openvino", "openvino")])
def test_missing_runtime_package_names_the_extra(monkeypatch, name, module):
    import sys

    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=rf"llamaindex-posfair\[{name}\]"):
        runtime._import_runtime(name)


# ---------------------------------------------------------------------- the export (tiny model; own_cache: conftest)
def _onnx_folder(encoder: PosFairEncoder):
    return runtime.onnx_cache_folder(runtime.export_settings(encoder.sentence_transformer, encoder.spec.weights))


@needs_onnxruntime
def test_onnx_matches_torch_on_a_padded_batch(tiny_bert_path, mixed_texts, own_cache):
    torch_enc = PosFairEncoder(tiny_bert_path, calibration=None, device="cpu")
    onnx_enc = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    texts = [*mixed_texts, "a", "two words"]
    assert np.abs(onnx_enc.encode_documents(texts, batch_size=4) - torch_enc.encode_documents(texts)).max() <= 1e-5
    assert onnx_enc.fingerprint() == onnx_enc.spec.model_copy(update={"device": "cpu"}).fingerprint()
    assert onnx_enc.fingerprint() != torch_enc.fingerprint()


@needs_onnxruntime
def test_onnx_without_a_device_loads_on_the_cpu_where_cuda_is_available(tiny_bert_path, own_cache, monkeypatch):
    from sentence_transformers import SentenceTransformer

    monkeypatch.setattr(SentenceTransformer, "get_device_name", lambda self: "cuda")  # what a GPU machine answers
    enc = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    assert enc.device.type == "cpu" and enc.spec.device is None and len(own_cache) == 1
    torch_enc = PosFairEncoder(tiny_bert_path, calibration=None, device="cpu")
    assert np.abs(enc.encode_query("the mill") - torch_enc.encode_query("the mill")).max() <= 1e-5


@needs_onnxruntime
def test_export_happens_once(tiny_bert_path, own_cache):
    first = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    second = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    assert len(own_cache) == 1
    assert (_onnx_folder(first) / "model.onnx").is_file()
    np.testing.assert_array_equal(first.encode_query("the mill"), second.encode_query("the mill"))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda folder: (folder / "model.onnx").write_bytes(b"not a model"), "missing or changed"),
        (lambda folder: (folder / "export.json").write_text("{"), "record is unreadable"),
        (lambda folder: (folder / "export.json").write_text('{"format": 0}'), "other settings"),
    ],
)
@needs_onnxruntime
def test_broken_or_stale_export_is_rebuilt_with_one_warning(tiny_bert_path, own_cache, caplog, damage, reason):
    first = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    expected = first.encode_query("the mill")
    damage(_onnx_folder(first))
    with caplog.at_level(logging.WARNING, logger="llamaindex_posfair.encoders.runtime"):
        rebuilt = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    warnings = [r.getMessage() for r in caplog.records if r.name == "llamaindex_posfair.encoders.runtime"]
    assert len(warnings) == 1 and reason in warnings[0] and "exporting it again" in warnings[0]
    assert len(own_cache) == 2
    np.testing.assert_allclose(rebuilt.encode_query("the mill"), expected, atol=1e-6)


@needs_onnxruntime
def test_file_ort_cannot_load_is_rebuilt(tiny_bert_path, own_cache, caplog, monkeypatch):
    first = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    folder = _onnx_folder(first)
    (folder / "model.onnx").write_bytes(b"garbage")
    record = json.loads((folder / "export.json").read_text())
    record["sha256"] = file_sha256(folder / "model.onnx")
    (folder / "export.json").write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="llamaindex_posfair.encoders.runtime"):
        PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    assert any("onnx cannot load it" in r.getMessage() for r in caplog.records)
    assert len(own_cache) == 2


@needs_openvino
def test_openvino_reuses_the_export_and_matches_torch(tiny_bert_path, mixed_texts, own_cache):
    torch_enc = PosFairEncoder(tiny_bert_path, calibration=None, device="cpu")
    onnx_enc = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    openvino_enc = PosFairEncoder(tiny_bert_path, calibration=None, runtime="openvino")
    assert len(own_cache) == 1
    texts = [*mixed_texts, "a", "two words"]
    expected = torch_enc.encode_documents(texts)
    assert np.abs(openvino_enc.encode_documents(texts, batch_size=4) - expected).max() <= 1e-5
    assert len({onnx_enc.fingerprint(), openvino_enc.fingerprint(), torch_enc.fingerprint()}) == 3


@needs_onnxruntime
def test_calibration_per_call_is_refused_on_onnx(tiny_bert_path, own_cache):
    enc = PosFairEncoder(tiny_bert_path, calibration=None, runtime="onnx")
    with pytest.raises(ValueError, match="or runtime='torch' to calibrate"):
        enc.encode_documents(["the mill"], calibration=CalibrationConfig())


@needs_onnxruntime
def test_dump_prefix_model_is_refused_on_onnx(tiny_bert_path, tmp_path, own_cache):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(tiny_bert_path, device="cpu")
    st.tokenizer.add_special_tokens({"additional_special_tokens": ["[DUMP_1]", "[DUMP_2]"]})
    st[0].auto_model.resize_token_embeddings(len(st.tokenizer))
    folder = tmp_path / "dump_model"
    st.save(str(folder))
    with pytest.raises(ValueError, match=r"its 2 \[DUMP\] prefix tokens need attention hooks.*runtime='torch'"):
        PosFairEncoder(str(folder), calibration=None, runtime="onnx")
    assert own_cache == []


# ---------------------------------------------------------------------- the bundled model (real weights)
@pytest.fixture(scope="module")
def minilm_torch():
    """The bundled MiniLM on torch in float32."""
    return EncoderSpec(dtype="float32", device="cpu", **PLAIN).load()


@pytest.fixture(scope="module", params=["onnx", "openvino"])
def minilm_pair(request, minilm_torch):
    """The bundled MiniLM on torch float32 and on each exported runtime."""
    pytest.importorskip({"onnx": "onnxruntime", "openvino": "openvino"}[request.param])
    return minilm_torch, EncoderSpec(runtime=request.param, **PLAIN).load()


@pytest.mark.slow
def test_bundled_minilm_exported_vectors_within_1e4_of_torch(minilm_pair, mixed_texts):
    torch_enc, onnx_enc = minilm_pair
    words = " ".join(mixed_texts).split()
    texts = [" ".join(words[: 3 + 37 * i]) for i in range(12)]  # 3 to 410 words: one padded batch
    diff = np.abs(onnx_enc.encode_documents(texts, batch_size=12) - torch_enc.encode_documents(texts, batch_size=12))
    assert diff.max() <= 1e-4
    assert (
        np.abs(onnx_enc.encode_query("where is the mill?") - torch_enc.encode_query("where is the mill?")).max() <= 1e-4
    )


def _jsonl(split, name: str) -> list[dict]:
    with gzip.open(split / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.mark.slow
def test_bundled_minilm_exported_runtime_keeps_the_top_10(minilm_pair):
    """The same top 10, in the same order, for every query of natural_docs' test split over 40 of its passages."""
    torch_enc, onnx_enc = minilm_pair
    split = resources.files("llamaindex_posfair") / "data" / "benchmarks" / "natural_docs" / "test"
    passages = [row["text"] for row in _jsonl(split, "corpus.jsonl.gz")[:40]]
    queries = [row["text"] for row in _jsonl(split, "queries.jsonl.gz")]
    tops = []
    for enc in (torch_enc, onnx_enc):
        scores = enc.encode_queries(queries) @ enc.encode_documents(passages).T
        tops.append(np.argsort(-scores, axis=1, kind="stable")[:, :10])
    np.testing.assert_array_equal(tops[0], tops[1])
