"""Property tests of the basket calibration math (no model)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair.calibration.baskets import (
    ISOLATED,
    POLICY_EQUAL,
    POLICY_FIXED,
    POLICY_NONE,
    POLICY_ORIGINAL,
    assign_baskets,
)
from llamaindex_posfair.calibration.math import (
    BasketMerge,
    WeightCalibration,
    basket_shares,
    calibrate_weights,
    merge_basket_states,
    row_strength,
)


@st.composite
def batches(draw):
    """A random batch: lengths with padding, isolated tokens, attention rows."""
    batch = draw(st.integers(1, 3))
    length = draw(st.integers(2, 24))
    basket = draw(st.integers(1, 8))
    layout = draw(st.sampled_from(["fixed", "equal"]))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    valid = torch.arange(length).view(1, -1) < lengths.view(-1, 1)
    mode = torch.zeros(batch, length, dtype=torch.long)
    value = torch.zeros(batch, length)
    policy = draw(st.sampled_from([POLICY_EQUAL, POLICY_ORIGINAL, POLICY_FIXED]))
    if draw(st.booleans()):
        mode[:, 0] = policy  # a leading special token
        value[:, 0] = 0.1
    scores = torch.randn(batch, 2, length, length, generator=gen) * 3
    scores = scores.masked_fill(~valid.view(batch, 1, 1, length), float("-inf"))
    attn = torch.softmax(scores, -1)
    assignment = assign_baskets(
        valid, mode, value, valid, basket, layout=layout, skip_single_basket=False, all_rows=True
    )
    return assignment, attn, scores, valid


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(0.0, 1.0))
def test_rows_sum_to_one(case, strength):
    assignment, attn, _, _ = case
    out = calibrate_weights(attn, assignment, strength)
    assert torch.allclose(out.sum(-1), torch.ones_like(out.sum(-1)), atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(batches())
def test_zero_strength_is_identity(case):
    assignment, attn, _, _ = case
    assert torch.equal(calibrate_weights(attn, assignment, 0.0), attn)


@settings(max_examples=60, deadline=None)
@given(batches())
def test_full_strength_gives_content_baskets_equal_mass(case):
    assignment, attn, _, _ = case
    out = calibrate_weights(attn, assignment, 1.0)
    for b in range(attn.shape[0]):
        ids = assignment.basket_ids[b]
        k = int(assignment.num_baskets[b])
        if k == 0:
            continue
        masses = torch.stack([out[b][..., ids == i].sum(-1) for i in range(k)], -1)
        assert torch.allclose(masses, masses[..., :1].expand_as(masses), atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(0.05, 1.0))
def test_ratios_inside_a_basket_are_kept(case, strength):
    assignment, attn, _, _ = case
    out = calibrate_weights(attn, assignment, 1.0)
    for b in range(attn.shape[0]):
        ids = assignment.basket_ids[b]
        for i in range(int(assignment.num_baskets[b])):
            sel = ids == i
            before = attn[b][..., sel]
            after = out[b][..., sel]
            before = before / before.sum(-1, keepdim=True)
            after = after / after.sum(-1, keepdim=True)
            assert torch.allclose(before, after, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(batches())
def test_isolated_tokens_follow_their_policy(case):
    assignment, attn, _, _ = case
    out = calibrate_weights(attn, assignment, 1.0)
    for b in range(attn.shape[0]):
        iso = assignment.basket_ids[b] == ISOLATED
        if not iso.any() or int(assignment.num_baskets[b]) == 0:
            continue
        code = int(assignment.iso_mode[b][iso][0])
        n_total = int(assignment.num_baskets[b]) + int(iso.sum())
        got = out[b][..., iso].sum(-1)
        if code == POLICY_EQUAL:
            expected = torch.full_like(got, 1.0 / n_total)
        elif code == POLICY_ORIGINAL:
            expected = attn[b][..., iso].sum(-1)
        else:
            expected = torch.full_like(got, 0.1)
        assert torch.allclose(got, expected, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(0.0, 1.0))
def test_padding_gets_no_weight(case, strength):
    assignment, attn, _, valid = case
    out = calibrate_weights(attn, assignment, strength)
    pad = ~valid.view(valid.shape[0], 1, 1, -1).expand_as(out)
    assert torch.all(out[pad] == 0)


@settings(max_examples=40, deadline=None)
@given(batches(), st.floats(0.0, 1.0))
def test_basket_state_merge_equals_explicit_rows(case, strength):
    """The fast backend's merge gives the same output as calibrating the rows, then a @ V."""
    assignment, attn, scores, _ = case
    batch, heads, _rows, length = scores.shape
    values = torch.randn(batch, heads, length, 5, generator=torch.Generator().manual_seed(7))
    expected = torch.matmul(calibrate_weights(attn, assignment, strength), values)
    k_max = max(assignment.max_baskets, 1)
    lse, outs = [], []
    for k in range(k_max):
        sel = (assignment.basket_ids == k).view(batch, 1, 1, length)
        s = scores.masked_fill(~sel, float("-inf"))
        lse_k = torch.logsumexp(s, -1)
        p = torch.exp(s - torch.where(torch.isfinite(lse_k), lse_k, 0.0).unsqueeze(-1))
        lse.append(lse_k)
        outs.append(torch.matmul(p, values))
    iso = assignment.basket_ids == ISOLATED
    iso_scores = scores.masked_fill(~iso.view(batch, 1, 1, length), float("-inf"))
    got, original = merge_basket_states(
        torch.stack(lse, -1),
        torch.stack(outs, -2),
        iso_scores,
        values,
        assignment.iso_mode,
        assignment.iso_value,
        assignment.active,
        strength,
    )
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(original, torch.matmul(attn, values), atol=1e-5)


