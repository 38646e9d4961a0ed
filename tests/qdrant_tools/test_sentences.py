"""The sentence splitter (``qdrant_tools.text``): hand-labelled hard cases and span invariants."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qdrant_tools.subchunks import SubchunkConfig
from qdrant_tools.subchunks import sentence_spans as reexported
from qdrant_tools.text import SPLITTER_TAG, sentence_spans

_BENCH = Path(__file__).resolve().parents[2] / "research" / "bench" / "sentence_splitters.py"


def _gold() -> list[tuple[str, list[str]]]:
    """The gold cases of ``research/bench/sentence_splitters.py`` (one home for the labels)."""
    spec = importlib.util.spec_from_file_location("sentence_splitters_bench", _BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GOLD


@pytest.mark.parametrize(("text", "gold"), _gold(), ids=lambda v: v[:30] if isinstance(v, str) else None)
def test_hard_cases_split_as_the_gold_says(text, gold):
    assert [text[a:b] for a, b in sentence_spans(text)] == gold


def test_the_brief_example_is_two_sentences_not_four():
    text = "Dr. Smith met Mr. Jones in the U.S. They talked."
    assert [text[a:b] for a, b in sentence_spans(text)] == ["Dr. Smith met Mr. Jones in the U.S.", "They talked."]


# Characters that exercise every rule: terminal punctuation, closers, quotes, newlines, list and
# heading markers, digits, upper and lower case, abbreviations as whole words.
PIECES = st.sampled_from(
    [" ", "  ", "\n", "\n\n", ".", "!", "?", "…", "...", '"', "'", ")", "(", "-", "#", "*", "1", "42",
     "a", "b", "The", "they", "Dr", "e.g", "etc", "U.S", "No", "J", "os.path", ":q", "\t"]
)  # fmt: skip
TEXT = st.lists(PIECES, max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_spans_are_ordered_disjoint_trimmed_and_cover_all_non_space_text(text):
    spans = sentence_spans(text)
    covered = [False] * len(text)
    prev_end = 0
    for a, b in spans:
        assert prev_end <= a < b <= len(text)
        piece = text[a:b]
        assert piece == piece.strip() and piece  # exact offsets, whitespace trimmed, never empty
        covered[a:b] = [True] * (b - a)
        prev_end = b
    assert all(covered[i] or ch.isspace() for i, ch in enumerate(text))


@settings(max_examples=100, deadline=None)
@given(TEXT, TEXT)
def test_a_blank_line_always_ends_a_sentence(left, right):
    text = f"{left}\n\n{right}"
    cut = len(left) + 2
    assert not any(a < cut - 2 and b > cut for a, b in sentence_spans(text))


def test_subchunks_use_the_same_splitter_and_name_it_in_their_key():
    assert reexported is sentence_spans
    assert SubchunkConfig(32, 0).key() == f"sub=32;ov=0;split={SPLITTER_TAG}"
