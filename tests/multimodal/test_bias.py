import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from llamaindex_posfair.multimodal.bias import (
    conditional_bias,
    conditional_log_prob_matrix,
    ideal_matrix,
    restricted_log_probs,
)

finite = st.floats(-5, 5, allow_nan=False, allow_infinity=False)


def _square(n):
    return arrays(np.float64, (n, n), elements=finite)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 8), data=st.data(), margin=st.floats(0.0, 5.0))
def test_planted_bias_recovered_up_to_row_constants_and_identity(n, data, margin):
    planted = torch.tensor(data.draw(_square(n)))
    # synthetic log-probs: content margin on the diagonal + planted bias, log-softmax per row
    lg = restricted_log_probs(margin * torch.eye(n, dtype=torch.float64) + planted)
    d = conditional_bias(lg) - planted
    off = ~torch.eye(n, dtype=torch.bool)
    # every row of d is constant off the diagonal ...
    row_const = d.masked_fill(~off, float("nan")).nanmean(dim=1, keepdim=True)
    assert torch.allclose(d[off], row_const.expand(n, n)[off], atol=1e-9)
    # ... and the diagonal exceeds it by the same scalar in every row
    excess = d.diagonal() - row_const.squeeze(1)
    assert torch.allclose(excess, excess[0].expand(n), atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 8), data=st.data())
def test_bias_has_zero_mean(n, data):
    lg = torch.tensor(data.draw(_square(n)))
    assert abs(float(conditional_bias(lg).mean())) < 1e-9


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 8), data=st.data())
def test_ideal_matrix_constants_follow_the_construction(n, data):
    lg = torch.tensor(data.draw(_square(n)))
    ideal, _b, k = ideal_matrix(lg)
    margins = [float(lg[g, g] - lg[g, j]) for g in range(n) for j in range(n) if g != j]
    assert k == pytest.approx(max(margins))
    assert float(ideal.mean()) == pytest.approx(float(lg.mean()), abs=1e-9)
    assert float(ideal[0, 0] - ideal[0, 1]) == pytest.approx(k)


def test_conditional_matrix_averages_per_gold_slot():
    lp = torch.tensor([[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0]])
    lg = conditional_log_prob_matrix(lp, torch.tensor([0, 0, 1]))
    assert lg.tolist() == [[-2.0, -3.0], [-5.0, -6.0]]


def test_conditional_matrix_rejects_unvisited_slot():
    with pytest.raises(ValueError, match=r"slot\(s\) \[1\].*cyclic shifts"):
        conditional_log_prob_matrix(torch.zeros(2, 2), torch.tensor([0, 0]))


def test_ideal_matrix_rejects_non_square():
    with pytest.raises(ValueError, match="square"):
        ideal_matrix(torch.zeros(2, 3))
