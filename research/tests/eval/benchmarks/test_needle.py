"""The needle builder: placement in the right third, length cap, disjoint splits, round trip."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from llamaindex_posfair.eval.facts import PEOPLE
from research.eval.benchmarks.loaders import load_needle
from research.eval.benchmarks.needle import (
    NeedleConfig,
    build_needle_benchmark,
    clean_gutenberg,
    clean_texinfo,
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


@pytest.fixture(scope="module")
def mixed():
    cfg = NeedleConfig(
        max_tokens=160, min_tokens=130, per_group=6, seed=5, facts="mixed", distractors=4, hard_negatives=1
    )
    return cfg, build_needle_benchmark(PROSE, WORDS, cfg)


def test_the_people_only_default_builds_what_it_built_before_distractors_existed(built):
    _, splits = built
    blob = json.dumps({s: [v.corpus, v.queries] for s, v in splits.items()}, sort_keys=True)
    assert hashlib.sha256(blob.encode()).hexdigest() == (
        "fb727e54406f87cb18de962e15781c9aa70e30a225e561e23710fc147bbf1ab6"
    )


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


def test_distractors_answer_no_query_and_hold_each_near_duplicate(mixed):
    _, splits = mixed
    for split in splits.values():
        docs = {d["_id"]: d["text"] for d in split.corpus}
        assert sum("-d" in d for d in docs) == 4 and len(docs) == 18 + 4
        assert all("-d" not in q["doc_id"] for q in split.queries)
        twins = [q for q in split.queries if q["hard_negatives"]]
        assert len(twins) == len({q["template"] for q in split.queries})  # one per template
        for q in twins:
            (did,) = q["hard_negatives"]
            assert q["entity"] not in docs[did]
            assert q["needle"].split(q["entity"])[-1] in docs[did]  # the same words after the name


def test_mixed_facts_are_about_people_things_and_places_named_only_in_their_passage(mixed):
    _, splits = mixed
    templates = {int(q["template"]) for s in splits.values() for q in s.queries}
    assert min(templates) < len(PEOPLE) <= max(templates)
    for split in splits.values():
        for q in split.queries:
            assert q["entity"] in q["text"] and q["entity"] in q["needle"] and q["answer"] in q["needle"]
            assert [d["_id"] for d in split.corpus if q["entity"] in d["text"]] == [q["doc_id"]]


def test_distractors_respect_the_length_cap(mixed):
    cfg, splits = mixed
    assert all(d["n_tokens"] <= cfg.max_tokens for s in splits.values() for d in s.corpus)


def test_hard_negatives_without_distractors_are_refused():
    with pytest.raises(ValueError, match="set distractors > 0"):
        NeedleConfig(hard_negatives=2)
    with pytest.raises(ValueError, match="facts must be 'people' or 'mixed'"):
        NeedleConfig(facts="animals")


def test_clean_texinfo_keeps_prose_and_drops_licence_menus_headings_and_code():
    prose = "The tool copies every input file to the output in turn, and stops at the first error it meets."
    info = (
        "preamble\n\x1f\nFile: t.info,  Node: Copying,  Up: Top\n\n" + prose.replace("tool", "licence") + "\n"
        "\x1f\nFile: t.info,  Node: Usage,  Next: Index,  Up: Top\n\n1 Usage\n*******\n\n"
        + prose
        + "  *Note Invoking::.\n\n* Menu:\n\n* Invoking::   How to run it, with all the options listed.\n\n"
        "‘--all’\n     Show every entry of the listing, including the hidden ones, and then exit.\n\n"
        "     $ tool --all --format=long /usr/lib /usr/share | sort -k2 > out.txt 2>&1 && echo done ok\n"
    )
    assert clean_texinfo(info).split("\n\n") == [
        prose + " see Invoking.",
        "Show every entry of the listing, including the hidden ones, and then exit.",
    ]
