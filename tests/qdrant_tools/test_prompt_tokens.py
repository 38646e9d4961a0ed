"""A document prompt's tokens count against the encoder window: chunk sizes, ``n_tokens`` and ``truncated``."""

from __future__ import annotations

import pytest

from llamaindex_posfair import EncoderSpec
from qdrant_tools.chunking import SourceDocument, content_hash
from qdrant_tools.encoding import resolve_chunking
from qdrant_tools.ingest import IngestConfig, ingest_documents
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import posfair_fields

LONG = " ".join(f"word{i}" for i in range(400))


def _doc(text: str = LONG) -> SourceDocument:
    return SourceDocument("long.txt", text, "/data/long.txt", content_hash(text))


def _payloads(client) -> list[dict]:
    pts, _ = client.scroll("c", limit=10_000, with_payload=True)
    return [posfair_fields(p.payload) for p in pts]


def test_default_chunk_size_leaves_room_for_the_document_prompt(make_encoder):
    plain = make_encoder(max_length=32)
    prompted = make_encoder(max_length=32, spec=EncoderSpec(model="fake-model", document_prompt="passage: "))
    # 32 - 2 special tokens; the fake counts the prompt "passage:" as one more token
    assert resolve_chunking(plain).chunk_tokens == 30
    assert resolve_chunking(prompted).chunk_tokens == 29


def test_stored_chunks_count_the_prompt_and_fit_the_window(client, make_encoder):
    enc = make_encoder(max_length=32, spec=EncoderSpec(model="fake-model", document_prompt="passage: "))
    report = ingest_documents(
        client, "c", [_doc()], {"calibrated": enc}, IngestConfig(show_progress=False, layout=NodeLayout(subchunks=None))
    )
    payloads = _payloads(client)
    assert report.chunks_truncated == 0 and not any(p["truncated"] for p in payloads)
    # n_tokens is what the encoder embeds: prompt + text + special tokens, never above the window
    assert all(p["n_tokens"] == len(p["text"].split()) + 1 + 2 for p in payloads)
    assert max(p["n_tokens"] for p in payloads) == 32


def test_an_explicit_size_that_fits_only_without_the_prompt_is_reported_truncated(client, make_encoder):
    enc = make_encoder(max_length=32, spec=EncoderSpec(model="fake-model", document_prompt="passage: "))
    config = IngestConfig(show_progress=False, layout=NodeLayout(chunk_tokens=30, overlap_tokens=0, subchunks=None))
    report = ingest_documents(client, "c", [_doc()], {"calibrated": enc}, config)
    full = [p for p in _payloads(client) if len(p["text"].split()) == 30]
    assert full and all(p["truncated"] and p["n_tokens"] == 33 for p in full)
    assert report.chunks_truncated == len(full)


@pytest.mark.slow
def test_minilm_with_a_passage_prompt_stores_no_chunk_above_its_window():
    from llamaindex_posfair import BUNDLED_MINILM, PosFairEncoder
    from qdrant_tools.store import open_store

    enc = PosFairEncoder(BUNDLED_MINILM, calibration=None, document_prompt="passage: ")
    text = " ".join(["The lighthouse keeper climbed the spiral stairs at dusk."] * 120)
    client = open_store(":memory:")
    try:
        report = ingest_documents(
            client,
            "c",
            [_doc(text)],
            {"vanilla": enc},
            IngestConfig(show_progress=False, layout=NodeLayout(subchunks=None)),
        )
        payloads = _payloads(client)
    finally:
        client.close()
    counted = enc.count_tokens(["passage: " + p["text"] for p in payloads])
    assert [p["n_tokens"] for p in payloads] == counted
    assert max(counted) <= enc.max_length == 256
    assert report.chunks_truncated == 0 and not any(p["truncated"] for p in payloads)