def test_zero_mass_basket_shares_uniformly():
    valid = torch.ones(1, 4, dtype=torch.bool)
    zeros = torch.zeros(1, 4, dtype=torch.long)
    assignment = assign_baskets(valid, zeros, zeros.float(), valid, basket_size=2, skip_single_basket=False)
    attn = torch.tensor([[[[0.5, 0.5, 0.0, 0.0]]]])
    out = calibrate_weights(attn, assignment, 1.0)
    assert torch.allclose(out, torch.tensor([[[[0.25, 0.25, 0.25, 0.25]]]]))


def test_inactive_sequence_is_unchanged():
    valid = torch.ones(1, 4, dtype=torch.bool)
    zeros = torch.zeros(1, 4, dtype=torch.long)
    assignment = assign_baskets(valid, zeros, zeros.float(), valid, basket_size=8, skip_single_basket=True)
    attn = torch.tensor([[[[0.7, 0.1, 0.1, 0.1]]]])
    assert not bool(assignment.active[0])
    assert torch.equal(calibrate_weights(attn, assignment, 1.0), attn)


def test_content_baskets_share_the_remainder_of_original_isolated_mass():
    valid = torch.ones(1, 5, dtype=torch.bool)
    mode = torch.tensor([[POLICY_ORIGINAL, POLICY_NONE, POLICY_NONE, POLICY_NONE, POLICY_NONE]])
    assignment = assign_baskets(valid, mode, torch.zeros(1, 5), valid, basket_size=2, skip_single_basket=False)
    attn = torch.tensor([[[[0.6, 0.3, 0.05, 0.03, 0.02]]]])
    out = calibrate_weights(attn, assignment, 1.0)
    # [CLS] keeps 0.6; two content baskets share 0.4 equally, ratios kept inside each.
    expected = torch.tensor([[[[0.6, 0.2 * 0.3 / 0.35, 0.2 * 0.05 / 0.35, 0.2 * 0.6, 0.2 * 0.4]]]])
    assert torch.allclose(out, expected, atol=1e-6)


def test_length_weighting_gives_baskets_mass_proportional_to_length():
    valid = torch.ones(1, 5, dtype=torch.bool)
    zeros = torch.zeros(1, 5, dtype=torch.long)
    assignment = assign_baskets(valid, zeros, zeros.float(), valid, basket_size=3, skip_single_basket=False)
    attn = torch.tensor([[[[0.1, 0.1, 0.1, 0.3, 0.4]]]])
    out = calibrate_weights(attn, assignment, 1.0, basket_weighting="length")
    assert torch.allclose(out[..., :3].sum(-1), torch.tensor(0.6)) and torch.allclose(
        out[..., 3:].sum(-1), torch.tensor(0.4)
    )


def test_per_sequence_strength_scales_each_row():
    valid = torch.ones(2, 4, dtype=torch.bool)
    zeros = torch.zeros(2, 4, dtype=torch.long)
    assignment = assign_baskets(valid, zeros, zeros.float(), valid, basket_size=2, skip_single_basket=False)
    attn = torch.tensor([[[[0.7, 0.1, 0.1, 0.1]]], [[[0.7, 0.1, 0.1, 0.1]]]])
    out = calibrate_weights(attn, assignment, torch.tensor([0.0, 1.0]))
    assert torch.equal(out[0], attn[0])
    assert torch.allclose(out[1], torch.tensor([[[0.4375, 0.0625, 0.25, 0.25]]]))


def _extreme_states(seed, spread, weighting, late_rows=True):
    """Per-basket states whose log-sum-exps differ by up to hundreds; some rows see a basket only later."""
    gen = torch.Generator().manual_seed(seed)
    batch, heads, rows, baskets, dim = 2, 2, 3, 5, 4
    lse = torch.randn(batch, heads, rows, baskets, generator=gen, dtype=torch.float64) * spread
    lse = lse.masked_fill(torch.rand(lse.shape, generator=gen) < 0.3, float("-inf"))  # a row misses a basket
    first_missing = torch.rand(lse[..., 0].shape, generator=gen) < (0.5 if late_rows else 0.0)
    lse[..., 0] = torch.where(first_missing, float("-inf"), torch.randn(lse[..., 0].shape, generator=gen) * spread)
    out = torch.randn(batch, heads, rows, baskets, dim, generator=gen, dtype=torch.float64)
    present = torch.isfinite(lse)
    sizes = torch.randint(1, 9, (batch, 1, 1, baskets), generator=gen).double()
    shares = basket_shares(present, sizes, weighting).double()
    return lse, out, present, shares


