"""A large file is tokenized in segments and planned, embedded and written a window at a time, with exactly the
points of the whole-document plan; reruns stay idempotent and resumable."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from qdrant_tools.chunking import (
    ChunkingConfig,
    SourceDocument,
    chunk_bounds,
    chunk_text,
    content_hash,
    iter_spans,
    whitespace_spans,
)
from qdrant_tools.encoding import ChunkEncoder, PointEncoding, prepare_document
from qdrant_tools.ingest import IngestConfig, ingest_path, planned_windows
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import posfair_fields
from qdrant_tools.plan import DocumentPlan
from qdrant_tools.writer import QdrantWriter

MIXED = (
    "Tides in the Bay of Fundy reach 16 m.  Honeybees (Apis mellifera) dance;\n\n"
    "naïve café-owners say: «déjà vu»!  URLs like https://example.org/a_b?c=1&d=2 stay whole.\t"
    "Antidisestablishmentarianismxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx is long... "
    "数字 12,345.67 and emoji 🐝🐝 too.\n"
)
WINDOWED = IngestConfig(
    batch_size=8, show_progress=False, layout=NodeLayout(chunk_tokens=200, overlap_tokens=20, subchunks=None)
)


_WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def make_text(seed: int, n_words: int) -> str:
    """Words drawn at random (the qdrant_tools conftest's texts)."""
    return " ".join(np.random.default_rng(seed).choice(_WORDS, size=n_words)) + "."


def big_text() -> str:
    """About 82,000 characters: more than one tokenizer segment."""
    return make_text(7, 16000)


@pytest.mark.parametrize("segment_chars", [7, 40, 333, 5000])
def test_segmented_whitespace_spans_are_the_whole_text_spans(segment_chars):
    text = MIXED * 40
    assert list(iter_spans(text, whitespace_spans, segment_chars)) == whitespace_spans(text)


@pytest.mark.parametrize("segment_chars", [40, 300, 4000])
def test_segmented_tokenizer_spans_are_the_whole_text_spans(minilm_tokenizer, segment_chars, caplog):
    from qdrant_tools.chunking import tokenizer_spans

    spans_fn = tokenizer_spans(minilm_tokenizer)
    text = MIXED * 30
    with caplog.at_level("WARNING"):
        assert list(iter_spans(text, spans_fn, segment_chars)) == spans_fn(text)
    assert "in one call" not in caplog.text  # every cut agreed: no whole-text fallback


def test_a_tokenizer_whose_first_tokens_differ_is_resynced(caplog):
    def first_two_merged(text):  # the first two words of any text are one token
        spans = whitespace_spans(text)
        return [(spans[0][0], spans[1][1]), *spans[2:]] if len(spans) > 1 else spans

    text = make_text(3, 2000)  # longer than the margin: later segments start inside the text
    with caplog.at_level("WARNING"):
        assert list(iter_spans(text, first_two_merged, 100)) == first_two_merged(text)
    assert "in one call" not in caplog.text


def test_segments_are_tokenized_two_at_a_time_and_spans_come_in_order(minilm_tokenizer):
    import threading

    from qdrant_tools.chunking import tokenizer_spans

    spans_fn, threads = tokenizer_spans(minilm_tokenizer), set()

    def recording(text):
        threads.add(threading.get_ident())
        return spans_fn(text)

    text = big_text() * 3
    assert list(iter_spans(text, recording, 20_000)) == spans_fn(text)
    assert len(threads) == 2


def test_a_tokenizer_that_reads_across_cuts_still_gives_the_whole_text_spans(caplog):
    def every_seventh_merged(text):  # which tokens merge depends on where the text starts
        spans = whitespace_spans(text)
        out, i = [], 0
        while i < len(spans):
            if i % 7 == 0 and i + 1 < len(spans):
                out.append((spans[i][0], spans[i + 1][1]))
                i += 2
            else:
                out.append(spans[i])
                i += 1
        return out

    text = make_text(3, 2000)  # longer than the margin a segment tokenizes before its cut
    with caplog.at_level("WARNING"):
        assert list(iter_spans(text, every_seventh_merged, 100)) == every_seventh_merged(text)
    assert "tokenizing the rest in one call" in caplog.text


@pytest.mark.parametrize(("tokens", "overlap", "segment_chars"), [(3, 1, 20), (20, 4, 64), (200, 20, 1000)])
def test_chunks_of_a_segmented_text_are_those_of_the_whole_text(tokens, overlap, segment_chars):
    text = MIXED * 20 + make_text(5, 900)
    config = ChunkingConfig(tokens, overlap)
    whole = chunk_text(text, config, segment_chars=None)
    assert chunk_text(text, config, segment_chars=segment_chars) == whole
    bounds = chunk_bounds(text, config, segment_chars=segment_chars)
    assert [bounds.chunk(text, i) for i in range(len(bounds))] == whole


def _doc(text: str, doc_id: str = "big.txt") -> SourceDocument:
    return SourceDocument(doc_id, text, f"/data/{doc_id}", content_hash(text))


def test_point_ids_of_a_large_document_are_unchanged():
    """The ids the whole-document planner gave this document before planning was windowed."""
    layout = NodeLayout(chunk_tokens=200, overlap_tokens=20, subchunks=None)
    encoding = PointEncoding(layout, {}, {"calibrated": "f"}, {}, 256, ChunkingConfig(200, 20), "k", "whitespace")
    pcs = prepare_document(_doc(big_text()), encoding, whitespace_spans, lambda ts: [len(t.split()) + 2 for t in ts])
    ids = "".join(c.point_id for c in pcs)
    assert len(pcs) == 89 and pcs[0].point_id == "698d1fb4-f8a8-5682-9128-46f6520b3a9c"
    assert hashlib.sha256(ids.encode()).hexdigest() == (
        "6e47af9bd042edc340ab879191a6672cab7701a38a8647644bfa23cef96e4779"
    )


def test_windows_plan_the_points_of_the_whole_document(make_encoder):
    enc = make_encoder(max_length=256)
    encoding = WINDOWED.point_encoding({"calibrated": enc})
    encoder = ChunkEncoder({"calibrated": enc}, encoding)
    doc = _doc(big_text())
    done = frozenset({0, 5, 6, 40})
    whole = encoder.chunks(doc, skip=done)
    windows = list(planned_windows(encoder, [DocumentPlan(doc, "v", "partial", done)], batch_size=8))
    assert [len(w) for w in windows[:-1]] == [8] * (len(windows) - 1)
    assert [c for w in windows for c in w] == whole
    assert len(whole) == 89 - len(done)


def test_windows_span_documents_as_one_batch_did(make_encoder):
    enc = make_encoder(max_length=256)
    encoder = ChunkEncoder({"calibrated": enc}, WINDOWED.point_encoding({"calibrated": enc}))
    docs = [_doc(make_text(i, 300), f"d{i}.txt") for i in range(4)]
    windows = list(planned_windows(encoder, [DocumentPlan(d, "v", "new") for d in docs], batch_size=8))
    flat = [c for d in docs for c in encoder.chunks(d)]
    assert [c for w in windows for c in w] == flat
    assert [len(w) for w in windows] == [8] * (len(flat) // 8) + ([len(flat) % 8] if len(flat) % 8 else [])


def _stored(client) -> dict:
    pts, _ = client.scroll("c", limit=10_000, with_payload=True, with_vectors=True)
    return {str(p.id): p for p in pts}


@pytest.fixture
def big_file(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "big.txt").write_text(big_text())
    return root


def test_first_window_is_written_before_the_file_is_planned(client, make_encoder, big_file, monkeypatch):
    enc = make_encoder(max_length=256)
    planned, at_first_write = [], []
    chunks, upsert = ChunkEncoder.chunks, QdrantWriter.upsert

    def counting_chunks(self, *args, **kwargs):
        out = chunks(self, *args, **kwargs)
        planned.append(len(out))
        return out

    def spying_upsert(self, batch):
        at_first_write.append(sum(planned)) if not at_first_write else None
        return upsert(self, batch)

    monkeypatch.setattr(ChunkEncoder, "chunks", counting_chunks)
    monkeypatch.setattr(QdrantWriter, "upsert", spying_upsert)
    report = ingest_path(client, "c", big_file, {"calibrated": enc}, WINDOWED)
    assert report.chunks_written == sum(planned) == 89
    assert at_first_write == [8]  # one window planned when the first points were written

    # the stored points are those of the whole-document plan, embedded in one go
    monkeypatch.setattr(ChunkEncoder, "chunks", chunks)
    encoder = ChunkEncoder({"calibrated": enc}, WINDOWED.point_encoding({"calibrated": enc}))
    doc = SourceDocument("big.txt", big_text(), str(big_file / "big.txt"), content_hash(big_text()))
    expected = encoder.encode(encoder.chunks(doc))
    stored = _stored(client)
    assert sorted(stored) == sorted(expected.ids)
    for pid, payload, vector in zip(expected.ids, expected.payloads, expected.vectors["calibrated"]):
        assert stored[pid].payload == payload
        assert stored[pid].vector["calibrated"] == pytest.approx(vector.tolist(), abs=1e-6)


def test_a_crash_then_a_rerun_stores_every_chunk_once(client, make_encoder, big_file, monkeypatch):
    enc = make_encoder(max_length=256)
    upsert, calls = QdrantWriter.upsert, []

    def crashing_upsert(self, batch):
        calls.append(len(batch.ids))
        if len(calls) == 3:
            raise RuntimeError("worker lost")
        return upsert(self, batch)

    monkeypatch.setattr(QdrantWriter, "upsert", crashing_upsert)
    with pytest.raises(RuntimeError, match="worker lost"):
        ingest_path(client, "c", big_file, {"calibrated": enc}, WINDOWED)
    assert len(_stored(client)) == 16
    monkeypatch.setattr(QdrantWriter, "upsert", upsert)
    rerun = ingest_path(client, "c", big_file, {"calibrated": enc}, WINDOWED)
    assert rerun.resumed == ["big.txt"] and rerun.chunks_resumed == 16 and rerun.chunks_written == 89 - 16
    stored = _stored(client)
    assert len(stored) == 89 and sorted(posfair_fields(p.payload)["chunk_index"] for p in stored.values()) == list(
        range(89)
    )
    again = ingest_path(client, "c", big_file, {"calibrated": enc}, WINDOWED)
    assert again.chunks_written == 0 and again.unchanged == ["big.txt"]


def test_a_changed_large_file_is_written_before_its_old_chunks_are_deleted(client, make_encoder, big_file, monkeypatch):
    enc = make_encoder(max_length=256)
    ingest_path(client, "c", big_file, {"calibrated": enc}, WINDOWED)
    old = set(_stored(client))
    (big_file / "big.txt").write_text(big_text() + " omega")
    events = []
    upsert, delete_stale = QdrantWriter.upsert, QdrantWriter.delete_stale

    def spying_upsert(self, batch):
        events.append(("upsert", set(_stored(client)) >= old))
        return upsert(self, batch)

    def spying_delete(self, doc_id, version):
        events.append(("delete", doc_id))
        return delete_stale(self, doc_id, version)

    monkeypatch.setattr(QdrantWriter, "upsert", spying_upsert)
    monkeypatch.setattr(QdrantWriter, "delete_stale", spying_delete)
    report = ingest_path(client, "c", big_file, {"calibrated": enc}, WINDOWED)
    assert report.changed == ["big.txt"]
    assert [e[0] for e in events] == ["upsert"] * (len(events) - 1) + ["delete"]
    assert all(kept for kind, kept in events if kind == "upsert")  # the old version is whole while writing
    stored = _stored(client)
    assert not old & set(stored) and len(stored) == report.chunks_written


def test_tokenizer_spans_are_the_wrappers_offsets_whatever_the_shared_tokenizers_truncation(minilm_tokenizer):
    from qdrant_tools.chunking import tokenizer_spans

    text = MIXED * 30 + " 東京の天気は晴れです。 naïve café — “quoted” text\t\n end"
    call = minilm_tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    expected = [(s, e) for s, e in call["offset_mapping"] if e > s]
    backend = minilm_tokenizer.backend_tokenizer
    backend.enable_truncation(max_length=8)  # a setting left on the shared Rust tokenizer does not apply
    try:
        spans_fn = tokenizer_spans(minilm_tokenizer)
    finally:
        backend.no_truncation()
    assert len(expected) > 300 and spans_fn(text) == expected
