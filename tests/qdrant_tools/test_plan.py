"""plan_ingestion and CompletionTracker: pure, so checked as properties over random stored states."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qdrant_tools.chunking import SourceDocument
from qdrant_tools.ids import document_version
from qdrant_tools.plan import CompletionTracker, StoredVersion, plan_ingestion

KEY = "tokens=20;overlap=4;spans=whitespace"
FPS = {"calibrated": "f1"}

#: What the collection holds of one document: of its current version (None, or the chunk indices
#: stored and n_chunks) and how many other (stale) versions.
doc_state = st.tuples(
    st.none() | st.integers(1, 8).flatmap(lambda n: st.tuples(st.frozensets(st.integers(0, n - 1)), st.just(n))),
    st.integers(0, 2),
)


def doc(i: int) -> SourceDocument:
    return SourceDocument(f"d{i}.md", f"text {i}", f"/data/d{i}.md", f"hash{i}")


def version(d: SourceDocument) -> str:
    return document_version(d.content_hash, KEY, FPS)


def build_stored(docs, states, extra_ids=()) -> dict:
    stored: dict = {}
    for d, (current, n_stale) in zip(docs, states):
        versions = {f"stale{k}": StoredVersion(frozenset({0}), 1) for k in range(n_stale)}
        if current is not None:
            versions[version(d)] = StoredVersion(*current)
        if versions:
            stored[d.doc_id] = versions
    for extra in extra_ids:
        stored[extra] = {"old": StoredVersion(frozenset({0}), 1)}
    return stored


def expected_action(current, n_stale) -> str:
    if current is None:
        return "changed" if n_stale else "new"
    chunks, n = current
    if chunks != frozenset(range(n)):
        return "partial"
    return "cleanup" if n_stale else "unchanged"


@settings(max_examples=200, deadline=None)
@given(states=st.lists(doc_state, max_size=12))
def test_each_document_is_classified_by_what_is_stored_of_it(states):
    docs = [doc(i) for i in range(len(states))]
    plan = plan_ingestion(build_stored(docs, states), docs, KEY, FPS)
    assert [p.doc for p in plan.documents] == docs  # every document once, in input order
    for p, (current, n_stale) in zip(plan.documents, states):
        assert p.action == expected_action(current, n_stale)
        assert p.version == version(p.doc)
        assert p.stale == tuple(f"stale{k}" for k in range(n_stale))
        assert p.done == (current[0] if current is not None else frozenset())


@settings(max_examples=100, deadline=None)
@given(states=st.lists(doc_state, max_size=12))
def test_only_partly_stored_documents_resume_and_only_their_stored_chunks_count(states):
    docs = [doc(i) for i in range(len(states))]
    plan = plan_ingestion(build_stored(docs, states), docs, KEY, FPS)
    partial = [(c, s) for c, s in states if expected_action(c, s) == "partial"]
    assert plan.chunks_resumed == sum(len(c[0]) for c, _ in partial)
    assert [p.action for p in plan.to_encode] == [
        expected_action(c, s) for c, s in states if expected_action(c, s) in ("new", "changed", "partial")
    ]


def test_another_encoder_fingerprint_makes_a_complete_document_changed():
    d = doc(0)
    stored = {d.doc_id: {version(d): StoredVersion(frozenset({0, 1}), 2)}}
    plan = plan_ingestion(stored, [d], KEY, {"calibrated": "f2"})
    assert plan.documents[0].action == "changed" and plan.documents[0].stale == (version(d),)


def test_duplicate_document_ids_are_refused():
    with pytest.raises(ValueError, match=r"document ids must be distinct, got duplicates \['d0.md'\]"):
        plan_ingestion({}, [doc(0), doc(1), doc(0)], KEY, FPS)


@given(n_docs=st.integers(0, 5), extra=st.sets(st.sampled_from(["gone1.md", "gone2.md", "gone3.md"])))
def test_prune_candidates_are_stored_documents_missing_from_the_input_only_when_asked(n_docs, extra):
    docs = [doc(i) for i in range(n_docs)]
    stored = build_stored(docs, [((frozenset({0}), 1), 0)] * n_docs, extra_ids=extra)
    assert plan_ingestion(stored, docs, KEY, FPS, prune=True).prune == tuple(sorted(extra))
    assert plan_ingestion(stored, docs, KEY, FPS).prune == ()


@settings(max_examples=200, deadline=None)
@given(
    n_chunks=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    data=st.data(),
)
def test_tracker_reports_each_document_once_exactly_when_its_last_chunk_arrives(n_chunks, data):
    done = {f"d{i}": data.draw(st.frozensets(st.integers(0, n - 1))) for i, n in enumerate(n_chunks)}
    missing = [(f"d{i}", j, n) for i, n in enumerate(n_chunks) for j in range(n) if j not in done[f"d{i}"]]
    repeats = data.draw(st.lists(st.sampled_from(missing), max_size=4)) if missing else []  # a retried task
    deliveries = data.draw(st.permutations(missing + repeats))
    tracker = CompletionTracker(done)
    seen: dict[str, set[int]] = {k: set(v) for k, v in done.items()}
    reported = []
    for doc_id, j, n in deliveries:
        seen[doc_id].add(j)
        got = tracker.add([(doc_id, j, n)])
        complete_now = seen[doc_id] == set(range(n)) and doc_id not in reported
        assert got == ([doc_id] if complete_now else [])
        reported += got
    assert sorted(reported) == sorted({d for d, _, _ in missing})  # a doc with nothing missing is never written


@settings(max_examples=100, deadline=None)
@given(states=st.lists(doc_state, max_size=10), chunks_now=st.lists(st.integers(1, 8), min_size=10, max_size=10))
def test_carrying_out_a_plan_makes_the_next_plan_a_noop(states, chunks_now):
    docs = [doc(i) for i in range(len(states))]
    stored = build_stored(docs, states, extra_ids=["gone.md"])
    plan = plan_ingestion(stored, docs, KEY, FPS, prune=True)
    after = {k: dict(v) for k, v in stored.items()}
    for p, n_new in zip(plan.documents, chunks_now):
        versions = after.setdefault(p.doc.doc_id, {})
        if p.action in ("new", "changed"):
            versions[p.version] = StoredVersion(frozenset(range(n_new)), n_new)
        elif p.action == "partial":
            n = versions[p.version].n_chunks
            versions[p.version] = StoredVersion(frozenset(range(n)), n)
        for s in p.stale:  # the writer deletes stale versions once the new one is complete
            del versions[s]
    for gone in plan.prune:
        del after[gone]
    again = plan_ingestion(after, docs, KEY, FPS, prune=True)
    assert [p.action for p in again.documents] == ["unchanged"] * len(docs) and again.prune == ()


def test_prune_under_a_folder_lists_only_documents_read_from_under_it():
    stored = {
        "a.md": {"v": StoredVersion(frozenset({0}), 1, "/data/a.md")},
        "sub/b.md": {"v": StoredVersion(frozenset({0}), 1, "/data/sub/b.md")},
        "c.md": {"v": StoredVersion(frozenset({0}), 1, "/elsewhere/c.md")},
        "subway.md": {"v": StoredVersion(frozenset({0}), 1, "/data/subway.md")},
        "old.md": {"v": StoredVersion(frozenset({0}), 1, None)},
    }
    everywhere = plan_ingestion(stored, [], KEY, FPS, prune=True)
    under_sub = plan_ingestion(stored, [], KEY, FPS, prune=True, prune_under="/data/sub")
    under_data = plan_ingestion(stored, [], KEY, FPS, prune=True, prune_under="/data")
    assert everywhere.prune == ("a.md", "c.md", "old.md", "sub/b.md", "subway.md")
    assert under_sub.prune == ("sub/b.md",)  # not /data/subway.md: a sibling sharing the prefix
    assert under_data.prune == ("a.md", "sub/b.md", "subway.md")
