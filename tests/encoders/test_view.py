"""CalibrationView: every encoding path applies the view's calibration."""

from __future__ import annotations

import numpy as np
import pytest

from llamaindex_posfair import CalibrationConfig, CalibrationView, PosFairEncoder


@pytest.fixture(scope="module")
def calibrated(tiny_bert_path):
    return PosFairEncoder(tiny_bert_path, calibration=CalibrationConfig(basket_size=8, strength=1.0))


def test_plain_view_encode_is_plain_not_calibrated(calibrated, mixed_texts):
    """`encode` used to be forwarded to the calibrated encoder untouched."""
    view = CalibrationView(calibrated, None)
    plain = calibrated.encode(mixed_texts, calibration=None)
    np.testing.assert_allclose(view.encode(mixed_texts), plain, atol=1e-6)
    assert not np.allclose(calibrated.encode(mixed_texts), plain, atol=1e-4)


def test_view_exposes_no_unlisted_encoder_attribute(calibrated):
    with pytest.raises(AttributeError):
        CalibrationView(calibrated, None).sentence_transformer  # noqa: B018


def test_view_of_a_view_wraps_the_base_encoder(calibrated):
    inner = CalibrationView(calibrated, None)
    outer = CalibrationView(inner, CalibrationConfig(basket_size=8, strength=0.5))
    assert outer.base_encoder is calibrated
    assert outer.fingerprint() == calibrated.fingerprint(calibration=CalibrationConfig(basket_size=8, strength=0.5))
