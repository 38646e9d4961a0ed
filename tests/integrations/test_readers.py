"""Files read with LlamaIndex's readers into SourceDocuments (llamaindex_posfair.integrations.readers)."""

from __future__ import annotations

import sys

import pytest
from mixed_folder import DOCX_PARAGRAPHS, HTML, MARKDOWN, PDF_PAGES, PYTHON, make_mixed_folder, minimal_docx

from llamaindex_posfair.integrations.readers import (
    DEFAULT_EXTENSIONS,
    VOLATILE_METADATA,
    MissingReaderError,
    read_path,
)
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import posfair_fields


@pytest.fixture
def mixed(tmp_path):
    return make_mixed_folder(tmp_path / "mixed")


def _by_id(docs):
    return {d.doc_id: d for d in docs}


def test_a_mixed_folder_gives_one_text_document_per_file(mixed):
    docs, skipped, n_other = read_path(mixed)
    by_id = _by_id(docs)
    assert sorted(by_id) == ["bees.html", "bread.md", "code/knead.py", "tides.pdf"]
    assert [(s.source.rsplit("/", 1)[-1], s.reason) for s in skipped] == [("blob.txt", "binary file (NUL byte found)")]
    assert n_other == 0
    assert by_id["bread.md"].text == MARKDOWN and by_id["code/knead.py"].text == PYTHON
    assert by_id["code/knead.py"].source == str(mixed / "code" / "knead.py")


def test_html_is_read_as_its_text_without_tags_scripts_or_styles(mixed):
    html = _by_id(read_path(mixed)[0])["bees.html"]
    assert html.text == "Honeybees\nA forager performs the waggle dance to point at nectar.\nDrones\nQueens"
    assert "<" not in html.text and "scriptnoise" not in html.text and "color" not in html.text
    assert html.metadata["title"] == "Honeybees" and len(HTML) > len(html.text)


def test_html_line_breaks_inside_a_paragraph_are_spaces(tmp_path):
    page = tmp_path / "p.html"
    page.write_text("<html><body><p>The angle of the run\npoints at the nectar.</p><p>Next</p></body></html>")
    assert read_path(page)[0][0].text == "The angle of the run points at the nectar.\nNext"


def test_a_pdf_keeps_its_pages_text_and_character_offsets(mixed):
    pdf = _by_id(read_path(mixed)[0])["tides.pdf"]
    assert [label for _, label in pdf.pages] == ["1", "2", "3"]
    for (start, _), lines in zip(pdf.pages, PDF_PAGES):
        assert pdf.text[start:].startswith(lines[0])
    assert "\x00" not in pdf.text and "obj" not in pdf.text and "Helvetica" not in pdf.text


def test_reader_metadata_is_kept_but_volatile_keys_are_dropped(mixed):
    docs = _by_id(read_path(mixed)[0])
    md = docs["tides.pdf"].metadata
    assert md["file_name"] == "tides.pdf" and md["file_type"] == "application/pdf" and md["file_size"] > 0
    assert "page_label" not in md and not VOLATILE_METADATA & set().union(*(d.metadata for d in docs.values()))
    assert docs["code/knead.py"].metadata["file_type"] == "text/x-python"


def test_reading_again_gives_the_same_versions(mixed):
    first = {d.doc_id: d.content_hash for d in read_path(mixed)[0]}
    (mixed / "bread.md").read_text()  # reading a file changes nothing stored
    assert {d.doc_id: d.content_hash for d in read_path(mixed)[0]} == first


def test_user_metadata_is_stored_over_the_readers_and_is_part_of_the_version(mixed):
    plain = _by_id(read_path(mixed)[0])["bread.md"]
    tagged = _by_id(read_path(mixed, metadata={"team": "bakery", "file_type": "recipe"})[0])["bread.md"]
    assert tagged.metadata["team"] == "bakery" and tagged.metadata["file_type"] == "recipe"
    assert tagged.content_hash != plain.content_hash


def test_no_metadata_key_is_reserved_and_dates_become_iso_strings(mixed):
    import datetime as dt

    docs = _by_id(read_path(mixed, metadata={"doc_id": "x", "when": dt.date(2024, 1, 2)})[0])
    assert docs["bread.md"].metadata["doc_id"] == "x" and docs["bread.md"].metadata["when"] == "2024-01-02"


