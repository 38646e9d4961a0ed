"""Automatic precision: bfloat16 where the device has native bfloat16 units, float32 elsewhere."""

from __future__ import annotations

import logging

import pytest
import torch

from llamaindex_posfair import CalibrationConfig, EncoderSpec
from llamaindex_posfair.encoders import precision


@pytest.fixture
def cpuinfo(tmp_path):
    """Whether a ``/proc/cpuinfo`` with the given flags names bfloat16 units."""

    def read(flags: str) -> bool:
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
        return precision.cpuinfo_has_bf16(str(path))

    return read


@pytest.mark.parametrize("flags", ["fpu sse avx512f avx512_bf16", "fpu amx_bf16 amx_tile"])
def test_a_cpu_flag_of_bf16_units_is_found(cpuinfo, flags):
    assert cpuinfo(flags) is True


def test_a_cpu_without_bf16_flags_has_no_bf16_units(cpuinfo):
    assert cpuinfo("fpu sse avx2 avx512f avx512_vnni") is False


def test_no_cpuinfo_means_no_bf16_units(tmp_path):
    assert precision.cpuinfo_has_bf16(str(tmp_path / "missing")) is False


def test_a_cpu_with_bf16_units_defaults_to_bfloat16(device_has_bf16):
    device_has_bf16(True)
    assert precision.default_dtype("cpu") == "bfloat16"
    assert precision.default_dtype(None) == "bfloat16"


def test_a_cpu_without_bf16_units_defaults_to_float32(device_has_bf16):
    device_has_bf16(False)
    assert precision.default_dtype("cpu") == "float32"
    assert precision.default_dtype(None) == "float32"


@pytest.mark.parametrize(("native", "want"), [(True, "bfloat16"), (False, "float32")])
def test_a_cuda_gpu_defaults_by_its_own_bf16_support(monkeypatch, native, want):
    monkeypatch.setattr(precision, "cuda_has_bf16", lambda: native)
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: not native)
    assert precision.default_dtype("cuda:0") == want
    monkeypatch.setattr(precision, "_cuda_available", lambda: True)
    assert precision.default_dtype(None) == want


