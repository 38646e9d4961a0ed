"""The payload stored with every point, and the one reader of posfair's fields in it.

A point's payload has the shape LlamaIndex's ``QdrantVectorStore`` writes, so that store (or any
LlamaIndex reader) can read a posfair collection, and posfair's own fields nested where no user
key can collide with them (payload format 2):

- top level: the node's metadata, flat and JSON-safe (a ``datetime`` / ``date`` becomes an ISO
  string, as ``node.model_dump(mode="json")`` makes it: :func:`json_metadata`), where
  ``MetadataFilters`` reach it; then LlamaIndex's node record: ``_node_content`` (the node as JSON,
  its text included), ``_node_type``, and ``document_id`` / ``doc_id`` / ``ref_doc_id`` (the
  document id; filters on a document use the top-level ``doc_id``);
- ``_posfair``: posfair's fields (:func:`posfair_fields`), which are also the per-document
  ingestion record: the document id, its version, how many chunks that version has and the
  fingerprint of every stored vector, so the state of an ingestion lives in Qdrant itself.
  The text is stored once, in ``_node_content``; :func:`posfair_fields` reads it from there.

A metadata key named like a record key (``doc_id``, ``_node_content``, ``_posfair``, ...) is
shadowed at the top level, as in LlamaIndex; the node's metadata comes back exactly as given from
``_node_content``. Points written before (format 1) hold posfair's fields flat at the top level;
:func:`posfair_fields` reads both formats.

Example:
    >>> from qdrant_tools.chunking import Chunk, SourceDocument
    >>> doc = SourceDocument("a.md", "hello world", "/data/a.md", "00", metadata={"lang": "en"})
    >>> fields = posfair_record(doc, Chunk(0, "hello world", 0, 11, 2), n_chunks=1, version="v1",
    ...                         fingerprints={"calibrated": "f1"}, n_tokens=4, truncated=False)
    >>> p = build_payload(doc, fields)
    >>> p["lang"], p["doc_id"], p["file_name"]
    ('en', 'a.md', 'a.md')
    >>> f = posfair_fields(p)
    >>> f["text"], f["start_char"], f["end_char"], f["format"]
    ('hello world', 0, 11, 2)
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from qdrant_tools.chunking import Chunk, SourceDocument
from qdrant_tools.ids import point_id

PAYLOAD_FORMAT = 2

#: The object holding posfair's fields (format 2).
POSFAIR = "_posfair"

# posfair's fields (keys inside ``_posfair``; top-level keys of a format-1 point).
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
FORMAT = "format"
#: ``[[start_char, end_char], ...]`` of the node's sub-chunks (document offsets), when the layout has them.
SUBCHUNK_SPANS = "subchunk_spans"

#: Paged documents (a PDF): the label of the page a chunk starts on, as the reader gives it (a string,
#: e.g. ``"3"`` or ``"iv"``), its 1-based page number (an integer, for ranges) and the labels of every
#: page the chunk spans.
PAGE_LABEL = "page_label"
PAGE_NUMBER = "page_number"
PAGE_LABELS = "page_labels"
PAGE_FIELDS = (PAGE_LABEL, PAGE_NUMBER, PAGE_LABELS)

#: The top-level payload format field of a format-1 point (format 2 keeps it in ``_posfair``).
FORMAT_1 = "posfair_payload_format"
#: posfair's fields of a format-1 point, all top-level.
FORMAT_1_FIELDS = frozenset(
    {TEXT, DOC_ID, SOURCE, FILE_NAME, CHUNK_INDEX, N_CHUNKS, START_CHAR, END_CHAR, N_TOKENS, TRUNCATED}
    | {CONTENT_HASH, VERSION, FINGERPRINTS, CHUNKING, SUBCHUNK_SPANS, *PAGE_FIELDS}
)

# LlamaIndex's node record beside the metadata (llama-index-vector-stores-qdrant's keys).
NODE_CONTENT = "_node_content"
NODE_TYPE = "_node_type"
DOCUMENT_ID = "document_id"
REF_DOC_ID = "ref_doc_id"

#: The filter keys of posfair's own fields in a format-2 payload (nested keys, as Qdrant filters name them).
VERSION_KEY = f"{POSFAIR}.{VERSION}"
FORMAT_KEY = f"{POSFAIR}.{FORMAT}"

# LlamaIndex's ``NodeRelationship`` values (SOURCE, PREVIOUS, NEXT) in a node's JSON.
_SOURCE, _PREVIOUS, _NEXT = "1", "2", "3"


def posfair_fields(payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """posfair's fields of a point: ``_posfair`` (format 2), or the flat fields of a format-1 point.

    Every reader of posfair's fields reads them through here, so collections written in
    either format read the same. A payload without posfair's fields gives ``{}``. The ``text``
    of a format-2 point is read from its ``_node_content`` (where it is stored, once), when the
    payload holds it.

    Example:
        >>> posfair_fields({"lang": "en", "_posfair": {"doc_id": "a.md", "format": 2}})
        {'doc_id': 'a.md', 'format': 2}
        >>> posfair_fields({"doc_id": "a.md", "chunk_index": 0, "lang": "en", "posfair_payload_format": 1})
        {'doc_id': 'a.md', 'chunk_index': 0, 'format': 1}
    """
    payload = payload or {}
    nested = payload.get(POSFAIR)
    if isinstance(nested, Mapping) and nested.get(FORMAT) == PAYLOAD_FORMAT:
        fields = dict(nested)
        if TEXT not in fields and isinstance(payload.get(NODE_CONTENT), str):
            fields[TEXT] = json.loads(payload[NODE_CONTENT]).get(TEXT)
        return fields
    flat = {k: v for k, v in payload.items() if k in FORMAT_1_FIELDS}
    if FORMAT_1 in payload:
        flat[FORMAT] = payload[FORMAT_1]
    return flat


def payload_fields(*fields: str) -> list[str]:
    """The payload keys to fetch (``with_payload=``) so that :func:`posfair_fields` reads ``fields`` of a
    point in either format (and tells the format).

    Example:
        >>> payload_fields("doc_id")
        ['doc_id', 'posfair_payload_format', '_posfair.doc_id', '_posfair.format']
    """
    nested = [NODE_CONTENT if f == TEXT else f"{POSFAIR}.{f}" for f in fields]
    return [*fields, FORMAT_1, *nested, FORMAT_KEY]


def json_metadata(metadata: Mapping[str, Any], where: str = "metadata") -> dict[str, Any]:
    """``metadata`` with JSON values, as ``node.model_dump(mode="json")`` gives a node's metadata.

    A ``datetime`` / ``date`` / ``time`` becomes an ISO string, a tuple or set a list, a ``UUID``
    or a path a string; Qdrant stores the result on every backend, and a date range filter
    (``DatetimeRange``) reads the ISO strings.

    Raises:
        ValueError: a key that is not a string or a value JSON cannot hold (named, with the fix).

    Example:
        >>> import datetime as dt
        >>> json_metadata({"when": dt.date(2024, 1, 2), "tags": ("a", "b")})
        {'when': '2024-01-02', 'tags': ['a', 'b']}
    """
    bad_keys = [k for k in metadata if not isinstance(k, str)]
    if bad_keys:
        raise ValueError(f"{where} keys must be strings, got {bad_keys[:3]!r}; convert them with str()")
    out = {}
    for key, value in metadata.items():
        try:
            out[key] = to_jsonable_python(value)
        except PydanticSerializationError:
            raise ValueError(
                f"{where}[{key!r}] is a {type(value).__name__}, which a payload cannot hold; store a string, "
                "number, bool, date, list or dict of them instead"
            ) from None
    return out


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


def posfair_record(
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
    """posfair's fields of one chunk (stored as the ``_posfair`` object, less the text: :func:`build_payload`).

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
    """
    fields = {
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
        **page_fields(doc.pages, chunk.start_char, chunk.end_char),
    }
    if subchunk_spans is not None:
        fields[SUBCHUNK_SPANS] = subchunk_spans
    return fields


def _stored(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The ``_posfair`` object of ``fields``: all but the text (stored once, in ``_node_content``)."""
    return {k: v for k, v in fields.items() if k != TEXT}


