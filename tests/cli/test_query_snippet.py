"""``posfair query``'s printed snippet: the matching sub-chunk, widened to whole words."""

from __future__ import annotations

from llamaindex_posfair.cli.query import _snippet


def test_evidence_inside_a_word_is_widened_to_whole_words():
    text = "Funnels amplify it. The bay magnifies the tide until the water rises."
    start = text.index("fies the tide")  # a token window of a long sentence may start mid-word
    row = {"text": text, "start_char": 100, "evidence": [100 + start, 100 + text.index(" until") - 2]}
    assert _snippet(row) == "magnifies the tide"


def test_without_evidence_the_node_start_is_shown():
    assert _snippet({"text": "one  two\nthree", "start_char": 0}, width=7) == "one two..."
