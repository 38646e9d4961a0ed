from __future__ import annotations

import pytest

from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import posfair_fields
from qdrant_tools.schema import ensure_collection
from qdrant_tools.spec import CollectionMismatchError, CollectionSpec, VectorConfig
from qdrant_tools.store import open_store
from qdrant_tools.writer import QdrantWriter

# the single-vector layout: these tests are about planning and writing, not sub-chunks (test_subchunk_ingest.py)
CFG = IngestConfig(
    batch_size=4, show_progress=False, layout=NodeLayout(chunk_tokens=20, overlap_tokens=4, subchunks=None)
)


def stored_records(client, name="c"):
    """doc_id -> version -> StoredVersion, as the writer reads it."""
    spec = CollectionSpec(name=name, vectors=[VectorConfig(name="calibrated", size=16)])
    return QdrantWriter(client, spec).read_state()


def points(client, name="c"):
    pts, _ = client.scroll(name, limit=10_000, with_payload=True, with_vectors=True)
    return {str(p.id): p for p in pts}


def test_ingest_twice_gives_identical_points(client, encoder, corpus):
    r1 = ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    first = points(client)
    r2 = ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    second = points(client)
    assert r1.chunks_written == len(first) > 3
    assert set(first) == set(second)
    assert r2.chunks_written == 0 and sorted(r2.unchanged) == ["a.txt", "b.md", "sub/c.txt"]


def test_each_chunk_payload_points_back_into_its_file(client, encoder, corpus):
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    for p in points(client).values():
        text = (corpus / posfair_fields(p.payload)["doc_id"]).read_text()
        assert (
            text[posfair_fields(p.payload)["start_char"] : posfair_fields(p.payload)["end_char"]]
            == posfair_fields(p.payload)["text"]
        )
        assert posfair_fields(p.payload)["encoder_fingerprints"] == {"calibrated": encoder.fingerprint()}


def test_changed_file_replaces_only_its_chunks(client, encoder, corpus):
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    before = points(client)
    (corpus / "a.txt").write_text("a completely different and much shorter text.")
    r = ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    after = points(client)
    a_before = {i for i, p in before.items() if posfair_fields(p.payload)["doc_id"] == "a.txt"}
    a_after = [p for p in after.values() if posfair_fields(p.payload)["doc_id"] == "a.txt"]
    assert r.changed == ["a.txt"] and r.chunks_deleted == len(a_before)
    assert (
        len(a_after) == 1
        and posfair_fields(a_after[0].payload)["text"] == "a completely different and much shorter text."
    )
    assert not a_before & set(after)
    others = {i: p for i, p in before.items() if posfair_fields(p.payload)["doc_id"] != "a.txt"}
    assert all(after[i].payload == p.payload and after[i].vector == p.vector for i, p in others.items())


def test_failure_mid_ingest_then_rerun_stores_every_chunk_once(client, make_encoder, corpus):
    reference = open_store(":memory:", engine="local")
    ingest_path(reference, "c", corpus, {"calibrated": make_encoder()}, CFG)
    expected = set(points(reference))
    with pytest.raises(RuntimeError, match="injected failure"):
        ingest_path(client, "c", corpus, {"calibrated": make_encoder(fail_on_call=3)}, CFG)
    assert 0 < len(points(client)) < len(expected)
    ingest_path(client, "c", corpus, {"calibrated": make_encoder()}, CFG)
    got = points(client)
    assert set(got) == expected
    keys = [(posfair_fields(p.payload)["doc_id"], posfair_fields(p.payload)["chunk_index"]) for p in got.values()]
    assert len(keys) == len(set(keys))