def _chunk_relationships(doc_id: str, version: str, index: int, n_chunks: int) -> dict[str, Any]:
    """A chunk's document (SOURCE) and neighbouring chunks (PREVIOUS / NEXT), as LlamaIndex's JSON."""

    def related(node_id: str) -> dict[str, Any]:
        return {"node_id": node_id, "node_type": None, "metadata": {}, "hash": None, "class_name": "RelatedNodeInfo"}

    out = {_SOURCE: related(doc_id)}
    if index > 0:
        out[_PREVIOUS] = related(point_id(doc_id, version, index - 1))
    if index + 1 < n_chunks:
        out[_NEXT] = related(point_id(doc_id, version, index + 1))
    return out


def chunk_node_content(metadata: Mapping[str, Any], fields: Mapping[str, Any]) -> str:
    """The ``_node_content`` of a chunk ``posfair ingest`` wrote: a LlamaIndex ``TextNode`` as JSON.

    Its id is the point id, its metadata ``metadata`` (left out of the embedding: the vectors are
    of the text alone), its relationships the document and the neighbouring chunks.
    """
    doc_id, version, index = fields[DOC_ID], fields[VERSION], int(fields[CHUNK_INDEX])
    node = {
        "id_": point_id(doc_id, version, index),
        "embedding": None,
        "metadata": dict(metadata),
        "excluded_embed_metadata_keys": list(metadata),
        "excluded_llm_metadata_keys": [],
        "relationships": _chunk_relationships(doc_id, version, index, int(fields[N_CHUNKS])),
        "text": fields[TEXT],
        "mimetype": "text/plain",
        "start_char_idx": fields[START_CHAR],
        "end_char_idx": fields[END_CHAR],
        "class_name": "TextNode",
    }
    return json.dumps(node, ensure_ascii=False)


