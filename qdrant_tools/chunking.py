"""Read text files and split them into token-aware chunks with character offsets.

Pure functions only (no model, no Qdrant): the single-process ingestion in
:mod:`qdrant_tools.ingest` and any distributed ingestion must produce the same
chunks from the same file, so everything that decides a chunk lives here.

A chunk is a window of ``chunk_tokens`` consecutive tokens (special tokens not
counted) that overlaps the previous window by ``overlap_tokens``; its text is
the exact slice ``text[start_char:end_char]`` of the document, so offsets in
the payload always point back into the source file. Window ends are moved back
(at most a few tokens) so that a chunk does not end inside a word.

Example:
    >>> from qdrant_tools.chunking import ChunkingConfig, chunk_text
    >>> chunks = chunk_text("one two three four five", ChunkingConfig(chunk_tokens=3, overlap_tokens=1))
    >>> [(c.text, c.start_char, c.end_char) for c in chunks]
    [('one two three', 0, 13), ('three four five', 8, 23)]
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

Span = tuple[int, int]
#: A function mapping a text to the character spans of its tokens, in order.
SpanFn = Callable[[str], Sequence[Span]]

DEFAULT_EXTENSIONS: tuple[str, ...] = (".txt", ".md")
_WORD = re.compile(r"\S+")
_MAX_SNAP = 16  # tokens a window end may move back to avoid splitting a word
_BINARY_PROBE = 8192


@dataclass(frozen=True)
class ChunkingConfig:
    """How documents are cut into chunks.

    Args:
        chunk_tokens: tokens per chunk, special tokens not counted. Keep it
            at most the encoder's window minus its special tokens, or chunks
            are truncated when embedded (ingestion reports how many).
        overlap_tokens: tokens shared by consecutive chunks; must be smaller
            than ``chunk_tokens``.

    Raises:
        ValueError: on a non-positive ``chunk_tokens`` or an overlap outside
            ``[0, chunk_tokens)``.
    """

    chunk_tokens: int = 256
    overlap_tokens: int = 32

    def __post_init__(self) -> None:
        if not isinstance(self.chunk_tokens, int) or self.chunk_tokens <= 0:
            raise ValueError(
                f"chunk_tokens must be a positive integer, got {self.chunk_tokens!r}; typical values are 128-512"
            )
        if not isinstance(self.overlap_tokens, int) or not 0 <= self.overlap_tokens < self.chunk_tokens:
            raise ValueError(
                f"overlap_tokens must be an integer in [0, chunk_tokens={self.chunk_tokens}), "
                f"got {self.overlap_tokens!r}; typical values are 0-64"
            )

    def key(self) -> str:
        """Stable string identifying these settings (part of a document's version)."""
        return f"tokens={self.chunk_tokens};overlap={self.overlap_tokens}"


@dataclass(frozen=True)
class Chunk:
    """One chunk of a document: ``text == document_text[start_char:end_char]``."""

    index: int
    text: str
    start_char: int
    end_char: int
    n_tokens: int


@dataclass(frozen=True)
class SourceDocument:
    """A decoded text document ready for chunking.

    ``doc_id`` is the path relative to the ingested root (POSIX separators), so
    the same folder ingested from another machine gets the same ids.
    ``metadata`` (JSON values) is stored with every chunk of the document, top-level
    in the payload where filters reach it; build ``content_hash`` with
    :func:`content_hash` of the text *and* the metadata, so a change of either is a
    new document version.
    ``pages`` holds ``(start_char, label)`` of each page of a paged document (a PDF),
    in order: each chunk's payload then names the page it starts on and the pages it spans
    (:func:`qdrant_tools.payload.page_fields`); pass them to :func:`content_hash` too.
    """

    doc_id: str
    text: str
    source: str
    content_hash: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    pages: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class SkippedFile:
    """A file that was not ingested, and why."""

    source: str
    reason: str


def whitespace_spans(text: str) -> list[Span]:
    """Token spans of whitespace-separated words (the tokenizer-free default)."""
    return [m.span() for m in _WORD.finditer(text)]


def tokenizer_spans(tokenizer: Any) -> SpanFn:
    """Span function from a Hugging Face *fast* tokenizer (uses offset mappings).

    Raises:
        ValueError: if the tokenizer cannot return offsets (a slow tokenizer).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"tokenizer {type(tokenizer).__name__} is not a fast tokenizer and cannot return "
            "character offsets; load it with use_fast=True or chunk with whitespace_spans"
        )

    def spans(text: str) -> list[Span]:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return [(int(s), int(e)) for s, e in enc["offset_mapping"] if e > s]

    return spans


def content_hash(text: str, metadata: Mapping[str, Any] | None = None, pages: Sequence[tuple[int, str]] = ()) -> str:
    """SHA-256 (hex) of the UTF-8 encoded text, and of ``metadata`` and ``pages`` when there are any.

    Without metadata and pages the hash is the text's alone, so documents stored before
    they existed keep their versions.

    Example:
        >>> content_hash("a") == content_hash("a", {})
        True
        >>> content_hash("a") == content_hash("a", {"lang": "en"})
        False
        >>> content_hash("a b", pages=[(0, "1")]) == content_hash("a b", pages=[(0, "1"), (2, "2")])
        False
    """
    blob = text if not metadata else text + "\x00" + json.dumps(dict(metadata), sort_keys=True, default=str)
    if pages:
        blob += "\x00pages" + json.dumps([[int(s), str(label)] for s, label in pages])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _snap_end(spans: Sequence[Span], start: int, end: int) -> int:
    """Move a window end back so it does not split a word (bounded, never empty)."""
    if end >= len(spans):
        return end
    j = end
    while j > start + 1 and end - j < _MAX_SNAP and spans[j][0] == spans[j - 1][1]:
        j -= 1
    # no word boundary nearby: keep the full window
    return j if spans[j][0] != spans[j - 1][1] else end


def chunk_text(
    text: str, config: ChunkingConfig = ChunkingConfig(), spans_fn: SpanFn = whitespace_spans
) -> list[Chunk]:
    """Split ``text`` into overlapping token windows.

    Args:
        text: the document text.
        config: chunk size and overlap.
        spans_fn: tokenizer as a span function (see :func:`tokenizer_spans`).

    Returns:
        Chunks in document order; empty for a text without tokens.
    """
    spans = list(spans_fn(text))
    n = len(spans)
    chunks: list[Chunk] = []
    start = 0
    while start < n:
        end = _snap_end(spans, start, min(start + config.chunk_tokens, n))
        chunks.append(
            Chunk(
                index=len(chunks),
                text=text[spans[start][0] : spans[end - 1][1]],
                start_char=spans[start][0],
                end_char=spans[end - 1][1],
                n_tokens=end - start,
            )
        )
        if end >= n:
            break
        nxt = max(end - config.overlap_tokens, start + 1)
        # start the next window at a word start when the overlap allows it
        while (
            nxt > start + 1
            and nxt < end
            and spans[nxt][0] == spans[nxt - 1][1]
            and end - nxt < config.overlap_tokens + _MAX_SNAP
        ):
            nxt -= 1
        start = nxt
    return chunks


def discover_files(root: str | Path, extensions: Iterable[str] = DEFAULT_EXTENSIONS) -> tuple[list[Path], int]:
    """Files under ``root`` with one of ``extensions``, sorted; hidden paths skipped.

    Returns:
        ``(files, n_other)``: matching files and the number of other files ignored.

    Raises:
        FileNotFoundError: if ``root`` does not exist.
    """
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"path {str(root)!r} does not exist; pass a folder of .txt/.md files or one file")
    exts = {e.lower() if e.startswith(".") else "." + e.lower() for e in extensions}
    if root.is_file():
        return ([root], 0) if root.suffix.lower() in exts else ([], 1)
    files, other = [], 0
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not p.is_file():
            continue
        if p.suffix.lower() in exts:
            files.append(p)
        else:
            other += 1
    return files, other


def document_id(path: Path, root: Path) -> str:
    """Stable id of a file: its path relative to ``root`` (or its name if ``root`` is the file)."""
    path, root = Path(path), Path(root)
    if root.is_file() or path == root:
        return path.name
    return path.relative_to(root).as_posix()


def load_document(path: str | Path, root: str | Path | None = None) -> SourceDocument | SkippedFile:
    """Read one file as UTF-8 text, or say why it cannot be ingested.

    Binary files (a NUL byte in the first 8 KiB), non-UTF-8 files and files
    that are empty or whitespace only become a :class:`SkippedFile`. A UTF-8
    byte-order mark is dropped.
    """
    path = Path(path)
    root = Path(root) if root is not None else path
    try:
        data = path.read_bytes()
    except OSError as exc:
        return SkippedFile(str(path), f"unreadable: {exc.strerror or exc}")
    if b"\x00" in data[:_BINARY_PROBE]:
        return SkippedFile(str(path), "binary file (NUL byte found)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return SkippedFile(
            str(path), f"not UTF-8 (invalid byte 0x{data[exc.start]:02x} at offset {exc.start}); convert it to UTF-8"
        )
    if not text.strip():
        return SkippedFile(str(path), "empty file" if not text else "whitespace only")
    return SourceDocument(doc_id=document_id(path, root), text=text, source=str(path), content_hash=content_hash(text))


def load_folder(
    path: str | Path, extensions: Iterable[str] = DEFAULT_EXTENSIONS
) -> tuple[list[SourceDocument], list[SkippedFile], int]:
    """Read every candidate file under ``path`` (or the one file ``path``).

    Returns:
        ``(documents, skipped, n_other)``: decoded documents, the files that
        were skipped (each logged with its reason), and how many files had
        other extensions.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    files, n_other = discover_files(path, extensions)
    docs: list[SourceDocument] = []
    skipped: list[SkippedFile] = []
    for f in files:
        r = load_document(f, path)
        if isinstance(r, SkippedFile):
            logger.warning("skipping %s: %s", r.source, r.reason)
            skipped.append(r)
        else:
            docs.append(r)
    return docs, skipped, n_other
