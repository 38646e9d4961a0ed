"""Metrics against hand-computed values, plus property tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair.eval import metrics as m


def test_ndcg_hand_computed_single_relevant_at_rank_3():
    # DCG = 1/log2(4) = 0.5; IDCG = 1
    assert m.ndcg_at_k(["x", "y", "a"], {"a": 1}, 10) == pytest.approx(0.5)


def test_ndcg_hand_computed_graded():
    # ranking b(1), a(2): DCG = 1/1 + 2/log2(3); ideal a(2), b(1): 2 + 1/log2(3)
    dcg = 1 + 2 / math.log2(3)
    idcg = 2 + 1 / math.log2(3)
    assert m.ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 10) == pytest.approx(dcg / idcg)


def test_ndcg_cutoff_excludes_late_hits():
    assert m.ndcg_at_k(["x", "y", "a"], {"a": 1}, 2) == 0.0


def test_ndcg_two_relevant_one_found():
    # found at rank 1; ideal has both in ranks 1,2 -> 1 / (1 + 1/log2 3)
    assert m.ndcg_at_k(["a", "x"], {"a": 1, "b": 1}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_ndcg_unjudged_query_is_nan_and_skipped():
    assert math.isnan(m.ndcg_at_k(["a"], {}, 10))
    assert m.per_query({"q1": ["a"], "q2": ["a"]}, {"q1": {"a": 1}}) == {"q1": 1.0}


def test_recall_hand_computed():
    assert m.recall_at_k(["a", "b", "c"], {"c": 1, "z": 1, "n": 0}, 3) == 0.5
    assert m.recall_at_k(["a", "b", "c"], {"c": 1}, 2) == 0.0


def test_group_summary_hand_computed():
    values = {"q1": 1.0, "q2": 0.5, "q3": 0.25, "q4": 0.75}
    groups = {"q1": "begin", "q2": "begin", "q3": "end", "q4": "end"}
    s = m.summarize(values, groups, ("begin", "end"))
    assert s.groups == {"begin": 0.75, "end": 0.5}
    assert s.counts == {"begin": 2, "end": 2}
    assert s.arithmetic == pytest.approx(0.625)
    assert s.harmonic == pytest.approx(2 / (1 / 0.75 + 1 / 0.5))  # 0.6
    assert s.psi == pytest.approx(1 - 0.5 / 0.75)
    assert s.overall == pytest.approx(0.625)


def test_psi_and_harmonic_edge_cases():
    assert m.psi({"a": 0.0, "b": 0.0}) == 0.0
    assert m.psi([0.0, 0.8]) == 1.0
    assert m.harmonic_mean([0.0, 0.8]) == 0.0
    with pytest.raises(ValueError, match="at least one group"):
        m.psi({})
    with pytest.raises(ValueError, match="non-negative"):
        m.harmonic_mean([-0.1, 0.5])


def test_rank_scores_without_judgements_breaks_ties_by_document_order():
    scores = np.array([[0.1, 0.9, 0.9, 0.5], [1.0, 0.0, 0.2, 0.3]])
    assert m.rank_scores(scores, ["a", "b", "c", "d"], 3) == [["b", "c", "d"], ["a", "d", "c"]]
    with pytest.raises(ValueError, match="shape"):
        m.rank_scores(scores, ["a", "b"], 3)


def test_rank_scores_puts_the_relevant_document_last_among_ties():
    scores = np.array([[0.1, 0.9, 0.9, 0.9]])
    qrels = [{"b": 2.0, "c": 1.0}]
    assert m.rank_scores(scores, ["a", "b", "c", "d"], 4, qrels) == [["d", "c", "b", "a"]]
    with pytest.raises(ValueError, match="one mapping per score row"):
        m.rank_scores(scores, ["a", "b", "c", "d"], 4, [{}, {}])


def test_constant_scores_earn_no_credit_from_corpus_order():
    # the relevant passage is first in the corpus: ranking by document order would give nDCG 1
    ids = [f"d{i}" for i in range(12)]
    qrels = [{"d0": 1.0}]
    ranked = m.rank_scores(np.zeros((1, 12)), ids, 10, qrels)[0]
    assert "d0" not in ranked
    assert m.ndcg_at_k(ranked, qrels[0], 10) == 0.0


def test_mrr_hand_computed():
    assert m.mrr_at_k(["x", "a", "b"], {"a": 1, "b": 1}, 10) == 0.5
    assert m.mrr_at_k(["x", "a"], {"a": 1}, 1) == 0.0
    assert math.isnan(m.mrr_at_k(["a"], {"a": 0}, 10))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=2, max_size=12),
    st.lists(st.integers(0, 2), min_size=12, max_size=12),
    st.randoms(use_true_random=False),
    st.integers(1, 12),
)
def test_ndcg_from_tied_scores_does_not_depend_on_corpus_order(gains, levels, rnd, k):
    n = len(gains)
    ids = [f"d{i}" for i in range(n)]
    scores = np.array([levels[:n]], dtype=np.float64)  # three score levels: many ties
    rel = {d: float(g) for d, g in zip(ids, gains) if g > 0}
    if not rel:
        return
    perm = list(range(n))
    rnd.shuffle(perm)
    base = m.ndcg_at_k(m.rank_scores(scores, ids, k, [rel])[0], rel, k)
    shuffled = m.ndcg_at_k(m.rank_scores(scores[:, perm], [ids[j] for j in perm], k, [rel])[0], rel, k)
    assert shuffled == pytest.approx(base)
    # pessimistic: no ordering of the tied documents scores lower
    worst = sorted(ids, key=lambda d: (-scores[0, ids.index(d)], rel.get(d, 0.0)))
    assert base == pytest.approx(m.ndcg_at_k(worst, rel, k))


def test_bad_k_names_the_parameter():
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        m.ndcg_at_k(["a"], {"a": 1}, 0)


def test_bucketed_psi_hand_computed():
    values = {"a": 1.0, "b": 0.5, "c": 0.2, "d": 0.4, "e": 0.9}
    bins = {"a": "0", "b": "1", "c": "0", "d": "1", "e": "0"}
    buckets = {"a": "short", "b": "short", "c": "long", "d": "long", "e": "long"}
    out = m.bucketed_psi(values, bins, buckets)
    assert out["short"] == pytest.approx(0.5)
    assert out["long"] == pytest.approx(1 - 0.4 / 0.55)
    assert m.bucketed_psi(values, bins, buckets, min_queries=2) == {"long": 0.0}


scores_st = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(scores_st)
def test_psi_in_unit_interval_and_harmonic_le_arithmetic(vals):
    assert 0.0 <= m.psi(vals) <= 1.0
    h, a = m.harmonic_mean(vals), m.arithmetic_mean(vals)
    assert h <= a + 1e-12
    assert min(vals) - 1e-12 <= h <= max(vals) + 1e-12


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=6), st.floats(0.01, 1.0))
def test_equal_groups_have_zero_psi_and_equal_means(vals, c):
    same = [c] * len(vals)
    assert m.psi(same) == pytest.approx(0.0)
    assert m.harmonic_mean(same) == pytest.approx(c)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=15),
    st.permutations(list(range(15))),
    st.integers(1, 20),
)
def test_ndcg_in_unit_interval_and_one_for_perfect_ranking(gains, perm, k):
    docs = [f"d{i}" for i in range(len(gains))]
    rel = {d: g for d, g in zip(docs, gains)}
    ranking = [docs[i] for i in perm if i < len(docs)]
    v = m.ndcg_at_k(ranking, rel, k)
    if not any(g > 0 for g in gains):
        assert math.isnan(v)
        return
    assert 0.0 <= v <= 1.0 + 1e-12
    perfect = sorted(docs, key=lambda d: -rel[d])
    assert m.ndcg_at_k(perfect, rel, k) == pytest.approx(1.0)


def test_bootstrap_interval_contains_point_and_detects_a_clear_gain():
    groups = {f"q{i}": ("a", "b")[i % 2] for i in range(40)}
    base = {q: 0.5 for q in groups}
    better = {q: 0.9 if i % 4 else 0.7 for i, q in enumerate(groups)}
    d, lo, hi = m.bootstrap_harmonic_diff(better, base, groups, n_resamples=300, seed=1)
    assert lo <= d <= hi
    assert lo > 0.2  # every query improved by >= 0.2
    same = m.bootstrap_harmonic_diff(base, base, groups, n_resamples=50)
    assert same == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="share no grouped query"):
        m.bootstrap_harmonic_diff({"x": 1.0}, {"y": 1.0}, groups)
