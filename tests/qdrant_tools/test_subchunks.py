"""Sentence-aligned sub-chunks: budget, overlap, and no fact cut when it fits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qdrant_tools.chunking import whitespace_spans
from qdrant_tools.subchunks import SubchunkConfig, sentence_spans, subchunk_text

WORDS = st.sampled_from("the river carried silt past old mills and quiet towns toward sea".split())
SENTENCE = st.lists(WORDS, min_size=1, max_size=14).map(lambda ws: " ".join(ws).capitalize() + ".")
TEXT = st.lists(SENTENCE, min_size=1, max_size=25).map(" ".join)
CONFIG = st.builds(SubchunkConfig, max_tokens=st.integers(4, 40), overlap_sentences=st.integers(0, 2))


def _n_tokens(text: str) -> int:
    return len(whitespace_spans(text))


@settings(max_examples=150, deadline=None)
@given(TEXT, CONFIG)
def test_subchunks_are_exact_slices_within_budget(text, config):
    longest = max(_n_tokens(text[a:b]) for a, b in sentence_spans(text))
    for sub in subchunk_text(text, config):
        assert sub.text == text[sub.start_char : sub.end_char]
        assert sub.n_tokens == _n_tokens(sub.text)
        if longest <= config.max_tokens:
            assert sub.n_tokens <= config.max_tokens


@settings(max_examples=150, deadline=None)
@given(TEXT, CONFIG)
def test_a_sentence_that_fits_is_never_cut(text, config):
    subs = subchunk_text(text, config)
    for a, b in sentence_spans(text):
        if _n_tokens(text[a:b]) <= config.max_tokens:
            assert any(s.start_char <= a and b <= s.end_char for s in subs), text[a:b]


@settings(max_examples=100, deadline=None)
@given(TEXT, CONFIG)
def test_every_token_is_covered_and_order_kept(text, config):
    subs = subchunk_text(text, config)
    for a, b in whitespace_spans(text):
        assert any(s.start_char <= a and b <= s.end_char for s in subs)
    assert [s.start_char for s in subs] == sorted(s.start_char for s in subs)
    assert len({s.start_char for s in subs}) == len(subs)


def test_one_sentence_overlap_shares_the_boundary_sentence():
    text = "One fish. Two fish. Red fish. Blue fish."
    subs = subchunk_text(text, SubchunkConfig(max_tokens=4, overlap_sentences=1))
    assert [s.text for s in subs] == ["One fish. Two fish.", "Two fish. Red fish.", "Red fish. Blue fish."]
    plain = subchunk_text(text, SubchunkConfig(max_tokens=4, overlap_sentences=0))
    assert [s.text for s in plain] == ["One fish. Two fish.", "Red fish. Blue fish."]


def test_an_overlong_sentence_becomes_overlapping_windows():
    text = " ".join(f"w{i}" for i in range(20)) + "."
    subs = subchunk_text(text, SubchunkConfig(max_tokens=8, overlap_sentences=0))
    assert all(s.n_tokens <= 8 for s in subs) and subs[-1].text.endswith("w19.")
    assert subs[1].start_char < subs[0].end_char  # windows overlap, so no word pair is lost at a cut


def test_headings_and_list_items_end_sentences():
    text = "# Tides\nThe moon pulls.\n\n- spring tides\n- neap tides"
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "# Tides\nThe moon pulls.",
        "- spring tides",
        "- neap tides",
    ]


@pytest.mark.parametrize("kw", [{"max_tokens": 3}, {"max_tokens": True}, {"overlap_sentences": -1}])
def test_invalid_config_is_named(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        SubchunkConfig(**kw)
