"""Basket partition (no model)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from llamaindex_posfair.calibration.baskets import (
    EXCLUDED,
    ISOLATED,
    POLICY_EQUAL,
    basket_gather_index,
    basket_lengths,
    build_plan,
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


def test_plan_marks_padding_isolated_and_content():
    valid = torch.tensor([[False, True, True, True, True, True]])  # left padding
    mode = torch.tensor([[0, POLICY_EQUAL, 0, 0, 0, 0]])
    plan = build_plan(valid, mode, torch.zeros(1, 6), valid, basket_size=2, skip_single_basket=False)
    assert plan.basket_ids.tolist() == [[EXCLUDED, ISOLATED, 0, 0, 1, 1]]
    assert plan.num_baskets.tolist() == [2]
    index, ok = basket_gather_index(plan)
    assert index[0, 1][ok[0, 1]].tolist() == [4, 5]


def test_single_basket_sequences_are_inactive_when_skipping():
    valid = torch.ones(2, 6, dtype=torch.bool)
    valid[1, 3:] = False
    zeros = torch.zeros(2, 6, dtype=torch.long)
    plan = build_plan(valid, zeros, zeros.float(), valid, basket_size=4, skip_single_basket=True)
    assert plan.active.tolist() == [True, False]
