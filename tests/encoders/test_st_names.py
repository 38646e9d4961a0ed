"""sentence-transformers' names on PosFairEncoder (``encode_query`` / ``encode_document``), and how a
spec reaches the encoder (the loader the package registers)."""

from __future__ import annotations

import numpy as np
import pytest

from llamaindex_posfair import CalibrationConfig, EncoderSpec, PosFairEncoder
from llamaindex_posfair.encoders import loader
from llamaindex_posfair.encoders.view import CalibrationView


@pytest.fixture(scope="module")
def encoder(tiny_bert_path):
    return PosFairEncoder(
        tiny_bert_path,
        calibration=CalibrationConfig(basket_size=8, strength=1.0),
        query_prompt="query: ",
        document_prompt="passage: ",
    )


def test_encode_query_of_a_list_is_encode_queries(encoder, mixed_texts):
    np.testing.assert_array_equal(encoder.encode_query(mixed_texts), encoder.encode_queries(mixed_texts))


def test_encode_document_of_a_list_is_encode_documents(encoder, mixed_texts):
    np.testing.assert_array_equal(encoder.encode_document(mixed_texts), encoder.encode_documents(mixed_texts))


def test_one_string_gives_one_vector_as_in_sentence_transformers(encoder, mixed_texts):
    one = encoder.encode_query(mixed_texts[0])
    assert one.shape == (encoder.dimension,) and one.dtype == np.float32
    np.testing.assert_allclose(one, encoder.encode_queries([mixed_texts[0]])[0], atol=1e-6)
    doc = encoder.encode_document(mixed_texts[0])
    assert doc.shape == (encoder.dimension,)
    assert not np.allclose(one, doc, atol=1e-4)  # the prompts differ


def test_per_call_calibration_reaches_the_encoding(encoder, mixed_texts):
    plain = encoder.encode_document(mixed_texts, calibration=None)
    np.testing.assert_allclose(plain, encoder.encode_documents(mixed_texts, calibration=None), atol=1e-6)
    assert not np.allclose(plain, encoder.encode_document(mixed_texts), atol=1e-4)


def test_a_view_applies_its_calibration_to_the_new_names(encoder, mixed_texts):
    view = CalibrationView(encoder, None)
    np.testing.assert_allclose(
        view.encode_query(mixed_texts[0]), encoder.encode_queries([mixed_texts[0]], calibration=None)[0], atol=1e-6
    )
    np.testing.assert_allclose(
        view.encode_document(mixed_texts), encoder.encode_documents(mixed_texts, calibration=None), atol=1e-6
    )


def test_spec_load_goes_through_the_registered_loader(monkeypatch):
    seen = []
    monkeypatch.setattr(loader, "_loader", lambda spec: seen.append(spec) or "loaded")
    spec = EncoderSpec(calibration=None)
    assert spec.load(batch_size=3) == "loaded"
    assert seen == [spec.model_copy(update={"batch_size": 3})]


def test_the_package_registers_posfair_encoder(tiny_bert_path):
    spec = EncoderSpec(model=tiny_bert_path, calibration=None)
    loaded = loader.load_encoder(spec)
    assert isinstance(loaded, PosFairEncoder) and loaded.fingerprint() == spec.fingerprint()


def test_without_a_loader_the_error_says_what_to_do(monkeypatch):
    monkeypatch.setattr(loader, "_loader", None)
    with pytest.raises(RuntimeError, match="register_loader"):
        EncoderSpec().load()