def test_crash_before_stale_delete_keeps_old_version_then_rerun_cleans(client, encoder, corpus, monkeypatch):
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    n_old = sum(1 for p in points(client).values() if posfair_fields(p.payload)["doc_id"] == "a.txt")
    (corpus / "a.txt").write_text("new words for a. " * 30)

    def boom(*a, **k):
        raise ConnectionError("injected delete failure")

    monkeypatch.setattr(client, "delete", boom)
    with pytest.raises(ConnectionError):
        ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    versions = stored_records(client, "c")["a.txt"]
    assert len(versions) == 2  # old and new version both stored, both complete: nothing lost
    assert all(v.chunks == set(range(v.n_chunks)) for v in versions.values())
    monkeypatch.undo()
    r = ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    assert r.cleaned == ["a.txt"] and r.chunks_written == 0 and r.chunks_deleted == n_old
    assert len(stored_records(client, "c")["a.txt"]) == 1


def test_schema_mismatch_raises_before_any_write(client, encoder, corpus):
    ensure_collection(client, "c", [VectorConfig(name="calibrated", size=8)])
    with pytest.raises(CollectionMismatchError, match="size 8.*size 16"):
        ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    assert client.count("c").count == 0 and encoder.calls == []


def test_two_named_vectors_per_chunk(client, make_encoder, corpus):
    van, cal = make_encoder(salt="v"), make_encoder(salt="c")
    ingest_path(client, "c", corpus, {"vanilla": van, "calibrated": cal}, CFG)
    p = next(iter(points(client).values()))
    assert set(p.vector) == {"vanilla", "calibrated"} and p.vector["vanilla"] != p.vector["calibrated"]


def test_new_encoder_fingerprint_reembeds_and_leaves_one_version(client, make_encoder, corpus):
    old, new = make_encoder(salt="x"), make_encoder(salt="y")
    ingest_path(client, "c", corpus, {"calibrated": old}, CFG)
    n = client.count("c").count
    r = ingest_path(client, "c", corpus, {"calibrated": new}, CFG)
    assert len(r.changed) == 3 and client.count("c").count == n
    assert {posfair_fields(p.payload)["encoder_fingerprints"]["calibrated"] for p in points(client).values()} == {
        new.fingerprint()
    }
    assert new.fingerprint() != old.fingerprint()


def test_bad_files_are_skipped_and_reported(client, encoder, corpus):
    (corpus / "empty.txt").write_text("")
    (corpus / "bin.txt").write_bytes(b"\x00\x01")
    (corpus / "latin.md").write_bytes(b"caf\xe9")
    r = ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    assert {s.source.rsplit("/", 1)[-1] for s in r.skipped} == {"empty.txt", "bin.txt", "latin.md"}
    assert {posfair_fields(p.payload)["doc_id"] for p in points(client).values()} == {"a.txt", "b.md", "sub/c.txt"}
    assert "skipped" in r.summary() and "not UTF-8" in r.summary()


def test_chunks_longer_than_window_are_counted_as_truncated(client, make_encoder, corpus):
    enc = make_encoder(max_length=12)
    r = ingest_path(
        client,
        "c",
        corpus,
        {"calibrated": enc},
        IngestConfig(show_progress=False, layout=NodeLayout(chunk_tokens=20, overlap_tokens=0, subchunks=None)),
    )
    truncated = [p for p in points(client).values() if posfair_fields(p.payload)["truncated"]]
    assert r.chunks_truncated == len(truncated) > 0 and "truncated" in r.summary()


def test_default_chunking_fits_the_window(client, make_encoder, corpus):
    enc = make_encoder(max_length=12)
    r = ingest_path(
        client, "c", corpus, {"calibrated": enc}, IngestConfig(show_progress=False, layout=NodeLayout(subchunks=None))
    )
    assert r.chunks_truncated == 0
    assert max(posfair_fields(p.payload)["n_tokens"] for p in points(client).values()) <= 12


def test_removed_file_is_kept_unless_prune(client, encoder, corpus):
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    (corpus / "b.md").unlink()
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    assert "b.md" in stored_records(client, "c")
    r = ingest_path(
        client,
        "c",
        corpus,
        {"calibrated": encoder},
        IngestConfig(
            prune=True, show_progress=False, layout=NodeLayout(chunk_tokens=20, overlap_tokens=4, subchunks=None)
        ),
    )
    assert r.pruned == ["b.md"] and "b.md" not in stored_records(client, "c")


