"""EncoderSpec: one declaration of every setting; fingerprints cover exactly what shapes vectors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from llamaindex_posfair import BUNDLED_MINILM, CalibrationConfig, EncoderSet, EncoderSpec, PosFairEncoder
from llamaindex_posfair.encoders.models import bundled_model_path
from llamaindex_posfair.encoders.spec import resolve_spec


@pytest.fixture(autouse=True)
def _private_hash_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSFAIR_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize(
    "change",
    [{"device": "cpu"}, {"batch_size": 3}, {"backend": "reference"}, {"trust_remote_code": True}, {"dump_tokens": 0}],
)
def test_run_time_settings_leave_the_fingerprint(change):
    assert EncoderSpec().fingerprint() == EncoderSpec(**change).fingerprint()


@pytest.mark.parametrize(
    "change",
    [
        {"dtype": "bfloat16"},
        {"pooling": "cls"},
        {"max_length": 128},
        {"query_prompt": "query: "},
        {"document_prompt": "passage: "},
        {"normalize": False},
        {"calibration": CalibrationConfig()},
        {"calibration": CalibrationConfig(strength=0.3)},
        {"weights": "0" * 24},
    ],
    ids=lambda c: next(iter(c)),
)
def test_vector_settings_change_the_fingerprint(change):
    assert EncoderSpec().fingerprint() != EncoderSpec(**change).fingerprint()


def test_bundled_folder_is_recorded_as_its_alias_never_as_a_path():
    spec = EncoderSpec(model=bundled_model_path())
    assert spec.model == BUNDLED_MINILM
    assert bundled_model_path() not in spec.model_dump_json()
    assert spec.fingerprint() == EncoderSpec().fingerprint()


def test_same_weights_in_two_folders_fingerprint_alike(tiny_bert_path, tmp_path):
    a, b = tmp_path / "a", tmp_path / "elsewhere" / "b"
    shutil.copytree(tiny_bert_path, a)
    shutil.copytree(tiny_bert_path, b)
    assert EncoderSpec(model=str(a)).fingerprint() == EncoderSpec(model=str(b)).fingerprint()
    assert str(tmp_path) not in str(EncoderSpec(model=str(a)).vector_settings())


def _retrain_in_place(folder: Path) -> None:
    """Perturb the weights of a saved sentence-transformers folder and save them into the same folder."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")
    p = next(iter(st.parameters()))
    p.data.add_(0.01)
    st.save(str(folder))


def test_retraining_into_the_same_folder_changes_the_fingerprint(tiny_bert_path, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_path, folder)
    before = EncoderSpec(model=str(folder)).fingerprint()
    _retrain_in_place(folder)
    assert EncoderSpec(model=str(folder)).fingerprint() != before


def test_a_pinned_spec_refuses_changed_files(tiny_bert_path, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_path, folder)
    pinned = EncoderSpec(model=str(folder), calibration=None).pinned()
    _retrain_in_place(folder)
    with pytest.raises(ValueError, match="changed since this spec was pinned"):
        pinned.load()


def test_encoder_fingerprint_is_its_spec_fingerprint(tiny_bert_path):
    spec = EncoderSpec(model=tiny_bert_path, calibration=CalibrationConfig(basket_size=16), max_length=64)
    enc = spec.load()
    assert enc.spec == spec.pinned()
    assert enc.fingerprint() == spec.fingerprint()
    assert PosFairEncoder(tiny_bert_path, CalibrationConfig(basket_size=16), max_length=64).fingerprint() == (
        spec.fingerprint()
    )


def test_dtype_changes_the_loaded_encoders_fingerprint(tiny_bert_path):
    fp32 = EncoderSpec(model=tiny_bert_path, calibration=None, dtype="float32").load()
    bf16 = EncoderSpec(model=tiny_bert_path, calibration=None, dtype="bfloat16").load()
    assert fp32.fingerprint() != bf16.fingerprint()
    assert next(bf16.sentence_transformer.parameters()).dtype.is_floating_point


def test_in_memory_model_fingerprint_follows_its_parameters(tiny_bert_path):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(tiny_bert_path, device="cpu")
    first = PosFairEncoder(st, calibration=None).fingerprint()
    next(iter(st.parameters())).data.add_(0.01)
    assert PosFairEncoder(st, calibration=None).fingerprint() != first


def test_invalid_values_are_named():
    with pytest.raises(ValueError, match='backend must be "fast" or "reference", got \'turbo\''):
        EncoderSpec(backend="turbo")
    with pytest.raises(ValueError, match='dtype must be "auto", "float32", "bfloat16", "float16" or None'):
        EncoderSpec(dtype="int8")
    with pytest.raises(ValueError, match="model must be a local folder, a hub name"):
        EncoderSpec(model=" ")


def test_spec_round_trips_through_json():
    spec = EncoderSpec(calibration=CalibrationConfig(layers=(3, 4)), query_prompt="q: ", dtype="bfloat16")
    assert EncoderSpec.model_validate_json(spec.model_dump_json()) == spec


def test_resolve_spec_rejects_settings_that_disagree_with_the_spec():
    spec = EncoderSpec(max_length=64)
    assert resolve_spec(spec, max_length=64) is spec
    assert resolve_spec(spec.model_dump(mode="json"), model=BUNDLED_MINILM) == spec
    with pytest.raises(ValueError, match=r"settings \['max_length'\] disagree with the spec"):
        resolve_spec(spec, max_length=128)


def test_encoder_set_shares_one_model_between_calibrations(tiny_bert_path):
    spec = EncoderSpec(model=tiny_bert_path, calibration=CalibrationConfig(basket_size=16))
    loaded = EncoderSet.single(spec, both=True).load()
    bases = {id(getattr(enc, "base_encoder", enc)) for enc in loaded.values()}
    assert len(bases) == 1
    assert loaded["vanilla"].fingerprint() == spec.with_calibration(None).fingerprint()
    assert loaded["calibrated"].fingerprint() == spec.fingerprint()


def test_encoder_set_needs_calibration_for_both_vectors():
    with pytest.raises(ValueError, match="both vectors need calibration on"):
        EncoderSet.single(EncoderSpec(calibration=None), both=True)
