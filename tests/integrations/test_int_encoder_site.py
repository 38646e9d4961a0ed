"""The encoder site of the LlamaIndex classes: in process vs endpoint, chosen once, never both."""

from __future__ import annotations

import pytest

from llamaindex_posfair import PosFairEmbedding, PosFairRerank
from llamaindex_posfair.integrations.encoder_site import InProcessEncoder


@pytest.mark.parametrize("cls", [PosFairEmbedding, PosFairRerank])
def test_encoder_and_endpoint_together_are_refused(cls, fake_encoder):
    with pytest.raises(ValueError, match="encoder= runs the model in this process and endpoint="):
        cls(encoder=fake_encoder, endpoint="http://127.0.0.1:1")


def test_the_in_process_site_counts_truncation_only_when_asked(fake_encoder):
    site = InProcessEncoder(fake_encoder)  # max_length 32 = 30 words
    assert site.embed(["w " * 40, "short"], "document")[1] == 1
    assert site.embed(["w " * 40, "short"], "document", count=False)[1] == 0
