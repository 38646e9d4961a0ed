"""Contextual segment vectors and Qdrant MaxSim on the real bundled MiniLM (slow)."""

from __future__ import annotations

import numpy as np
import pytest

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.scoring import max_over_owners
from research.eval.harness.multivector import QdrantMaxSimSystem, contextual_segment_vectors
from research.eval.harness.systems import EncodeCache

TEXTS = [
    "The lighthouse keeper counted ships every night. " * 12 + "Marta Olsen repaired the lamp in winter.",
    "A short passage about bread and salt.",
]


@pytest.fixture(scope="module")
def encoder(minilm_path):
    from llamaindex_posfair.encoders.encoder import PosFairEncoder

    return PosFairEncoder(minilm_path, calibration=None, max_length=512, batch_size=4)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [None, CalibrationConfig(basket_size=16)])
def test_one_whole_segment_is_the_ordinary_embedding(encoder, cfg):
    vecs, owners = contextual_segment_vectors(encoder, TEXTS, cfg, segment_tokens=10_000)
    assert owners.tolist() == [0, 1]
    np.testing.assert_allclose(vecs, encoder.encode_documents(TEXTS, calibration=cfg), atol=1e-5)


@pytest.mark.slow
def test_contextual_segments_split_every_token_once(encoder):
    vecs, owners = contextual_segment_vectors(encoder, TEXTS, None, segment_tokens=32)
    n_tokens = encoder.count_tokens(TEXTS)
    assert np.bincount(owners).tolist() == [-(-n // 32) for n in n_tokens]
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_contextual_maxsim_through_qdrant_equals_numpy(encoder):
    cache = EncodeCache(TEXTS, ["Who repaired the lamp?", "bread"])
    cfg = CalibrationConfig(basket_size=16)
    system = QdrantMaxSimSystem("mv", encoder, 32, mode="contextual", calibration=cfg)
    got = system.score(cache)
    vecs, owners = contextual_segment_vectors(encoder, TEXTS, cfg, 32)
    expected = max_over_owners(cache.queries_matrix(encoder, cfg) @ vecs.T, owners, 2)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert system.vectors_per_passage == len(owners) / 2 > 1
