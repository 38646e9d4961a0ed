"""The needle builder: placement in the right third, length cap, disjoint splits, round trip."""

from __future__ import annotations

import random

import pytest

from llamaindex_posfair.eval.benchmarks.loaders import load_needle
from llamaindex_posfair.eval.benchmarks.needle import (
    NeedleConfig,
    build_needle_benchmark,
    clean_gutenberg,
    make_fact,
    split_units,
    write_needle_benchmark,
)

WORDS = lambda texts: [len(t.split()) + 2 for t in texts]  # noqa: E731  (2 "special tokens")

PROSE = {
    "a": "\n\n".join(
        " ".join(f"The {i}th sentence of paragraph {p} talks about little things in the garden." for i in range(8))
        for p in range(60)
    ),
    "b": "\n\n".join(
        " ".join(f"Another voice, number {i}, says something calm about the weather in part {p}." for i in range(8))
        for p in range(60)
    ),
}


@pytest.fixture(scope="module")
def built():
    cfg = NeedleConfig(max_tokens=160, min_tokens=130, per_group=6, splits=("dev", "test"), seed=3)
    return cfg, build_needle_benchmark(PROSE, WORDS, cfg)


def test_every_needle_sits_in_its_group_third(built):
    _cfg, splits = built
    bounds = {"begin": (0, 1 / 3), "middle": (1 / 3, 2 / 3), "end": (2 / 3, 1)}
    for split in splits.values():
        docs = {d["_id"]: d["text"] for d in split.corpus}
        for q in split.queries:
            lo, hi = bounds[q["group"]]
            assert lo <= q["rel_position"] <= hi
            text = docs[q["doc_id"]]
            assert text[q["needle_char_start"] :].startswith(q["needle"])
            # recompute the midpoint from the text itself
            before = len(text[: q["needle_char_start"]].split())
            total = len(text.split())
            mid = (before + q["needle_tokens"] / 2) / total
            assert mid == pytest.approx(q["rel_position"], abs=1e-3)


def test_lengths_respect_the_cap_and_groups_are_balanced(built):
    cfg, splits = built
    for split in splits.values():
        assert all(cfg.min_tokens - 40 <= d["n_tokens"] <= cfg.max_tokens for d in split.corpus)
        groups = [q["group"] for q in split.queries]
        assert {g: groups.count(g) for g in cfg.groups} == {"begin": 6, "middle": 6, "end": 6}


def test_splits_share_no_passage_text_and_names_are_unique(built):
    _, splits = built
    dev_sents = {s for d in splits["dev"].corpus for s in d["text"].split(". ")}
    test_sents = {s for d in splits["test"].corpus for s in d["text"].split(". ")}
    assert not dev_sents & test_sents
    needles = [q["needle"] for s in splits.values() for q in s.queries]
    assert len(set(needles)) == len(needles)


def test_only_the_evidence_passage_names_the_queried_person(built):
    _, splits = built
    for split in splits.values():
        for q in split.queries:
            assert q["entity"] in q["text"] and q["entity"] in q["needle"]
            assert q["answer"] in q["needle"]
            owners = [d["_id"] for d in split.corpus if q["entity"] in d["text"]]
            assert owners == [q["doc_id"]]


def test_round_trip_through_files(built, tmp_path):
    cfg, splits = built
    write_needle_benchmark(splits, tmp_path / "nb", "toy-needle", cfg)
    b = load_needle(tmp_path / "nb", "test")
    assert b.name == "toy-needle/test"
    assert b.group_order == ("begin", "middle", "end")
    assert len(b.queries) == 18 and len(b.corpus) == 18
    q0 = splits["test"].queries[0]
    assert b.qrels[q0["_id"]] == {q0["doc_id"]: 1.0}
    with pytest.raises(FileNotFoundError, match="available splits"):
        load_needle(tmp_path / "nb", "train")


def test_too_little_prose_is_explained():
    cfg = NeedleConfig(max_tokens=160, min_tokens=130, per_group=500)
    with pytest.raises(ValueError, match="lower per_group"):
        build_needle_benchmark(PROSE, WORDS, cfg)


def test_config_validation_names_the_parameter():
    with pytest.raises(ValueError, match="min_tokens must be in"):
        NeedleConfig(max_tokens=100, min_tokens=200)
    with pytest.raises(ValueError, match="per_group must be a positive integer, got 0"):
        NeedleConfig(per_group=0)


def test_make_fact_query_paraphrases_and_names_the_person():
    f = make_fact(random.Random(1), "Ada Ashwick", template=0)
    assert f["statement"].startswith("Ada Ashwick, a ")
    assert "Ada Ashwick" in f["query"] and f["query"] != f["statement"]
    assert f["answer"] in f["statement"]


def test_clean_gutenberg_strips_boilerplate_and_headings():
    raw = (
        "Header junk\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nCHAPTER I\n\n"
        "It was a bright cold day in April, and the clocks were striking\nthirteen, as they always did then.\n\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK X ***\nlicence text"
    )
    out = clean_gutenberg(raw)
    assert out == "It was a bright cold day in April, and the clocks were striking thirteen, as they always did then."


def test_units_are_the_sub_chunk_sentences_and_keep_closing_quotes():
    prose = 'Dr. Smith met Mr. Jones in the U.S. They talked. She said "Stop." Then she left.\n\nA new paragraph.'
    units = split_units(prose, WORDS, max_unit_tokens=50)
    assert units == [
        "Dr. Smith met Mr. Jones in the U.S.",
        "They talked.",
        'She said "Stop."',
        "Then she left.",
        "A new paragraph.",
    ]
