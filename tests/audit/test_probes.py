"""Probe drawing: balance over thirds, positions, determinism, the saved file, questions."""

from __future__ import annotations

import pytest

from llamaindex_posfair.audit.probes import (
    GROUPS,
    AuditInputError,
    ProbeConfig,
    ProbeSet,
    build_probes,
    evidence_in,
    group_of,
    passage_spans,
)

CONFIG = ProbeConfig(per_group=6, kinds=("extractive", "planted"), seed=3)


@pytest.fixture(scope="module")
def probes(documents):
    return build_probes(documents, CONFIG)


def test_each_kind_is_balanced_over_the_thirds(probes):
    assert probes.group_counts("extractive") == {"begin": 6, "middle": 6, "end": 6}
    assert probes.group_counts("planted") == {"begin": 6, "middle": 6, "end": 6}


def test_a_probe_group_is_the_third_of_its_passage_that_holds_the_evidence(probes, documents):
    indexed = probes.documents(documents)
    for p in probes.probes:
        assert group_of(p.rel_position) == p.group
        spans = passage_spans(indexed[p.doc_id], CONFIG.passage_tokens, CONFIG.passage_overlap)
        a, b = spans[p.passage]
        assert a <= p.start < p.end <= b
        assert abs(((p.start + p.end) / 2 - a) / (b - a) - p.rel_position) < 1e-3
        assert indexed[p.doc_id][p.start : p.end].strip() == p.evidence.strip()


def test_extractive_queries_are_the_evidence_and_planted_ones_paraphrase_it(probes, documents):
    for p in probes.probes:
        if p.kind == "extractive":
            assert p.query == p.evidence and p.evidence in documents[p.doc_id]
        else:
            assert p.query != p.evidence and p.evidence not in documents[p.doc_id]


def test_the_same_seed_draws_the_same_probes_and_another_seed_others(documents, probes):
    assert build_probes(documents, CONFIG).to_dict() == probes.to_dict()
    other = build_probes(documents, ProbeConfig(per_group=6, kinds=("extractive", "planted"), seed=4))
    assert [p.query for p in other.probes] != [p.query for p in probes.probes]


def test_a_saved_probe_set_loads_back_equal(tmp_path, probes, documents):
    path = probes.save(tmp_path / "p.json")
    loaded = ProbeSet.load(path)
    assert loaded == probes
    assert loaded.documents(documents) == probes.documents(documents)


def test_probes_refuse_other_documents(probes, documents):
    changed = {**documents, "doc00.txt": documents["doc00.txt"] + " More."}
    with pytest.raises(AuditInputError, match="not the ones the probes were drawn from"):
        probes.documents(changed)


def test_a_subset_stays_balanced(probes):
    sub = probes.subset(9)
    assert len(sub.probes) == 9
    assert sub.group_counts() == {"begin": 3, "middle": 3, "end": 3}


def test_evidence_cut_by_a_node_boundary_counts_when_half_of_it_is_in_the_node():
    evidence = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    assert evidence_in("... alpha beta gamma delta epsilon zeta", evidence)
    assert not evidence_in("alpha beta gamma delta", evidence)
    assert evidence_in("X. Alpha   BETA gamma delta epsilon zeta eta theta iota kappa. Y.", evidence)


def test_questions_are_located_and_the_unlocatable_skipped(documents):
    doc = documents["doc03.txt"]
    first = doc[: doc.index(".") + 1]
    last = doc[doc.rindex(".", 0, len(doc) - 1) + 2 :]
    rows = [
        {"query": "what comes first?", "answer": first, "doc": "doc03"},
        {"query": "what comes last?", "answer": last},
        {"query": "nowhere?", "answer": "this text is in no document at all"},
    ]
    probes = build_probes(documents, ProbeConfig(kinds=("question",)), rows)
    assert [(p.query, p.group, p.doc_id) for p in probes.probes] == [
        ("what comes first?", "begin", "doc03.txt"),
        ("what comes last?", "end", "doc03.txt"),
    ]
    assert probes.skipped == {"nowhere?": "answer not found in the documents"}


def test_no_documents_no_probes():
    with pytest.raises(AuditInputError, match="no document with text"):
        build_probes({"a.txt": "   "}, ProbeConfig())


def test_config_errors_name_the_setting():
    with pytest.raises(ValueError, match="passage_overlap"):
        ProbeConfig(passage_tokens=100, passage_overlap=100)
    with pytest.raises(ValueError, match="kinds"):
        ProbeConfig(kinds=("llm",))
    assert set(GROUPS) == {"begin", "middle", "end"}


def test_with_overlapping_passages_no_evidence_lies_in_two_passages(documents):
    long_doc = {"long.txt": " ".join(documents[d] for d in sorted(documents)[:10])}
    config = ProbeConfig(per_group=5, kinds=("extractive", "planted"), passage_tokens=256, passage_overlap=64)
    probes = build_probes(long_doc, config)
    text = probes.documents(long_doc)["long.txt"]
    spans = passage_spans(text, 256, 64)
    assert len(spans) > 4
    for p in probes.probes:
        holders = [i for i, (a, b) in enumerate(spans) if a <= p.start and p.end <= b]
        assert holders == [p.passage]
    assert probes.group_counts("extractive") == {"begin": 5, "middle": 5, "end": 5}
    assert min(probes.group_counts("planted").values()) >= 2  # measured after planting: near, not exact, balance
