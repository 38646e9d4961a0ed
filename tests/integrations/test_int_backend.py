"""The backend seam of the LlamaIndex classes: local vs remote, chosen once, never both."""

from __future__ import annotations

import pytest

from llamaindex_posfair import PosFairEmbedding, PosFairRerank
from llamaindex_posfair.integrations.backend import LocalEncoderBackend


@pytest.mark.parametrize("cls", [PosFairEmbedding, PosFairRerank])
def test_encoder_and_endpoint_together_are_refused(cls, fake_encoder):
    with pytest.raises(ValueError, match="encoder= runs the model in this process and endpoint="):
        cls(encoder=fake_encoder, endpoint="http://127.0.0.1:1")


def test_local_backend_counts_truncation_only_when_asked(fake_encoder):
    backend = LocalEncoderBackend(fake_encoder)  # max_length 32 = 30 words
    assert backend.embed(["w " * 40, "short"], "document")[1] == 1
    assert backend.embed(["w " * 40, "short"], "document", count=False)[1] == 0
