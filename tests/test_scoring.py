"""The one MaxSim / node-weighted scorer (llamaindex_posfair/scoring.py): properties against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair.scoring import cosine_matrix, max_over_owners, node_scores, weigh_node_scores

DIM = 4


@st.composite
def layouts(draw):
    """A random sub-chunk layout: nodes, their sub-chunks (some nodes may have none), queries."""
    n_nodes = draw(st.integers(1, 5))
    owner = np.asarray(draw(st.lists(st.integers(0, n_nodes - 1), min_size=1, max_size=12)), dtype=np.int64)
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    node = rng.normal(size=(n_nodes, DIM)).astype(np.float32)
    sub = rng.normal(size=(len(owner), DIM)).astype(np.float32)
    queries = rng.normal(size=(draw(st.integers(1, 3)), DIM)).astype(np.float32)
    return queries, node, sub, owner


def _brute(queries, node, sub, owner, w):
    def cos(a, b):
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    out = np.full((len(queries), len(node)), -np.inf)
    for i, q in enumerate(queries):
        for n in range(len(node)):
            subs = [cos(q, s) for s, o in zip(sub, owner) if o == n]
            best = max(subs) if subs else -np.inf
            out[i, n] = cos(q, node[n]) if w == 1.0 else (best if w == 0.0 else w * cos(q, node[n]) + (1 - w) * best)
    return out


@settings(max_examples=60, deadline=None)
@given(layouts(), st.sampled_from([0.0, 0.3, 0.5, 1.0]))
def test_node_scores_equal_the_brute_force_definition(layout, w):
    queries, node, sub, owner = layout
    np.testing.assert_allclose(
        node_scores(queries, node, sub, owner, w), _brute(queries, node, sub, owner, w), atol=1e-5
    )


@settings(max_examples=40, deadline=None)
@given(layouts(), st.floats(0.01, 100.0))
def test_scores_do_not_depend_on_the_length_of_query_or_vectors(layout, scale):
    queries, node, sub, owner = layout
    a = node_scores(queries, node, sub, owner, 0.5)
    b = node_scores(scale * queries, node / scale, sub * scale, owner, 0.5)
    np.testing.assert_allclose(a, b, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(layouts())
def test_one_query_vector_gives_one_row(layout):
    queries, node, sub, owner = layout
    np.testing.assert_allclose(
        node_scores(queries[0], node, sub, owner, 0.3), node_scores(queries, node, sub, owner, 0.3)[0]
    )


def test_an_owner_without_items_scores_minus_infinity_and_dtype_is_kept():
    out = max_over_owners(np.array([[0.5, 0.25]], dtype=np.float32), np.array([2, 2]), 3)
    assert out.dtype == np.float32
    assert out.tolist() == [[-np.inf, -np.inf, 0.5]]


def test_a_node_without_sub_chunks_keeps_its_node_score_at_weight_one():
    node = np.eye(2, DIM, dtype=np.float32)
    sub = np.eye(1, DIM, dtype=np.float32)
    out = node_scores(np.eye(1, DIM), node, sub, np.array([0]), node_weight=1.0)
    assert out.tolist() == [[1.0, 0.0]]


@pytest.mark.parametrize(
    ("owners", "message"), [(np.array([0]), "one owner per item"), (np.array([0, 3]), r"must lie in \[0, 2\)")]
)
def test_owners_that_do_not_fit_are_refused_by_name(owners, message):
    with pytest.raises(ValueError, match=message):
        max_over_owners(np.zeros((1, 2)), owners, 2)


def test_a_node_weight_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match=r"node_weight must lie in \[0, 1\]"):
        weigh_node_scores(np.zeros(1), np.zeros(1), 1.5)


def test_cosine_matrix_of_one_query_is_one_dimensional():
    assert cosine_matrix(np.ones(DIM), np.ones((3, DIM))).shape == (3,)
