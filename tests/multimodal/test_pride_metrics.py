import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from llamaindex_posfair.multimodal.metrics import accuracy, consistency, per_slot_accuracy, rstd
from llamaindex_posfair.multimodal.pride import pride_log_prior, pride_scores


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(2, 8))
def test_pride_recovers_a_static_prior_under_cyclic_shifts(data, n):
    content = torch.tensor(data.draw(arrays(np.float64, (n,), elements=st.floats(-3, 3))))
    prior = torch.log_softmax(torch.tensor(data.draw(arrays(np.float64, (n,), elements=st.floats(-3, 3)))), 0)
    # pass t: content item i sits at slot (i + t) % n; observed ∝ prior(slot) * content(item)
    passes = []
    for t in range(n):
        at_slot = content[(torch.arange(n) - t) % n]
        passes.append(torch.log_softmax(prior + at_slot, 0))
    est = pride_log_prior(torch.stack(passes))
    assert torch.allclose(est, prior, atol=1e-9)


def test_pride_scores_divide_out_the_prior():
    obs = torch.log(torch.tensor([0.6, 0.4]))
    out = pride_scores(obs, torch.log(torch.tensor([0.75, 0.25])))
    assert int(out.argmax()) == 1


def test_pride_scores_reject_other_n():
    with pytest.raises(ValueError, match="different N"):
        pride_scores(torch.zeros(3), torch.zeros(4))


def test_accuracy_and_per_slot():
    assert accuracy([0, 1, 2, 2], [0, 1, 1, 2]) == 0.75
    assert per_slot_accuracy([0, 1, 2, 2], [0, 1, 1, 2], 3).tolist() == [1.0, 0.5, 1.0]


def test_rstd_sample_vs_population():
    assert rstd([100.0, 0.0], "population") == 50.0
    assert rstd([100.0, 0.0], "sample") == pytest.approx(50.0 * math.sqrt(2))
    assert rstd([100.0, 0.0]) == rstd([100.0, 0.0], "sample")  # sample is the default


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, st.integers(2, 12), elements=st.floats(0, 100)))
def test_rstd_matches_numpy(a):
    assert rstd(a, "sample") == pytest.approx(float(np.std(a, ddof=1)), abs=1e-9)
    assert rstd(a, "population") == pytest.approx(float(np.std(a, ddof=0)), abs=1e-9)


def test_rstd_rejects_unknown_kind():
    with pytest.raises(ValueError, match="sample"):
        rstd([1.0, 2.0], "biased")


def test_consistency_counts_rows_with_one_choice():
    assert consistency([[3, 3, 3], [1, 2, 1], [0, 0, 0], [2, 2, 1]]) == 0.5
