"""Paged documents (a PDF): every chunk's payload names the page it starts on and the pages it spans."""

from __future__ import annotations

from qdrant_tools.chunking import ChunkingConfig, SourceDocument, chunk_text, content_hash
from qdrant_tools.ingest import IngestConfig, ingest_documents
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import posfair_fields

PAGES = ["alpha beta gamma delta.", "epsilon zeta eta theta.", "iota kappa lambda mu."]


def paged_doc() -> SourceDocument:
    text, pages = "", []
    for label, page in zip(["i", "1", "2"], PAGES):
        pages.append((len(text), label))
        text += page + "\n\n"
    return SourceDocument("a.pdf", text, "/data/a.pdf", content_hash(text, pages=pages), pages=tuple(pages))


def test_chunk_payloads_carry_the_page_they_start_on_and_the_pages_they_span(client, encoder):
    doc = paged_doc()
    config = IngestConfig(show_progress=False, layout=NodeLayout(chunk_tokens=6, overlap_tokens=0, subchunks=None))
    ingest_documents(client, "c", [doc], {"calibrated": encoder}, config)
    points, _ = client.scroll("c", limit=100, with_payload=True)
    keys = ("start_char", "page_label", "page_number", "page_labels")
    got = sorted(tuple(posfair_fields(p.payload)[k] for k in keys) for p in points)
    chunks = chunk_text(doc.text, ChunkingConfig(6, 0))
    assert [g[0] for g in got] == [c.start_char for c in chunks]
    # 12 words in pages of 4: chunk 0 spans pages i and 1, chunk 1 pages 1 and 2
    assert [g[1:] for g in got] == [("i", 1, ["i", "1"]), ("1", 2, ["1", "2"])]


def test_a_document_without_pages_gets_no_page_fields(client, encoder):
    text = "plain text without pages."
    doc = SourceDocument("a.md", text, "/data/a.md", content_hash(text))
    ingest_documents(
        client,
        "c",
        [doc],
        {"calibrated": encoder},
        IngestConfig(show_progress=False, layout=NodeLayout(subchunks=None)),
    )
    (point,), _ = client.scroll("c", limit=10, with_payload=True)
    assert not {"page_label", "page_number", "page_labels"} & set(point.payload)
