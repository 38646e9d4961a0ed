"""The identifier queries over natural-docs."""

from __future__ import annotations

import pytest

from research.identifiers import PER_GROUP, build_queries, candidates, load_identifiers


def test_an_identifier_qualifies_only_when_no_other_passage_holds_its_text():
    corpus = {"a": "call co_name here", "b": "and co_names there", "c": "use max_len once"}
    assert {c["identifier"] for c in candidates(corpus)} == {"max_len", "co_names"}


def test_the_group_is_the_third_of_the_passage_that_holds_the_identifier():
    words = ["word"] * 30
    words[25] = "late_name"
    (found,) = candidates({"d": " ".join(words)})
    assert (found["group"], found["doc_id"]) == ("end", "d")


def test_each_split_has_the_same_number_of_queries_per_group_and_no_shared_identifier():
    dev, test = load_identifiers("dev"), load_identifiers("test")
    assert dev.group_counts() == test.group_counts() == dict.fromkeys(("begin", "middle", "end"), PER_GROUP)
    assert not set(dev.queries.values()) & set(test.queries.values())


def test_every_query_names_an_identifier_found_in_its_passage_only():
    bench = load_identifiers("dev")
    rows = build_queries(dict(bench.corpus))["dev"]
    for r in rows[:50]:
        assert r["identifier"] in r["text"]
        holders = [d for d, t in bench.corpus.items() if r["identifier"].lower() in t.lower()]
        assert holders == [r["doc_id"]]


def test_an_unknown_split_is_refused_by_name():
    with pytest.raises(ValueError, match="no split 'train'"):
        load_identifiers("train")
