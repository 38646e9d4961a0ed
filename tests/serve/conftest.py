"""Fixtures of the serve tests: the tiny random BERT encoder, loaded once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_encoder(tiny_bert_path):
    from llamaindex_posfair import EncoderSpec

    return EncoderSpec(model=tiny_bert_path, device="cpu").load()
