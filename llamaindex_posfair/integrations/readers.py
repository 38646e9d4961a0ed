"""Files -> :class:`~qdrant_tools.chunking.SourceDocument`, read by LlamaIndex's readers.

``posfair ingest`` reads through here: LlamaIndex's ``SimpleDirectoryReader`` finds the files and the readers
LlamaIndex maintains read them (``llama-index-readers-file``, the ``readers`` extra); one file is one document,
``doc_id`` its path relative to the ingested folder, as for :func:`qdrant_tools.chunking.load_folder`. What each
format is read as, the metadata stored (all but :data:`VOLATILE_METADATA`) and the page fields of a PDF:
docs/cli.md, "Reading files".

Example:
    >>> from llamaindex_posfair.integrations.readers import read_path
    >>> docs, skipped, n_other = read_path("examples/data", metadata={"team": "docs"})  # doctest: +SKIP
    >>> docs[0].doc_id, docs[0].metadata["file_type"], docs[0].metadata["team"]         # doctest: +SKIP
    ('honeybees.txt', 'text/plain', 'docs')
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_index.core import Document, SimpleDirectoryReader
from llama_index.core.readers.base import BaseReader
from llama_index.core.readers.file.base import default_file_metadata_func

from qdrant_tools import payload as P
from qdrant_tools.chunking import SkippedFile, SourceDocument, content_hash, gather_files

__all__ = [
    "DEFAULT_EXTENSIONS",
    "VOLATILE_METADATA",
    "HtmlTextReader",
    "MissingReaderError",
    "read_path",
    "to_source_document",
]

logger = logging.getLogger(__name__)

#: What ``posfair ingest`` reads by default: PDF, Word (``.docx``), HTML, Markdown, plain text, JSON and common source
#: code (what LlamaIndex's ``SimpleDirectoryReader`` reads, so both store the same files of a folder).
DEFAULT_EXTENSIONS: tuple[str, ...] = (
    ".txt", ".md", ".markdown", ".rst", ".json", ".pdf", ".docx", ".html", ".htm",
    ".py", ".js", ".ts", ".java", ".go", ".rs", ".c", ".h", ".cpp", ".hpp", ".rb", ".sh",
)  # fmt: skip
#: Reader metadata not stored: it changes when a file is read, copied or checked out, not when it changes
#: (``file_path`` is absolute: the payload's ``source`` and ``doc_id`` say where the file is).
VOLATILE_METADATA = frozenset({"last_accessed_date", "creation_date", "file_path"})
#: Metadata a reader gives per part of a file (a PDF page); posfair stores the per-chunk page fields instead.
_PART_METADATA = frozenset({"page_label", "tag", "tag_id"})
#: Suffixes read only with the ``readers`` extra: what they are, the package LlamaIndex's reader needs, the reader.
_NEEDS_EXTRA = {".pdf": ("PDF", "pypdf", "PDFReader"), ".docx": ("Word", "docx2txt", "DocxReader")}
#: Joins the parts (pages) of one file.
PART_SEPARATOR = "\n\n"
_EXTRA = "pip install 'llamaindex-posfair[readers]'"
#: LlamaIndex's file metadata (name, MIME type, size, dates); :func:`to_source_document` drops the volatile keys.
_FILE_METADATA = default_file_metadata_func


class MissingReaderError(ValueError):
    """A file needs a reader whose package is not installed (the message names the extra)."""


_BLOCKS = [
    "p", "div", "br", "hr", "li", "dt", "dd", "tr", "table", "pre", "blockquote", "section", "article",
    "header", "footer", "nav", "aside", "main", "figure", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6",
]  # fmt: skip


_BLOCK_END = "\x1e"  # marks the end of a block element while the text is extracted


class HtmlTextReader(BaseReader):
    """HTML -> the text of its ``<body>`` (the whole page if it has none), one line per block element.

    ``<script>``, ``<style>``, ``<template>`` and ``<noscript>`` are dropped and whitespace inside a
    block (line breaks of the source included) is collapsed; the ``<title>`` becomes the ``title`` metadata. BeautifulSoup parses, as in
    LlamaIndex's ``HTMLTagReader``, which keeps script text and runs block elements together
    (``<p>One</p><p>Two</p>`` -> ``OneTwo``), hence this reader.

    Example:
        >>> import pathlib, tempfile
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "a.html"
        >>> _ = f.write_text("<body><h1>Bees</h1><p>They <b>dance</b>.</p><script>x()</script></body>")
        >>> HtmlTextReader().load_data(f)[0].text
        'Bees\\nThey dance.'
    """

    def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, **_: Any) -> list[Document]:
        try:
            from bs4 import BeautifulSoup
        except ImportError:
            raise MissingReaderError(f"reading HTML needs beautifulsoup4: {_EXTRA}") from None
        soup = BeautifulSoup(Path(file).read_text(encoding="utf-8"), "html.parser")
        metadata = dict(extra_info or {})
        if soup.title is not None and soup.title.string and soup.title.string.strip():
            metadata["title"] = " ".join(soup.title.string.split())
        for tag in soup(["script", "style", "template", "noscript", "head"]):
            tag.decompose()
        for tag in soup(_BLOCKS):
            tag.insert_after(_BLOCK_END)
        lines = (" ".join(block.split()) for block in (soup.body or soup).get_text().split(_BLOCK_END))
        return [Document(text="\n".join(line for line in lines if line), metadata=metadata)]


def _file_extractor(extensions: Iterable[str]) -> dict[str, BaseReader]:
    """Readers by suffix: HTML here, PDF and Word from llama-index-readers-file when installed (a PDF or Word file
    met without the ``readers`` extra is refused in :func:`_load`)."""
    exts = {e.lower() for e in extensions}
    readers: dict[str, BaseReader] = {e: HtmlTextReader() for e in (".html", ".htm") if e in exts}
    for suffix, (_, package, reader) in _NEEDS_EXTRA.items():
        if suffix in exts:
            try:
                importlib.import_module(package)
                readers[suffix] = getattr(importlib.import_module("llama_index.readers.file"), reader)()
            except ImportError:
                pass
    return readers


def _exts(extensions: Iterable[str]) -> list[str]:
    return sorted({e.lower() if e.startswith(".") else "." + e.lower() for e in extensions})


def discover(path: str | Path, extensions: Iterable[str] = DEFAULT_EXTENSIONS) -> tuple[list[Path], int]:
    """The files under ``path`` (or the file ``path``) with one of ``extensions``, and how many others there are.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    root, exts = Path(path), _exts(extensions)
    if not root.exists():
        raise FileNotFoundError(f"path {str(root)!r} does not exist; pass a folder or one file")
    if root.is_file():
        return ([root], 0) if root.suffix.lower() in exts else ([], 1)

    def files(required: list[str] | None) -> list[Path]:
        try:
            reader = SimpleDirectoryReader(input_dir=str(root), recursive=True, required_exts=required)
        except ValueError:  # "No files found in ..."
            return []
        return sorted(Path(f) for f in reader.input_files)

    found = files(exts)
    return found, len(files(None)) - len(found)