@pytest.mark.parametrize("engine", ["edge", "local"])
def test_state_survives_reopening_embedded_storage(tmp_path, encoder, corpus, engine):
    c1 = open_store(tmp_path / "q", engine=engine)
    ingest_path(c1, "c", corpus, {"calibrated": encoder}, CFG)
    ids = set(points(c1))
    c1.close()
    c2 = open_store(tmp_path / "q", engine=engine)
    r = ingest_path(c2, "c", corpus, {"calibrated": encoder}, CFG)
    assert r.chunks_written == 0 and set(points(c2)) == ids
    c2.close()


def test_foreign_points_in_collection_are_never_deleted(client, encoder, corpus):
    from qdrant_client import models

    ensure_collection(client, "c", [VectorConfig(name="calibrated", size=16)])
    client.upsert(
        "c",
        [models.PointStruct(id=1, vector={"calibrated": [1.0] + [0.0] * 15}, payload={"doc_id": "a.txt"})],
        wait=True,
    )
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    (corpus / "a.txt").write_text("changed.")
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    assert client.retrieve("c", [1])[0].payload == {"doc_id": "a.txt"}


# ---------------------------------------------------------------------- one writer: indexes, resume, retries, report
class CountingEncoder:
    """Wraps an encoder and records every text it embeds."""

    def __init__(self, inner):
        self._inner = inner
        self.texts: list[str] = []

    def __getattr__(self, name):
        return getattr(self._inner, name)

    @property
    def dimension(self):
        return self._inner.dimension

    @property
    def max_length(self):
        return self._inner.max_length

    def encode_documents(self, texts):
        self.texts.extend(texts)
        return self._inner.encode_documents(texts)


def test_ingestion_creates_the_payload_indexes_it_filters_by(client, encoder, corpus):
    from unittest.mock import Mock

    from qdrant_client import models

    recorded = Mock(wraps=client)
    ingest_path(recorded, "c", corpus, {"calibrated": encoder}, CFG)
    got = {c.args[1]: c.args[2] for c in recorded.create_payload_index.call_args_list}
    assert got == {
        "doc_id": models.PayloadSchemaType.KEYWORD,
        "_posfair.version": models.PayloadSchemaType.KEYWORD,
        "_posfair.format": models.PayloadSchemaType.INTEGER,
    }


def test_partly_stored_document_is_resumed_chunk_by_chunk(client, make_encoder, corpus):
    with pytest.raises(RuntimeError, match="injected failure"):
        ingest_path(client, "c", corpus, {"calibrated": make_encoder(fail_on_call=3)}, CFG)
    stored = {str(i): posfair_fields(p.payload) for i, p in points(client).items()}
    by_doc = {d: [p for p in stored.values() if p["doc_id"] == d] for d in {p["doc_id"] for p in stored.values()}}
    partial = sorted(d for d, ps in by_doc.items() if len(ps) < ps[0]["n_chunks"])
    assert len(partial) == 1  # the failure left one document half written
    counting = CountingEncoder(make_encoder())
    r = ingest_path(client, "c", corpus, {"calibrated": counting}, CFG)
    done_texts = {p["text"] for p in by_doc[partial[0]]}
    assert r.resumed == partial and r.chunks_resumed == len(by_doc[partial[0]])
    assert r.chunks_written == len(counting.texts) == client.count("c").count - len(stored)
    assert not done_texts & set(counting.texts)  # stored chunks were not embedded again


