from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qdrant_tools.chunking import (
    ChunkingConfig,
    SkippedFile,
    SourceDocument,
    chunk_text,
    discover_files,
    load_document,
    whitespace_spans,
)

texts = st.lists(st.text(alphabet="abc \n\t.é", min_size=0, max_size=12), max_size=60).map(" ".join)
configs = (
    st.tuples(st.integers(1, 20), st.integers(0, 19))
    .filter(lambda t: t[1] < t[0])
    .map(lambda t: ChunkingConfig(chunk_tokens=t[0], overlap_tokens=t[1]))
)


@settings(max_examples=150, deadline=None)
@given(texts, configs)
def test_chunk_text_is_exact_slice_of_document(text, cfg):
    for c in chunk_text(text, cfg):
        assert c.text == text[c.start_char : c.end_char]


@settings(max_examples=150, deadline=None)
@given(texts, configs)
def test_chunks_cover_every_token_and_respect_size(text, cfg):
    spans = whitespace_spans(text)
    chunks = chunk_text(text, cfg)
    covered = set()
    for c in chunks:
        assert 1 <= c.n_tokens <= cfg.chunk_tokens
        covered |= {s for s in spans if c.start_char <= s[0] and s[1] <= c.end_char}
    assert covered == set(spans)
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_consecutive_chunks_overlap_by_configured_tokens():
    text = " ".join(f"w{i}" for i in range(10))
    chunks = chunk_text(text, ChunkingConfig(chunk_tokens=4, overlap_tokens=1))
    assert [c.text for c in chunks] == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]


def test_window_end_does_not_split_a_glued_word():
    # spans as a subword tokenizer would give them: "abc" = "ab" + "c"
    text = "xx abc yy"
    spans = lambda t: [(0, 2), (3, 5), (5, 6), (7, 9)]  # noqa: E731
    chunks = chunk_text(text, ChunkingConfig(chunk_tokens=2, overlap_tokens=0), spans)
    assert [c.text for c in chunks] == ["xx", "abc", "yy"]


@pytest.mark.parametrize(
    "kwargs", [{"chunk_tokens": 0}, {"chunk_tokens": 8, "overlap_tokens": 8}, {"overlap_tokens": -1}]
)
def test_invalid_chunking_config_raises_with_parameter_name(kwargs):
    with pytest.raises(ValueError, match="chunk_tokens|overlap_tokens"):
        ChunkingConfig(**kwargs)


def test_empty_file_is_skipped_with_reason(tmp_path):
    p = tmp_path / "e.txt"
    p.write_text("")
    r = load_document(p, tmp_path)
    assert isinstance(r, SkippedFile) and r.reason == "empty file"


def test_whitespace_file_is_skipped_with_reason(tmp_path):
    p = tmp_path / "w.txt"
    p.write_text("  \n\t ")
    assert load_document(p, tmp_path).reason == "whitespace only"


def test_binary_file_is_skipped(tmp_path):
    p = tmp_path / "b.txt"
    p.write_bytes(b"abc\x00\x01\x02")
    assert "binary" in load_document(p, tmp_path).reason


def test_non_utf8_file_reports_byte_and_offset(tmp_path):
    p = tmp_path / "l.txt"
    p.write_bytes(b"caf" + b"\xe9 au lait")
    r = load_document(p, tmp_path)
    assert isinstance(r, SkippedFile) and "0xe9 at offset 3" in r.reason


def test_utf8_bom_is_dropped_and_doc_id_is_relative(tmp_path):
    (tmp_path / "d").mkdir()
    p = tmp_path / "d" / "x.md"
    p.write_bytes(b"\xef\xbb\xbfhello")
    r = load_document(p, tmp_path)
    assert isinstance(r, SourceDocument) and r.text == "hello" and r.doc_id == "d/x.md"


def test_discover_skips_hidden_and_counts_other_extensions(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.txt").write_text("hidden")
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.MD").write_text("b")
    (tmp_path / "c.pdf").write_text("c")
    files, other = discover_files(tmp_path)
    assert [f.name for f in files] == ["a.txt", "b.MD"] and other == 1


def test_discover_missing_path_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        discover_files(tmp_path / "nope")
