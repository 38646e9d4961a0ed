from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair.dump.metrics import infonce_loss, ranking_metrics, ranks_of_relevant


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
    assert ranks_of_relevant(np.array([[0.5, 0.5, 0.1]]), [0]).tolist() == [2]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=30))
def test_metrics_stay_in_unit_interval_and_recall_is_monotone(ranks):
    m = ranking_metrics(ranks)
    assert all(0.0 <= m[k] <= 1.0 for k in m)
    assert m["recall@1"] <= m["recall@5"] <= m["recall@10"]
    assert m["mrr@10"] <= m["ndcg@10"] + 1e-12


def test_perfect_ranking_scores_one():
    assert ranking_metrics([1, 1, 1]) == {
        "ndcg@10": 1.0,
        "mrr@10": 1.0,
        "recall@1": 1.0,
        "recall@5": 1.0,
        "recall@10": 1.0,
    }
