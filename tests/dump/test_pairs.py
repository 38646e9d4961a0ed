"""Label-free pair construction (pure): uniform positions, removal rate, no leakage, determinism."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamaindex_posfair.dump.corpus import corpus_passages, read_corpus
from llamaindex_posfair.dump.pairs import (
    PairConfig,
    Passage,
    build_eval_set,
    build_pairs,
    draw_query,
    pair_statistics,
    position_counts,
    split_documents,
)

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()


def _passage_text(n_sentences: int, tag: str = "") -> str:
    return " ".join(f"Sentence {tag}{i} has exactly six words." for i in range(n_sentences))


def _passages(n_docs: int, per_doc: int, sentences: int = 9) -> list[Passage]:
    return [
        Passage(f"doc{d}.txt", i, _passage_text(sentences, f"d{d}p{i}s")) for d in range(n_docs) for i in range(per_doc)
    ]


def _chi_square(counts: list[int]) -> float:
    expected = sum(counts) / len(counts)
    return sum((c - expected) ** 2 / expected for c in counts)


def test_query_start_is_uniform_over_the_sentences_of_a_passage():
    text = _passage_text(10)
    rng, config = random.Random(0), PairConfig(remove_prob=0.0)
    starts = Counter(draw_query(text, rng, config).start for _ in range(5000))
    assert len(starts) == 10
    # chi-square with 9 degrees of freedom: 27.9 is the 0.001 critical value
    assert _chi_square(list(starts.values())) < 27.9


def test_query_positions_are_balanced_across_the_thirds_of_passages():
    pairs = build_pairs(_passages(4, 5), PairConfig(pairs_per_passage=150, seed=1))
    thirds = position_counts(p.rel_position for p in pairs)
    assert sum(thirds) == len(pairs) == 3000
    assert all(abs(c - 1000) < 100 for c in thirds), thirds


def test_multi_sentence_queries_never_run_past_the_passage_and_reach_its_last_sentence():
    text = _passage_text(6)
    rng, config = random.Random(2), PairConfig(remove_prob=0.0, max_query_sentences=3)
    spans = [draw_query(text, rng, config) for _ in range(2000)]
    assert max(q.end for q in spans) == len(text)
    assert {text[q.start : q.end].count(".") for q in spans} == {1, 2, 3}


@pytest.mark.parametrize("remove_prob", [0.0, 0.3, 1.0])
def test_removal_rate_matches_remove_prob(remove_prob):
    pairs = build_pairs(_passages(3, 4), PairConfig(remove_prob=remove_prob, pairs_per_passage=300))
    assert abs(pair_statistics(pairs)["removed_share"] - remove_prob) < 0.03


def test_a_removed_query_is_cut_out_of_its_positive_and_a_kept_one_is_not():
    pairs = build_pairs(_passages(2, 3), PairConfig(remove_prob=0.5, pairs_per_passage=20))
    removed = [p for p in pairs if p.removed]
    kept = [p for p in pairs if not p.removed]
    assert removed and kept
    assert all(p.query not in p.positive for p in removed)
    assert all(p.query in p.positive for p in kept)


def test_removal_never_leaves_a_positive_of_fewer_than_eight_words():
    text = "One two three four five six seven. Tiny."
    rng = random.Random(0)
    draws = [draw_query(text, rng, PairConfig(remove_prob=1.0)) for _ in range(50)]
    assert all(not q.removed for q in draws)


def test_sentences_shorter_than_min_query_words_never_make_a_query():
    text = "Too short. " * 5 + "This one sentence is long enough to count."
    rng = random.Random(0)
    assert {text[q.start : q.end] for q in (draw_query(text, rng, PairConfig()) for _ in range(50))} == {
        "This one sentence is long enough to count."
    }
    assert draw_query("Too short. Also short.", rng, PairConfig()) is None


def test_hard_negative_is_a_neighbouring_passage_of_the_same_document():
    passages = _passages(2, 4)
    pairs = build_pairs(passages, PairConfig(pairs_per_passage=10))
    index = {p.text: (p.doc_id, p.index) for p in passages}
    for pair in pairs:
        doc, i = index[pair.negative]
        assert pair.negative_kind == "neighbour" and doc == pair.doc_id and abs(i - pair.passage) == 1


def test_a_single_passage_document_takes_its_negative_from_another_document():
    passages = [Passage("alone.txt", 0, _passage_text(5, "a")), *_passages(1, 2)]
    pairs = [p for p in build_pairs(passages, PairConfig(pairs_per_passage=5)) if p.doc_id == "alone.txt"]
    assert {p.negative_kind for p in pairs} == {"other_document"}
    assert all(p.negative != passages[0].text for p in pairs)


def test_pairs_are_deterministic_given_the_seed_and_change_with_it():
    passages = _passages(3, 3)
    a = build_pairs(passages, PairConfig(seed=5))
    assert a == build_pairs(list(reversed(passages)), PairConfig(seed=5))
    assert a != build_pairs(passages, PairConfig(seed=6))


@settings(max_examples=50, deadline=None)
@given(
    ids=st.sets(st.text(alphabet="abcdefgh", min_size=1, max_size=6), min_size=1, max_size=30),
    fraction=st.floats(0.0, 0.9),
    seed=st.integers(0, 1000),
)
def test_document_split_is_a_deterministic_partition(ids, fraction, seed):
    train, dev = split_documents(ids, fraction, seed)
    assert set(train) | set(dev) == ids and not set(train) & set(dev)
    assert (train, dev) == split_documents(sorted(ids, reverse=True), fraction, seed)
    if fraction > 0 and len(ids) >= 2:
        assert dev and train


def test_no_text_of_a_dev_document_reaches_the_training_pairs(tmp_path):
    for d in range(10):
        marker = f"zq{d}marker"
        sentences = [f"The {marker} walked past {WORDS[(d + i) % len(WORDS)]} at dawn number {i}." for i in range(40)]
        (tmp_path / f"doc{d}.txt").write_text(" ".join(sentences), encoding="utf-8")
    corpus = read_corpus(tmp_path, dev_fraction=0.3, seed=4)
    train = corpus_passages(corpus.train, None, passage_tokens=60)
    pairs = build_pairs(train, PairConfig(pairs_per_passage=3))
    dev_markers = {d.text.split()[1] for d in corpus.dev}
    assert len(corpus.dev) == 3 and len(dev_markers) == 3
    texts = " ".join(f"{p.query} {p.positive} {p.negative}" for p in pairs)
    assert not any(m in texts for m in dev_markers)
    assert {p.doc_id for p in pairs} == {d.doc_id for d in corpus.train}


def test_kept_eval_set_queries_sit_in_their_passage():
    passages = _passages(2, 3)
    ev = build_eval_set(passages, 3, seed=0, removed=False)
    assert len(ev.queries) == 18 and ev.corpus == [p.text for p in passages]
    assert all(q in ev.corpus[r] for q, r in zip(ev.queries, ev.relevant))


def test_removed_eval_set_cuts_each_query_out_of_the_corpus():
    passages = _passages(2, 3)
    ev = build_eval_set(passages, 3, seed=0, removed=True)
    assert len(ev.queries) == 6 and ev.relevant == list(range(6))
    assert all(q not in ev.corpus[r] for q, r in zip(ev.queries, ev.relevant))


@pytest.mark.parametrize(
    ("field", "value"),
    [("remove_prob", 1.5), ("max_query_sentences", 0), ("pairs_per_passage", 0), ("dev_fraction", 1.0)],
)
def test_invalid_pair_settings_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        PairConfig(**{field: value})