def test_a_half_written_new_version_keeps_the_old_one_until_it_is_complete(client, make_encoder, corpus):
    ingest_path(client, "c", corpus, {"calibrated": make_encoder()}, CFG)
    old = {i for i, p in points(client).items() if posfair_fields(p.payload)["doc_id"] == "a.txt"}
    (corpus / "a.txt").write_text("fresh words for the new version. " * 40)
    with pytest.raises(RuntimeError, match="injected failure"):
        ingest_path(client, "c", corpus, {"calibrated": make_encoder(fail_on_call=2)}, CFG)
    versions = stored_records(client)["a.txt"]
    assert old <= set(points(client))  # nothing of the old version deleted
    assert sorted(v.complete for v in versions.values()) == [False, True]
    r = ingest_path(client, "c", corpus, {"calibrated": make_encoder()}, CFG)
    assert r.resumed == ["a.txt"] and r.chunks_deleted == len(old)
    assert [v.complete for v in stored_records(client)["a.txt"].values()] == [True]


def test_transient_qdrant_errors_are_retried_by_the_writer_not_the_caller(client, encoder, corpus):
    from unittest.mock import DEFAULT, Mock

    from qdrant_tools.retry import RetryPolicy

    reference = open_store(":memory:", engine="local")
    ingest_path(reference, "c", corpus, {"calibrated": encoder}, CFG)
    recorded, left = Mock(wraps=client), [2]

    def flaky(*args, **kwargs):
        if left[0]:
            left[0] -= 1
            raise TimeoutError("read timed out")
        return DEFAULT

    recorded.upsert.side_effect = flaky
    fast = IngestConfig(
        batch_size=4,
        show_progress=False,
        retry=RetryPolicy(base_delay=0.0),
        layout=NodeLayout(chunk_tokens=20, overlap_tokens=4, subchunks=None),
    )
    r = ingest_path(recorded, "c", corpus, {"calibrated": encoder}, fast)
    n_batches = -(-r.chunks_written // 4)
    assert recorded.upsert.call_count == n_batches + 2
    assert set(points(client)) == set(points(reference))


def test_report_to_dict_is_the_json_shape_of_the_run(client, encoder, corpus):
    import json

    (corpus / "empty.txt").write_text("")
    r = ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["new"] == ["a.txt", "b.md", "sub/c.txt"] and d["chunks_written"] == client.count("c").count
    assert d["skipped"] == [{"source": str(corpus / "empty.txt"), "reason": "empty file"}]
    assert d["vectors"] == {"calibrated": encoder.fingerprint()} and d["created_collection"] is True
    assert d["resumed"] == [] and d["chunks_resumed"] == 0 and d["seconds"] == round(r.seconds, 3)


def test_prune_with_a_single_file_is_refused_before_any_write(client, encoder, corpus):
    from dataclasses import replace

    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    before = set(points(client))
    with pytest.raises(ValueError, match="would delete every other document"):
        ingest_path(client, "c", corpus / "b.md", {"calibrated": encoder}, replace(CFG, prune=True))
    assert set(points(client)) == before


def test_prune_of_a_subfolder_keeps_the_documents_outside_it(client, encoder, corpus):
    from dataclasses import replace

    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    (corpus / "sub" / "d.txt").write_text("delta epsilon zeta.")
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    (corpus / "sub" / "c.txt").unlink()
    r = ingest_path(client, "c", corpus / "sub", {"calibrated": encoder}, replace(CFG, prune=True))
    assert r.pruned == ["sub/c.txt"] and r.unchanged == ["sub/d.txt"] and r.chunks_written == 0
    assert {posfair_fields(p.payload)["doc_id"] for p in points(client).values()} == {"a.txt", "b.md", "sub/d.txt"}


def test_a_file_of_an_ingested_folder_keeps_its_id_when_ingested_alone(client, encoder, corpus):
    ingest_path(client, "c", corpus, {"calibrated": encoder}, CFG)
    before = set(points(client))
    (corpus / "sub" / "c.txt").write_text("a new text for c.")
    r = ingest_path(client, "c", corpus / "sub" / "c.txt", {"calibrated": encoder}, CFG)
    assert r.changed == ["sub/c.txt"] and r.new == []
    assert {posfair_fields(p.payload)["doc_id"] for p in points(client).values()} == {"a.txt", "b.md", "sub/c.txt"}
    assert len(set(points(client)) - before) == r.chunks_written
