"""Chunk-max, Qdrant multivector MaxSim, score mix and the variant list (fake encoder; fast)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.scoring import max_over_owners
from research.eval.harness.chunking_systems import ChunkMaxSystem, chunk_corpus
from research.eval.harness.mix import ScoreMixSystem, mix_scores
from research.eval.harness.multivector import QdrantMaxSimSystem, qdrant_maxsim_scores
from research.eval.harness.runner import run_eval
from research.eval.harness.systems import DenseSystem, EncodeCache, canonical_calibration

from .test_systems_runner import _bench


def _cache(b):
    return EncodeCache(list(b.corpus.values()), list(b.queries.values()))


def test_chunk_max_is_the_best_chunk_and_counts_vectors(fake_encoder):
    b = _bench()
    cache = _cache(b)
    system = ChunkMaxSystem("chunk-max 50", fake_encoder, 50)
    scores = system.score(cache)
    assert system.vectors_per_passage == 3.0  # 120 words -> 50 + 50 + 20
    chunks, owners = chunk_corpus(cache.docs, fake_encoder.tokenizer, 50)
    sim = fake_encoder.encode_queries(cache.queries) @ fake_encoder.encode_documents(chunks).T
    for d in range(cache.n_docs):
        np.testing.assert_allclose(scores[:, d], sim[:, owners == d].max(axis=1), rtol=1e-6)


def test_chunk_max_removes_the_planted_primacy_bias(fake_encoder):
    b = _bench()
    vanilla, chunked = run_eval(
        b, [DenseSystem("v", fake_encoder), ChunkMaxSystem("c", fake_encoder, 20)], show_progress_bar=False
    )
    assert vanilla.ndcg.groups["end"] < 0.7 and vanilla.ndcg.groups["middle"] < 0.7
    assert chunked.ndcg.groups == pytest.approx({"begin": 1.0, "middle": 1.0, "end": 1.0})
    assert chunked.vectors_per_passage == 6.0 and vanilla.vectors_per_passage == 1.0


def test_chunk_max_rejects_bad_size(fake_encoder):
    with pytest.raises(ValueError, match="chunk_tokens must be a positive integer, got 0"):
        ChunkMaxSystem("x", fake_encoder, 0)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.lists(st.integers(0, 3), min_size=1, max_size=12), st.integers(0, 10_000))
def test_max_over_owners_matches_a_loop(n_q, owners, seed):
    rng = np.random.default_rng(seed)
    sim = rng.normal(size=(n_q, len(owners)))
    out = max_over_owners(sim, np.asarray(owners), 5)
    for d in range(5):
        cols = [j for j, o in enumerate(owners) if o == d]
        expected = sim[:, cols].max(axis=1) if cols else np.full(n_q, -np.inf)
        np.testing.assert_array_equal(out[:, d], expected)


def test_qdrant_maxsim_equals_numpy_max_over_segments():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(11, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    owners = np.array([0, 0, 0, 1, 2, 2, 3, 3, 3, 3, 1])  # doc 4 has no segment
    queries = rng.normal(size=(5, 16)).astype(np.float32)
    got = qdrant_maxsim_scores(vecs, owners, 5, queries)
    expected = max_over_owners(queries @ vecs.T, owners, 5)
    np.testing.assert_allclose(got[:, :4], expected[:, :4], rtol=1e-5, atol=1e-5)
    assert np.all(np.isneginf(got[:, 4]))


def test_qdrant_maxsim_independent_system_equals_chunk_max(fake_encoder):
    b = _bench()
    cache = _cache(b)
    mv = QdrantMaxSimSystem("mv", fake_encoder, 50, mode="independent")
    np.testing.assert_allclose(
        mv.score(cache), ChunkMaxSystem("c", fake_encoder, 50).score(cache), rtol=1e-5, atol=1e-6
    )
    assert mv.vectors_per_passage == 3.0


def test_qdrant_maxsim_rejects_bad_mode(fake_encoder):
    with pytest.raises(ValueError, match='mode must be "independent" or "contextual"'):
        QdrantMaxSimSystem("mv", fake_encoder, 64, mode="late")


def test_the_mix_is_the_weighted_sum_and_stores_both_vectors(fake_encoder):
    b = _bench()
    cache = _cache(b)
    cfg = CalibrationConfig(strength=1.0)
    van, calsys = DenseSystem("v", fake_encoder), DenseSystem("c", fake_encoder, cfg)
    mixed = ScoreMixSystem("f", van, calsys, alpha=0.3)
    np.testing.assert_allclose(mixed.score(cache), 0.3 * van.score(cache) + 0.7 * calsys.score(cache), rtol=1e-6)
    assert mixed.vectors_per_passage == 2.0
    assert ScoreMixSystem("f0", van, calsys, alpha=0.0).vectors_per_passage == 1.0
    np.testing.assert_array_equal(mix_scores(van.score(cache), calsys.score(cache), 1.0), van.score(cache))
    with pytest.raises(ValueError, match=r"alpha must lie in \[0, 1\], got 1.5"):
        ScoreMixSystem("f", van, calsys, alpha=1.5)


def test_canonical_calibration_lets_one_sided_variants_reuse_embeddings():
    cfg = CalibrationConfig()
    assert canonical_calibration(CalibrationConfig(calibrate_queries=False), "docs") == cfg
    assert canonical_calibration(CalibrationConfig(calibrate_documents=False), "docs") is None
    assert canonical_calibration(CalibrationConfig(calibrate_queries=False), "queries") is None
    assert canonical_calibration(CalibrationConfig(calibrate_documents=False), "queries") == cfg
    assert canonical_calibration(None, "docs") is None


def test_documents_only_variant_reuses_the_calibrated_documents(fake_encoder):
    b = _bench()
    cache = _cache(b)
    DenseSystem("c", fake_encoder, CalibrationConfig()).score(cache)
    before = cache.encoded_texts
    DenseSystem("d", fake_encoder, CalibrationConfig(calibrate_queries=False)).score(cache)
    assert cache.encoded_texts - before == cache.n_queries  # only the (vanilla) queries were encoded
