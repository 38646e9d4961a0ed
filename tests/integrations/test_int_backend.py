"""The backend seam of the LlamaIndex classes: local vs remote, chosen once, never both."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from llamaindex_posfair import PosFairEmbedding, PositionFairRerank
from llamaindex_posfair.integrations.backend import LocalEncoderBackend, cosine_scores

finite = st.integers(-5, 5).map(float)  # away from the norm floor (1e-12) that guards zero vectors


@settings(max_examples=60, deadline=None)
@given(q=arrays(np.float32, 8, elements=finite), d=arrays(np.float32, (5, 8), elements=finite))
def test_cosine_scores_are_bounded_and_scale_free(q, d):
    s = cosine_scores(q, d)
    assert s.shape == (5,) and np.all(np.abs(s) <= 1 + 1e-9)
    np.testing.assert_allclose(cosine_scores(3 * q, d * 0.5), s, atol=1e-6)


@pytest.mark.parametrize("cls", [PosFairEmbedding, PositionFairRerank])
def test_encoder_and_endpoint_together_are_refused(cls, fake_encoder):
    with pytest.raises(ValueError, match="encoder= runs the model in this process and endpoint="):
        cls(encoder=fake_encoder, endpoint="http://127.0.0.1:1")


def test_local_backend_counts_truncation_only_when_asked(fake_encoder):
    backend = LocalEncoderBackend(fake_encoder)  # max_length 32 = 30 words
    assert backend.embed(["w " * 40, "short"], "document")[1] == 1
    assert backend.embed(["w " * 40, "short"], "document", count=False)[1] == 0
