"""MemoEncoder: each (fingerprint, role, text) embedded once, on disk across runs, shared only when checked."""

from __future__ import annotations

import numpy as np
import pytest

from llamaindex_posfair.calibration.config import CalibrationConfig
from research.eval.memo import MemoEncoder, VectorMemo, unchanged_tokens


@pytest.fixture
def plain(fake_encoder_factory):
    return fake_encoder_factory(dimension=32, calibration=None)


def test_a_repeated_text_is_embedded_once_and_returns_the_same_vector(plain):
    enc = MemoEncoder(plain)
    first = enc.encode_documents(["red fish", "blue fish"])
    second = enc.encode_documents(["blue fish", "red fish", "red fish"])
    assert [c.count for c in plain.calls] == [2]
    np.testing.assert_array_equal(second, first[[1, 0, 0]])
    assert (enc.computed, enc.reused) == (2, 3)


def test_queries_and_documents_are_memoised_apart(plain):
    enc = MemoEncoder(plain)
    enc.encode_documents(["red fish"])
    enc.encode_queries(["red fish"])
    assert [c.role for c in plain.calls] == ["document", "query"]


def test_another_fingerprint_never_reads_the_vectors(fake_encoder_factory):
    memo = VectorMemo()
    a, b = fake_encoder_factory(salt="a", calibration=None), fake_encoder_factory(salt="b", calibration=None)
    va = MemoEncoder(a, memo).encode_documents(["red fish"])
    vb = MemoEncoder(b, memo).encode_documents(["red fish"])
    assert len(b.calls) == 1 and not np.allclose(va, vb)


def test_a_new_memo_on_the_same_folder_computes_nothing(plain, tmp_path):
    vecs = MemoEncoder(plain, VectorMemo(tmp_path)).encode_documents(["red fish", "blue fish"])
    again = MemoEncoder(plain, VectorMemo(tmp_path))
    np.testing.assert_array_equal(again.encode_documents(["blue fish", "red fish"]), vecs[[1, 0]])
    assert again.computed == 0 and len(plain.calls) == 1


def test_reused_texts_are_charged_what_they_cost_when_computed(plain):
    enc = MemoEncoder(plain)
    enc.encode_documents(["red fish", "blue fish"])
    spent = enc.spent_seconds
    enc.reset_counters()
    enc.encode_documents(["red fish", "blue fish"])
    assert enc.spent_seconds == 0.0
    assert enc.charged_seconds == pytest.approx(spent)


def test_sharing_is_refused_when_the_encoders_disagree(fake_encoder_factory):
    plain = MemoEncoder(fake_encoder_factory(calibration=None))
    calibrated = MemoEncoder(fake_encoder_factory(calibration=CalibrationConfig()))  # its own vector space
    with pytest.raises(ValueError, match="cannot share"):
        calibrated.share_short_texts(plain, 64, ["red fish", "blue fish"])
    assert calibrated.sharing is None


def test_checked_sharing_embeds_a_short_text_once_for_both_encoders(fake_encoder_factory):
    # without a position bias the fake's calibration changes no vector, only the fingerprint
    memo = VectorMemo()
    raw_plain = fake_encoder_factory(calibration=None, calibration_salt=False)
    raw_cal = fake_encoder_factory(calibration=CalibrationConfig(), calibration_salt=False)
    plain, calibrated = MemoEncoder(raw_plain, memo), MemoEncoder(raw_cal, memo)
    calibrated.share_short_texts(plain, max_tokens=4, probes=["red fish", "one two three four five"])
    n_plain, n_cal = len(raw_plain.calls), len(raw_cal.calls)
    calibrated.encode_documents(["red fish", "a much longer text of words"])
    plain.encode_documents(["red fish"])
    assert [c.count for c in raw_plain.calls[n_plain:]] == [1]  # "red fish", once, by the plain encoder
    assert [c.count for c in raw_cal.calls[n_cal:]] == [1]  # only the long text


def test_unchanged_tokens_follows_skip_single_basket():
    assert unchanged_tokens(CalibrationConfig(basket_size=128), 512) == 128
    assert unchanged_tokens(CalibrationConfig(basket_size=256), 256) == 256
    assert unchanged_tokens(CalibrationConfig(skip_single_basket=False), 512) == 0
    assert unchanged_tokens(None, 256) == 256
