"""Fixtures for the DUMP-prefix tests: real MiniLM prefixed once per session; the prefix counter they check with."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest


def count_prefix_runs(input_ids: list[int], prefix_ids: list[int]) -> int:
    """How many times the full prefix occurs contiguously in ``input_ids`` (pure).

    Example:
        >>> count_prefix_runs([101, 7, 8, 5, 102], [7, 8])
        1
        >>> count_prefix_runs([7, 8, 7, 8], [7, 8])
        2
    """
    k = len(prefix_ids)
    if k == 0:
        return 0
    ids = list(input_ids)
    target = list(prefix_ids)
    return sum(1 for i in range(len(ids) - k + 1) if ids[i : i + k] == target)


@pytest.fixture(scope="session")
def dump_tokenizer(minilm_tokenizer):
    """The MiniLM tokenizer with [DUMP_1..4] prepended (no model needed)."""
    from llamaindex_posfair.dump.tokens import add_prefix_tokens

    return add_prefix_tokens(minilm_tokenizer, ["[DUMP_1]", "[DUMP_2]", "[DUMP_3]", "[DUMP_4]"])


@pytest.fixture(scope="session")
def small_triples():
    """16 shipped training triples (two batches of 8)."""
    from llamaindex_posfair.dump.data import bundled_split
    from llamaindex_posfair.dump.training import load_triples

    return load_triples(bundled_split("train"))[:16]


@pytest.fixture(scope="session")
def saved_dump_dir(tmp_path_factory, minilm_path) -> str:
    """Real MiniLM with an untrained K=4 prefix (mode full), saved once."""
    from sentence_transformers import SentenceTransformer

    from llamaindex_posfair.dump.config import DumpConfig
    from llamaindex_posfair.dump.model import add_dump_prefix, save_dump_model

    model = add_dump_prefix(SentenceTransformer(minilm_path, device="cpu"), DumpConfig(num_tokens=4, seed=3))
    out = tmp_path_factory.mktemp("dump_minilm") / "model"
    save_dump_model(model, out)
    return str(out)


@pytest.fixture()
def fresh_minilm(minilm_path):
    """A fresh real MiniLM SentenceTransformer (tests mutate it)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm_path, device="cpu")