def _clean(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if k not in VOLATILE_METADATA and v is not None}


def to_source_document(
    parts: Sequence[Document], doc_id: str, source: str, metadata: Mapping[str, Any] | None = None
) -> SourceDocument:
    """One file's LlamaIndex ``Document``s (a PDF: one per page) as one :class:`SourceDocument`.

    The parts' texts are joined with :data:`PART_SEPARATOR`; parts with a ``page_label`` give the
    document its pages. Metadata: what every part shares (volatile keys dropped), then ``metadata``.

    Raises:
        ValueError: metadata a payload cannot hold (:func:`qdrant_tools.payload.json_metadata`; a date
            becomes an ISO string).

    Example:
        >>> pages = [Document(text="one", metadata={"page_label": "i"}), Document(text="two", metadata={"page_label": "1"})]
        >>> doc = to_source_document(pages, "a.pdf", "/data/a.pdf", {"year": 2021})
        >>> doc.text, doc.pages, doc.metadata
        ('one\\n\\ntwo', ((0, 'i'), (5, '1')), {'year': 2021})
    """
    texts, pages, offset = [], [], 0
    for part in parts:
        if "page_label" in part.metadata:
            pages.append((offset, str(part.metadata["page_label"])))
        texts.append(part.text)
        offset += len(part.text) + len(PART_SEPARATOR)
    shared = _clean(parts[0].metadata) if parts else {}
    for part in parts[1:]:
        shared = {k: v for k, v in shared.items() if part.metadata.get(k) == v}
    merged = P.json_metadata({**{k: v for k, v in shared.items() if k not in _PART_METADATA}, **(metadata or {})})
    text = PART_SEPARATOR.join(texts)
    return SourceDocument(
        doc_id=doc_id,
        text=text,
        source=source,
        content_hash=content_hash(text, merged, pages),
        metadata=merged,
        pages=tuple(pages),
    )