def _merged(lse, out, present, shares, guard, buffer=0):
    merge = BasketMerge(guard=guard, buffer=buffer)
    for k in range(lse.shape[-1]):
        merge.add(lse[..., k].float(), out[..., k, :].float(), present[..., k], shares[..., k].float())
    return merge


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**16),
    st.floats(1.0, 300.0),
    st.floats(0.0, 1.0),
    st.sampled_from(["equal", "length"]),
    st.sampled_from([0, 2, 5]),  # online from the start, kept then folded online, kept and combined at once
)
def test_merge_survives_extreme_basket_masses(seed, spread, strength, weighting, buffer):
    """Baskets whose log-sum-exps differ by hundreds, or that a row sees only later, merge exactly."""
    lse, out, present, shares = _extreme_states(seed, spread, weighting)
    batch = lse.shape[0]
    merge = _merged(lse, out, present, shares, guard=True, buffer=buffer)
    n_content = present.sum(-1).float()
    lam = row_strength(torch.ones(batch, dtype=torch.bool), strength, n_content)
    got, original = merge.result(lam, n_content, torch.zeros(batch, 0), torch.zeros(batch, 0), original=True)

    mass = torch.nan_to_num(torch.softmax(lse, -1), nan=0.0)  # rows that see no basket: all -inf
    expected_original = (mass.unsqueeze(-1) * out).sum(-2)
    calibrated = (shares.unsqueeze(-1) * out).sum(-2)
    expected = lam.double() * calibrated + (1 - lam.double()) * expected_original
    assert torch.allclose(original.double(), expected_original, atol=1e-5)
    assert torch.allclose(got.double(), expected, atol=1e-5)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**16), st.floats(1.0, 20.0), st.sampled_from(["equal", "length"]))
def test_unguarded_merge_is_exact_unless_it_reports_overflow(seed, spread, weighting):
    lse, out, present, shares = _extreme_states(seed, spread, weighting, late_rows=False)
    guarded, unguarded = _merged(lse, out, present, shares, True), _merged(lse, out, present, shares, False)
    assert not guarded.overflowed()
    if unguarded.overflowed():
        return
    n_content = present.sum(-1).float()
    lam = row_strength(torch.ones(lse.shape[0], dtype=torch.bool), 0.5, n_content)
    none = torch.zeros(lse.shape[0], 0)
    expected = guarded.result(lam, n_content, none, none)[0]
    assert torch.allclose(unguarded.result(lam, n_content, none, none)[0], expected, atol=1e-5)


def test_unguarded_merge_reports_a_basket_that_outweighs_the_first_by_far():
    lse = torch.tensor([[[[0.0, 200.0]]]])
    out = torch.ones(1, 1, 1, 2, 3)
    present = torch.ones_like(lse, dtype=torch.bool)
    assert _merged(lse, out, present, torch.full_like(lse, 0.5), guard=False).overflowed()


@settings(max_examples=30, deadline=None)
@given(batches(), st.floats(0.0, 1.0))
def test_weight_calibration_built_once_serves_every_layer(case, strength):
    """The assignment's part is built once; calibrating two layers' rows equals calibrating each afresh."""
    assignment, attn, _, valid = case
    allowed = valid.view(valid.shape[0], 1, 1, -1)
    calibration = WeightCalibration(assignment, allowed)
    other = torch.softmax(torch.log(attn.clamp(min=1e-30)) * 0.5, -1) * allowed
    for rows in (attn, other):
        expected = calibrate_weights(rows, assignment, strength, key_allowed=allowed)
        assert torch.allclose(calibration(rows, strength), expected, atol=1e-6)


def test_merge_that_owns_its_outputs_writes_into_the_first():
    g = torch.Generator().manual_seed(0)
    outs = [torch.randn(1, 2, 3, 4, generator=g) for _ in range(3)]
    lses = [torch.randn(1, 2, 3, generator=g) for _ in range(3)]
    share = torch.full((1, 1, 3), 1 / 3)
    lam, n = torch.full((1, 1, 3, 1), 0.4), torch.full((1, 1, 3), 3.0)
    results = []
    for owns in (False, True):
        merge = BasketMerge(owns_outputs=owns)
        for lse, out in zip(lses, outs if not owns else [o.clone() for o in outs]):
            merge.add(lse, out, None, share)
        first = merge._kept[0][1]
        mixed, _ = merge.result(lam, n, torch.zeros(1, 0), torch.zeros(1, 0))
        results.append(mixed)
        assert (mixed.data_ptr() == first.data_ptr()) == owns
    assert torch.allclose(results[0], results[1], atol=1e-6)