def build_payload(
    doc: SourceDocument, fields: Mapping[str, Any], node_record: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A point's payload (format 2): the node's metadata flat, LlamaIndex's node record, and posfair's ``fields``
    under ``_posfair``; both writers build every payload here.

    Args:
        doc: the document of the chunk; its ``doc_id`` is the record's ``document_id`` / ``doc_id`` /
            ``ref_doc_id``.
        fields: :func:`posfair_record` (its ``text`` is left out: ``_node_content`` holds it).
        node_record: LlamaIndex's record of a node the vector store writes (its metadata flat, ``_node_content``
            and ``_node_type``: ``node_to_metadata_dict``), kept as given; ``None`` for a chunk ``posfair
            ingest`` writes, whose metadata is the document's (JSON-safe), with the ``file_name`` and, for a
            paged document, the page fields of the chunk (:func:`page_fields`) unless the document's metadata
            has them (any of the page fields: they go together), and whose node is :func:`chunk_node_content`.

    Raises:
        ValueError: document metadata a payload cannot hold (:func:`json_metadata`).
    """
    if node_record is None:
        metadata = json_metadata(doc.metadata, f"metadata of {doc.doc_id!r}")
        metadata.setdefault(FILE_NAME, fields[FILE_NAME])
        if not any(k in metadata for k in PAGE_FIELDS):  # the page fields go together
            metadata.update({k: fields[k] for k in PAGE_FIELDS if k in fields})
        node_record = {**metadata, NODE_CONTENT: chunk_node_content(metadata, fields), NODE_TYPE: "TextNode"}
    doc_id = doc.doc_id
    return {**node_record, DOCUMENT_ID: doc_id, DOC_ID: doc_id, REF_DOC_ID: doc_id, POSFAIR: _stored(fields)}


def rekeyed(payload: Mapping[str, Any], chunking_key: str, version: str) -> dict[str, Any]:
    """``payload`` of a point moved to another document version (a re-keyed copy of a collection).

    The chunking key and version change; a chunk ``posfair ingest`` wrote also gets its new
    node id (the new point id) and neighbours in ``_node_content``. A node the vector store
    wrote keeps its own id.
    """
    out = dict(payload)
    fields = posfair_fields(payload)
    if fields.get(FORMAT) != PAYLOAD_FORMAT:
        out.update({CHUNKING: chunking_key, VERSION: version})
        return out
    old_id = point_id(fields[DOC_ID], fields[VERSION], int(fields[CHUNK_INDEX]))
    fields.update({CHUNKING: chunking_key, VERSION: version})
    out[POSFAIR] = _stored(fields)
    node = json.loads(str(payload.get(NODE_CONTENT) or "{}"))
    if node.get("id_") == old_id:
        out[NODE_CONTENT] = chunk_node_content(node.get("metadata", {}), fields)
    return out