def test_other_devices_default_to_float32(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(precision, "cuda_has_bf16", lambda: True)
    assert precision.default_dtype("mps") == "float32"


def test_spec_resolves_auto_on_its_device_and_keeps_a_forced_dtype(device_has_bf16):
    device_has_bf16(True)
    assert EncoderSpec().dtype == "auto"
    assert EncoderSpec(device="cpu").resolved().dtype == "bfloat16"
    assert EncoderSpec(dtype="float32").resolved().dtype == "float32"
    assert EncoderSpec(dtype=None).resolved().dtype is None
    device_has_bf16(False)
    assert EncoderSpec(device="cpu").resolved().dtype == "float32"


def test_auto_fingerprints_as_the_resolved_precision(device_has_bf16):
    device_has_bf16(True)
    assert EncoderSpec().fingerprint() == EncoderSpec(dtype="bfloat16").fingerprint()
    device_has_bf16(False)
    assert EncoderSpec().fingerprint() == EncoderSpec(dtype="float32").fingerprint()


def test_encoder_loads_in_bfloat16_on_a_bf16_cpu(device_has_bf16, tiny_bert_path):
    device_has_bf16(True)
    spec = EncoderSpec(model=tiny_bert_path, calibration=None, device="cpu")
    enc = spec.load()
    assert next(enc.sentence_transformer.parameters()).dtype == torch.bfloat16
    assert enc.spec.dtype == "bfloat16" and enc.fingerprint() == spec.fingerprint()


def test_forced_float32_loads_in_float32_on_a_bf16_cpu(device_has_bf16, tiny_bert_path):
    device_has_bf16(True)
    enc = EncoderSpec(model=tiny_bert_path, calibration=None, device="cpu", dtype="float32").load()
    assert next(enc.sentence_transformer.parameters()).dtype == torch.float32
    assert enc.spec.dtype == "float32"


def test_bfloat16_vectors_are_close_to_float32_ones(device_has_bf16, tiny_bert_path):
    device_has_bf16(True)
    docs = ["the tide rises twice a day", "bees dance to show where flowers are", "a lighthouse keeper's log"]
    bf16 = EncoderSpec(model=tiny_bert_path, calibration=CalibrationConfig(basket_size=16)).load()
    fp32 = EncoderSpec(model=tiny_bert_path, calibration=CalibrationConfig(basket_size=16), dtype="float32").load()
    a, b = bf16.encode_documents(docs), fp32.encode_documents(docs)
    assert a.dtype == b.dtype and abs((a * b).sum(axis=1) - 1).max() < 0.02


def test_an_already_loaded_model_keeps_its_dtype(device_has_bf16, tiny_bert_path):
    from sentence_transformers import SentenceTransformer

    from llamaindex_posfair import PosFairEncoder

    device_has_bf16(True)
    st = SentenceTransformer(tiny_bert_path, device="cpu")
    enc = PosFairEncoder(st, calibration=None)
    assert enc.spec.dtype == "float32" and next(st.parameters()).dtype == torch.float32


def test_none_counts_as_float32():
    assert precision.same_precision(None, "float32") and not precision.same_precision(None, "bfloat16")
    assert precision.precision_name(None) == "float32"


def test_precision_twin_finds_another_precision_only():
    spec = EncoderSpec(dtype="float32")
    stored = EncoderSpec(dtype="bfloat16").fingerprint()
    assert spec.precision_twin(stored).dtype == "bfloat16"
    assert spec.precision_twin(EncoderSpec(dtype="bfloat16", query_prompt="q: ").fingerprint()) is None
    assert spec.precision_twin(EncoderSpec(dtype=None).fingerprint()).dtype is None


def _reads(spec, stored):
    """Whether the one gate (``integrations/gate.py``) lets ``spec`` read vectors of fingerprint ``stored``."""
    from llamaindex_posfair.integrations.gate import FingerprintMismatchError, Gate

    try:
        Gate("c", "v", stored=stored).check_reader(spec)
    except FingerprintMismatchError:
        return False
    return True


def test_a_precision_difference_alone_is_accepted_with_one_notice(caplog, monkeypatch):
    monkeypatch.setattr(precision, "_noticed", set())
    stored = EncoderSpec(dtype="bfloat16").fingerprint()
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        first = _reads(EncoderSpec(dtype="float32"), stored)
        again = _reads(EncoderSpec(dtype="float32"), stored)
    assert first and again
    notices = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(notices) == 1 and "rankings agree" in notices[0].getMessage()
    assert "bfloat16" in notices[0].getMessage() and "float32" in notices[0].getMessage()


def test_another_model_setting_is_no_precision_twin(caplog):
    stored = EncoderSpec(dtype="bfloat16").fingerprint()
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        assert not _reads(EncoderSpec(dtype="float32", calibration=CalibrationConfig()), stored)
    assert not caplog.records


def test_none_and_float32_meet_without_a_notice(caplog, monkeypatch):
    monkeypatch.setattr(precision, "_noticed", set())
    stored = EncoderSpec(dtype=None).fingerprint()
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        assert _reads(EncoderSpec(dtype="float32"), stored)
    assert not caplog.records


@pytest.mark.parametrize(("value", "allowed"), [("off", False), ("OFF", False), ("auto", True)])
def test_posfair_bf16_says_whether_automatic_precision_may_pick_bfloat16(monkeypatch, value, allowed):
    monkeypatch.setenv("POSFAIR_BF16", value)
    assert precision.bf16_allowed() is allowed


def test_unset_posfair_bf16_allows_bfloat16(monkeypatch):
    monkeypatch.delenv("POSFAIR_BF16", raising=False)
    assert precision.bf16_allowed() is True


def test_a_bad_posfair_bf16_value_is_named(monkeypatch):
    monkeypatch.setenv("POSFAIR_BF16", "yes")
    with pytest.raises(ValueError, match="POSFAIR_BF16='yes' is not a setting"):
        precision.bf16_allowed()
