"""The payload stored with every chunk, and the names of its fields.

The payload is also the per-document ingestion record: each point carries its
document id, the document version, how many chunks that version has and the
fingerprint of every stored vector, so the state of an ingestion lives in
Qdrant itself and survives the loss of any local file. Fields are flat, so
LlamaIndex's ``QdrantVectorStore`` can read the points (``text`` is its
default text key; everything else becomes node metadata).

Example:
    >>> from qdrant_tools.chunking import Chunk, SourceDocument
    >>> from qdrant_tools.payload import build_payload
    >>> doc = SourceDocument("a.md", "hello world", "/data/a.md", "00")
    >>> p = build_payload(doc, Chunk(0, "hello world", 0, 11, 2), n_chunks=1, version="v1",
    ...                   fingerprints={"calibrated": "f1"}, n_tokens=4, truncated=False)
    >>> p["text"], p["start_char"], p["end_char"]
    ('hello world', 0, 11)
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from qdrant_tools.chunking import Chunk, SourceDocument

PAYLOAD_FORMAT = 1

TEXT = "text"
DOC_ID = "doc_id"
SOURCE = "source"
FILE_NAME = "file_name"
CHUNK_INDEX = "chunk_index"
N_CHUNKS = "n_chunks"
START_CHAR = "start_char"
END_CHAR = "end_char"
N_TOKENS = "n_tokens"
TRUNCATED = "truncated"
CONTENT_HASH = "content_hash"
VERSION = "version"
FINGERPRINTS = "encoder_fingerprints"
CHUNKING = "chunking"
FORMAT = "posfair_payload_format"
#: ``[[start_char, end_char], ...]`` of the node's sub-chunks (document offsets), when the layout has them.
SUBCHUNK_SPANS = "subchunk_spans"

#: Paged documents (a PDF): the label of the page a chunk starts on, as the reader gives it (a string,
#: e.g. ``"3"`` or ``"iv"``), its 1-based page number (an integer, for ranges) and the labels of every
#: page the chunk spans.
PAGE_LABEL = "page_label"
PAGE_NUMBER = "page_number"
PAGE_LABELS = "page_labels"

#: Fields read back when diffing a collection against the input.
RECORD_FIELDS = [DOC_ID, VERSION, N_CHUNKS]

#: Fields posfair writes itself; document metadata may not use these keys (``file_name`` may: same meaning).
RESERVED_FIELDS = frozenset(
    {TEXT, DOC_ID, SOURCE, CHUNK_INDEX, N_CHUNKS, START_CHAR, END_CHAR, N_TOKENS, TRUNCATED, CONTENT_HASH}
    | {VERSION, FINGERPRINTS, CHUNKING, FORMAT, SUBCHUNK_SPANS, PAGE_LABEL, PAGE_NUMBER, PAGE_LABELS}
)


def check_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` as a plain dict, refused if a key is one of :data:`RESERVED_FIELDS` or not a string.

    Raises:
        ValueError: a reserved or non-string key (named, with the fix).
    """
    bad = sorted(str(k) for k in metadata if not isinstance(k, str) or k in RESERVED_FIELDS)
    if bad:
        raise ValueError(
            f"metadata keys {bad} are reserved for posfair's own payload fields (or are not strings); "
            f"rename them, e.g. 'user_{bad[0]}' (reserved: {sorted(RESERVED_FIELDS)})"
        )
    return dict(metadata)


def page_fields(pages: Sequence[tuple[int, str]], start_char: int, end_char: int) -> dict[str, Any]:
    """The page fields of the chunk ``[start_char, end_char)`` of a document with ``pages`` (``{}`` without pages).

    Args:
        pages: ``(start_char, label)`` of each page, in order (:attr:`SourceDocument.pages`).

    Example:
        >>> page_fields([(0, "i"), (10, "1"), (25, "2")], 12, 30)
        {'page_label': '1', 'page_number': 2, 'page_labels': ['1', '2']}
    """
    if not pages:
        return {}
    starts = [int(s) for s, _ in pages]
    first = max(bisect.bisect_right(starts, start_char) - 1, 0)
    last = max(bisect.bisect_left(starts, end_char) - 1, first)
    return {
        PAGE_LABEL: str(pages[first][1]),
        PAGE_NUMBER: first + 1,
        PAGE_LABELS: [str(label) for _, label in pages[first : last + 1]],
    }


def build_payload(
    doc: SourceDocument,
    chunk: Chunk,
    *,
    n_chunks: int,
    version: str,
    fingerprints: Mapping[str, str],
    n_tokens: int,
    truncated: bool,
    chunking_key: str = "",
    subchunk_spans: list[list[int]] | None = None,
) -> dict[str, Any]:
    """Payload of one chunk.

    Args:
        doc: the document the chunk came from.
        chunk: the chunk (text and character offsets into ``doc.text``).
        n_chunks: number of chunks of this document version.
        version: :func:`qdrant_tools.ids.document_version`.
        fingerprints: vector name -> encoder fingerprint.
        n_tokens: encoder tokens of the chunk, special tokens included.
        truncated: whether the encoder cut the chunk at its window.
        chunking_key: :meth:`ChunkingConfig.key`, for the record.
        subchunk_spans: document offsets of the node's sub-chunks (the layout with sub-chunk vectors).

    The document's metadata comes first, top-level; posfair's fields follow (see :func:`check_metadata`),
    with the page fields of a paged document (:func:`page_fields`).
    """
    payload = {
        **check_metadata(doc.metadata),
        TEXT: chunk.text,
        DOC_ID: doc.doc_id,
        SOURCE: doc.source,
        FILE_NAME: str(doc.metadata.get(FILE_NAME) or PurePath(doc.doc_id).name),
        CHUNK_INDEX: chunk.index,
        N_CHUNKS: n_chunks,
        START_CHAR: chunk.start_char,
        END_CHAR: chunk.end_char,
        N_TOKENS: int(n_tokens),
        TRUNCATED: bool(truncated),
        CONTENT_HASH: doc.content_hash,
        VERSION: version,
        FINGERPRINTS: dict(fingerprints),
        CHUNKING: chunking_key,
        FORMAT: PAYLOAD_FORMAT,
    }
    payload.update(page_fields(doc.pages, chunk.start_char, chunk.end_char))
    if subchunk_spans is not None:
        payload[SUBCHUNK_SPANS] = subchunk_spans
    return payload