def test_metadata_a_payload_cannot_hold_is_refused_naming_the_key(mixed):
    with pytest.raises(ValueError, match=r"metadata\['obj'\] is a object"):
        read_path(mixed, metadata={"obj": object()})


def test_a_single_file_is_one_document_named_by_its_file(mixed):
    docs, skipped, _ = read_path(mixed / "code" / "knead.py")
    assert [(d.doc_id, d.source) for d in docs] == [("knead.py", str(mixed / "code" / "knead.py"))] and not skipped


def test_other_suffixes_are_counted_and_not_utf8_text_is_skipped_with_why(mixed):
    (mixed / "photo.raw").write_bytes(b"\xff\xd8")
    (mixed / "latin.txt").write_bytes(b"caf\xe9 au lait")
    docs, skipped, n_other = read_path(mixed)
    reasons = {s.source.rsplit("/", 1)[-1]: s.reason for s in skipped}
    assert n_other == 1 and "latin.txt" not in _by_id(docs)
    assert reasons["latin.txt"].startswith("not UTF-8 (invalid byte 0xe9 at offset 3)")


def test_a_pdf_without_the_readers_extra_is_an_error_naming_it(mixed, monkeypatch):
    monkeypatch.setitem(sys.modules, "pypdf", None)  # import pypdf now raises ImportError
    with pytest.raises(MissingReaderError, match=r"tides\.pdf is a PDF file; .*llamaindex-posfair\[readers\]"):
        read_path(mixed)
    docs, _, _ = read_path(mixed, extensions=[e for e in DEFAULT_EXTENSIONS if e != ".pdf"])
    assert "tides.pdf" not in _by_id(docs)


def test_html_without_beautifulsoup_is_an_error_naming_the_extra(mixed, monkeypatch):
    monkeypatch.setitem(sys.modules, "bs4", None)
    with pytest.raises(MissingReaderError, match=r"bees\.html: reading HTML needs beautifulsoup4: .*\[readers\]"):
        read_path(mixed, extensions=[".html", ".md"])


def test_a_crash_then_a_rerun_stores_every_chunk_of_a_mixed_folder_once(mixed, make_fake):
    from qdrant_tools.ingest import IngestConfig, ingest_documents
    from qdrant_tools.store import open_store

    docs = read_path(mixed)[0]
    config = IngestConfig(
        batch_size=3, show_progress=False, layout=NodeLayout(chunk_tokens=6, overlap_tokens=0, subchunks=None)
    )
    client = open_store(":memory:")
    try:
        with pytest.raises(RuntimeError, match="injected failure"):
            ingest_documents(client, "c", docs, {"calibrated": make_fake(fail_on_call=3)}, config)
        partial = client.count("c").count
        report = ingest_documents(client, "c", docs, {"calibrated": make_fake()}, config)
        points, _ = client.scroll("c", limit=1000, with_payload=True)
    finally:
        client.close()
    fields = [posfair_fields(p.payload) for p in points]
    keys = [(f["doc_id"], f["chunk_index"]) for f in fields]
    assert 0 < partial < len(points) and len(keys) == len(set(keys))
    assert report.chunks_written == len(points) - partial
    assert {d: max(i for k, i in keys if k == d) + 1 for d, _ in keys} == {f["doc_id"]: f["n_chunks"] for f in fields}


def test_a_word_document_is_read_as_its_text(tmp_path):
    (tmp_path / "garden.docx").write_bytes(minimal_docx(DOCX_PARAGRAPHS))
    (doc,), skipped, _ = read_path(tmp_path)
    assert not skipped and doc.doc_id == "garden.docx"
    assert all(p in doc.text for p in DOCX_PARAGRAPHS)


def test_a_word_document_without_the_readers_extra_is_an_error_naming_it(tmp_path, monkeypatch):
    (tmp_path / "garden.docx").write_bytes(minimal_docx(DOCX_PARAGRAPHS))
    monkeypatch.setitem(sys.modules, "docx2txt", None)  # import docx2txt now raises ImportError
    with pytest.raises(MissingReaderError, match=r"garden\.docx is a Word file; .*llamaindex-posfair\[readers\]"):
        read_path(tmp_path)
