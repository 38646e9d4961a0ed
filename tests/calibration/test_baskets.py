"""Basket partition (no model)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair.calibration.baskets import (
    EXCLUDED,
    ISOLATED,
    POLICY_EQUAL,
    POLICY_ORIGINAL,
    assign_baskets,
    basket_gather_index,
    basket_lengths,
    isolated_gather_index,
)


@given(st.integers(0, 2000), st.integers(1, 600), st.sampled_from(["fixed", "equal"]))
def test_basket_lengths_cover_content_in_ceil_c_over_b_baskets(content, size, layout):
    lengths = basket_lengths(content, size, layout)
    assert sum(lengths) == content
    assert len(lengths) == -(-content // size)
    assert all(0 < n <= size for n in lengths)


@given(st.integers(1, 2000), st.integers(1, 600))
def test_equal_layout_lengths_differ_by_at_most_one(content, size):
    lengths = basket_lengths(content, size, "equal")
    assert max(lengths) - min(lengths) <= 1


def test_fixed_layout_has_a_short_last_basket():
    assert basket_lengths(129, 128) == [128, 1]
    assert basket_lengths(129, 128, "equal") == [65, 64]


def test_basket_lengths_reject_nonpositive_size():
    with pytest.raises(ValueError, match="basket_size must be a positive integer"):
        basket_lengths(10, 0)


def test_assignment_marks_padding_isolated_and_content():
    valid = torch.tensor([[False, True, True, True, True, True]])  # left padding
    mode = torch.tensor([[0, POLICY_EQUAL, 0, 0, 0, 0]])
    assignment = assign_baskets(valid, mode, torch.zeros(1, 6), valid, basket_size=2, skip_single_basket=False)
    assert assignment.basket_ids.tolist() == [[EXCLUDED, ISOLATED, 0, 0, 1, 1]]
    assert assignment.num_baskets.tolist() == [2]
    index, ok = basket_gather_index(assignment)
    assert index[0, 1][ok[0, 1]].tolist() == [4, 5]


def test_single_basket_sequences_are_inactive_when_skipping():
    valid = torch.ones(2, 6, dtype=torch.bool)
    valid[1, 3:] = False
    zeros = torch.zeros(2, 6, dtype=torch.long)
    assignment = assign_baskets(valid, zeros, zeros.float(), valid, basket_size=4, skip_single_basket=True)
    assert assignment.active.tolist() == [True, False]


# ---------------------------------------------------------------- the vectorised assignment vs a plain loop
def _loop_basket_ids(valid, mode, basket_size, layout):
    """Oracle: basket ids by walking each sequence's content positions (the assignment before vectorising)."""
    isolated = (mode != 0) & valid
    content = valid & ~isolated
    ids = torch.full(valid.shape, EXCLUDED, dtype=torch.long)
    ids[isolated] = ISOLATED
    for b in range(valid.shape[0]):
        positions = torch.nonzero(content[b]).flatten()
        lengths = basket_lengths(int(positions.numel()), basket_size, layout)
        if lengths:
            ids[b, positions] = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    return ids


def _loop_gather(assignment):
    """Oracle: basket and isolated key positions, one sequence and basket at a time."""
    k_max, m_max = max(assignment.max_baskets, 1), max(assignment.max_basket_len, 1)
    iso = assignment.basket_ids == ISOLATED
    j_max = max(int(iso.sum(-1).max()), 1)
    batch = assignment.basket_ids.shape[0]
    index, ok = torch.zeros(batch, k_max, m_max, dtype=torch.long), torch.zeros(batch, k_max, m_max, dtype=torch.bool)
    iso_index, iso_ok = torch.zeros(batch, j_max, dtype=torch.long), torch.zeros(batch, j_max, dtype=torch.bool)
    for b in range(batch):
        for k in range(int(assignment.num_baskets[b])):
            pos = torch.nonzero(assignment.basket_ids[b] == k).flatten()
            index[b, k, : pos.numel()], ok[b, k, : pos.numel()] = pos, True
        pos = torch.nonzero(iso[b]).flatten()
        iso_index[b, : pos.numel()], iso_ok[b, : pos.numel()] = pos, True
    return index, ok, iso_index, iso_ok


@st.composite
def padded_batches(draw):
    """Random padded batches (left or right padding) with isolated tokens anywhere."""
    batch, length = draw(st.integers(1, 5)), draw(st.integers(1, 40))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    lengths = torch.randint(0, length + 1, (batch,), generator=gen)
    valid = torch.arange(length).view(1, -1) < lengths.view(-1, 1)
    if draw(st.booleans()):
        valid = valid.flip(-1)
    mode = torch.where(torch.rand(batch, length, generator=gen) < 0.15, POLICY_ORIGINAL, 0)
    return valid, mode


@settings(max_examples=150, deadline=None)
@given(padded_batches(), st.integers(1, 12), st.sampled_from(["fixed", "equal"]))
def test_vectorised_assignment_equals_the_loop_assignment(case, basket_size, layout):
    valid, mode = case
    assignment = assign_baskets(valid, mode, torch.zeros(valid.shape), valid, basket_size, layout=layout)
    assert torch.equal(assignment.basket_ids, _loop_basket_ids(valid, mode, basket_size, layout))
    content = ((mode == 0) & valid).sum(-1).tolist()
    expected = [basket_lengths(c, basket_size, layout) for c in content]
    assert assignment.num_baskets.tolist() == [len(x) for x in expected]
    assert assignment.max_basket_len == max((max(x) for x in expected if x), default=0)


@settings(max_examples=150, deadline=None)
@given(padded_batches(), st.integers(1, 12), st.sampled_from(["fixed", "equal"]))
def test_vectorised_gather_indices_equal_the_loop(case, basket_size, layout):
    valid, mode = case
    assignment = assign_baskets(valid, mode, torch.zeros(valid.shape), valid, basket_size, layout=layout)
    index, ok, iso_index, iso_ok = _loop_gather(assignment)
    got_index, got_ok = basket_gather_index(assignment)
    got_iso, got_iso_ok = isolated_gather_index(assignment)
    assert torch.equal(got_ok, ok) and torch.equal(got_index[ok], index[ok])
    assert torch.equal(got_iso_ok, iso_ok) and torch.equal(got_iso[iso_ok], iso_index[iso_ok])
