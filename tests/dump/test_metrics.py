from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair.dump.metrics import infonce_loss, ranking_metrics


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 12), dim=st.integers(1, 8))
def test_infonce_of_identical_embeddings_is_log_of_candidate_count(n, dim):
    x = torch.ones(n, dim)
    assert math.isclose(infonce_loss(x, x, x, scale=20.0), math.log(2 * n), rel_tol=1e-5)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 10))
def test_infonce_is_invariant_to_permuting_the_triples(seed, n):
    g = torch.Generator().manual_seed(seed)
    q, p, neg = (torch.randn(n, 6, generator=g) for _ in range(3))
    perm = torch.randperm(n, generator=g)
    assert math.isclose(infonce_loss(q, p, neg), infonce_loss(q[perm], p[perm], neg[perm]), rel_tol=1e-4, abs_tol=1e-5)


def test_infonce_prefers_aligned_positives():
    q = torch.eye(3)
    assert infonce_loss(q, q, -q) < infonce_loss(q, q.roll(1, 0), -q)


def test_ties_rank_the_relevant_document_last():
    m = ranking_metrics(np.array([[0.5, 0.5, 0.1]]), [0])
    assert m["mrr@10"] == 0.5 and m["recall@1"] == 0.0
    assert m["ndcg@10"] == pytest.approx(1 / math.log2(3))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_q=st.integers(1, 8), n_d=st.integers(1, 30))
def test_metrics_equal_the_rank_formulas_without_ties(seed, n_q, n_d):
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((n_q, n_d))  # continuous: no ties
    rel = rng.integers(0, n_d, n_q)
    ranks = (scores > scores[np.arange(n_q), rel][:, None]).sum(axis=1) + 1
    m = ranking_metrics(scores, rel)
    assert m["ndcg@10"] == pytest.approx(np.mean([1 / math.log2(r + 1) if r <= 10 else 0.0 for r in ranks]))
    assert m["mrr@10"] == pytest.approx(np.mean([1 / r if r <= 10 else 0.0 for r in ranks]))
    for k in (1, 5, 10):
        assert m[f"recall@{k}"] == pytest.approx(np.mean(ranks <= k))
    assert m["recall@1"] <= m["recall@5"] <= m["recall@10"]


def test_perfect_ranking_scores_one():
    assert ranking_metrics(np.eye(3), [0, 1, 2]) == {
        "ndcg@10": 1.0,
        "mrr@10": 1.0,
        "recall@1": 1.0,
        "recall@5": 1.0,
        "recall@10": 1.0,
    }


def test_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"got shape \(2, 3\) and 1 relevant"):
        ranking_metrics(np.zeros((2, 3)), [0])