def _why(exc: BaseException) -> str:
    """A reader's failure in a few words (LlamaIndex wraps reader errors in 'Error loading file')."""
    cause = exc.__cause__ or exc
    if isinstance(cause, UnicodeDecodeError):
        return (
            f"not UTF-8 (invalid byte 0x{cause.object[cause.start]:02x} at offset {cause.start}); convert it to UTF-8"
        )
    if isinstance(cause, OSError):
        return f"unreadable: {cause.strerror or cause}"
    return f"could not be read ({type(cause).__name__}: {cause})"


def _load(file: Path, readers: dict[str, BaseReader]) -> list[Document] | str:
    """The ``Document``s of one file, or why it is skipped.

    Raises:
        MissingReaderError: a PDF or Word file without the ``readers`` extra, or a reader's missing package.
    """
    suffix = file.suffix.lower()
    if suffix in _NEEDS_EXTRA and suffix not in readers:
        kind = _NEEDS_EXTRA[suffix][0]
        raise MissingReaderError(f"{file} is a {kind} file; reading {kind} files needs the readers extra: {_EXTRA}")
    if suffix not in readers:
        try:
            with open(file, "rb") as fh:
                if b"\x00" in fh.read(8192):
                    return "binary file (NUL byte found)"
        except OSError as exc:
            return _why(exc)
    try:
        parts = SimpleDirectoryReader.load_file(
            file, file_metadata=_FILE_METADATA, file_extractor=readers,
            encoding="utf-8-sig", errors="strict", raise_on_error=True,
        )  # fmt: skip
    except ImportError as exc:
        raise MissingReaderError(f"reading {file} needs a package that is not installed ({exc}): {_EXTRA}") from None
    except Exception as exc:
        if isinstance(exc.__cause__, MissingReaderError):
            raise MissingReaderError(f"{file}: {exc.__cause__}") from None
        return _why(exc)
    if not any(p.text.strip() for p in parts):
        return "no text (empty, whitespace only, or a PDF without a text layer)"
    return parts


def read_path(
    path: str | Path,
    extensions: Iterable[str] = DEFAULT_EXTENSIONS,
    metadata: Mapping[str, Any] | None = None,
    follow_links: bool = False,
) -> tuple[list[SourceDocument], list[SkippedFile], int]:
    """Read every file under ``path`` (or the one file ``path``) with LlamaIndex's readers.

    Args:
        path: a folder (read recursively, hidden paths skipped) or one file.
        extensions: suffixes read; others are counted, not read.
        metadata: user metadata stored with every document (over the readers' metadata).
        follow_links: read the files that links under ``path`` lead to outside it (default: skipped).

    Returns:
        ``(documents, skipped, n_other)``, as :func:`qdrant_tools.chunking.load_folder`: one document per
        file (``doc_id`` the path it resolves to, relative to ``path``; ``source`` the path as given joined
        with it; a file reached twice through links read once: :func:`qdrant_tools.chunking.gather_files`),
        the files skipped with why (each logged), and how many files had other suffixes.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        MissingReaderError: a PDF or Word file met without the ``readers`` extra (before anything is written).
        ValueError: ``metadata`` a payload cannot hold.
    """
    root = Path(path)
    placed, skipped, n_other = gather_files(root, extensions, discover, follow_links)
    readers = _file_extractor(extensions)
    user = P.json_metadata(metadata or {})
    docs: list[SourceDocument] = []
    for f, doc_id in placed:
        source = str(f)
        result = _load(f, readers)
        if isinstance(result, str):
            logger.warning("skipping %s: %s", source, result)
            skipped.append(SkippedFile(source, result))
        else:
            docs.append(to_source_document(result, doc_id, source, user))
    return docs, skipped, n_other
