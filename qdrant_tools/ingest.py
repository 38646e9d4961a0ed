"""Idempotent ingestion of text files into Qdrant named vectors.

Pipeline: discover files -> read (skip binary / non-UTF-8 / empty, with the
reason) -> diff against what the collection already holds (by document id and
*version* = content hash + chunking + encoder fingerprints, read from the
payloads) -> chunk -> embed -> ``upsert(wait=True)`` -> only once every chunk
of a document's new version is stored, delete that document's stale points.

Guarantees:
  * the collection schema is checked against every encoder before any write;
  * point ids are deterministic (:mod:`qdrant_tools.ids`), so re-running is
    idempotent and a run interrupted at any point is completed by a rerun,
    every chunk ending up stored exactly once;
  * a changed document's new chunks are written before its old ones are
    deleted (never delete first), so a crash never loses a document;
  * state lives in Qdrant payloads, not in a local file.

Embedding is local compute and is never retried.

Example:
    >>> from qdrant_client import QdrantClient
    >>> from qdrant_tools.ingest import IngestConfig, ingest_path
    >>> client = QdrantClient(path="./.posfair/qdrant")              # doctest: +SKIP
    >>> report = ingest_path(client, "demo", "examples/data",
    ...                      {"calibrated": encoder}, IngestConfig())  # doctest: +SKIP
    >>> print(report.summary())                                      # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from qdrant_client import models

from qdrant_tools import payload as P
from qdrant_tools.chunking import (
    DEFAULT_EXTENSIONS,
    ChunkingConfig,
    SkippedFile,
    SourceDocument,
    SpanFn,
    chunk_text,
    discover_files,
    load_document,
    tokenizer_spans,
    whitespace_spans,
)
from qdrant_tools.ids import document_version, point_id
from qdrant_tools.schema import VectorSpec, ensure_collection

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_TOKENS = 256
DEFAULT_OVERLAP_TOKENS = 32


@runtime_checkable
class Encoder(Protocol):
    """What ingestion needs from an encoder (``PosFairEncoder`` satisfies it)."""

    @property
    def dimension(self) -> int: ...

    @property
    def max_length(self) -> int: ...

    def encode_documents(self, texts: list[str]) -> np.ndarray: ...

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...

    def fingerprint(self) -> str: ...

    def count_tokens(self, texts: list[str]) -> list[int]: ...


@dataclass
class IngestConfig:
    """Settings of one ingestion run.

    Args:
        chunk_tokens: tokens per chunk (special tokens not counted); None =
            ``min(256, encoder window - special tokens)``.
        overlap_tokens: tokens shared by consecutive chunks; None = ``min(32, chunk_tokens // 8)``.
        extensions: file suffixes ingested from a folder.
        batch_size: chunks embedded and upserted together (one ``upsert(wait=True)`` each).
        prune: delete documents stored in the collection whose file is no
            longer under the ingested path (off by default: a missing file
            never deletes data unless asked).
        show_progress: tqdm progress bar over chunks.
    """

    chunk_tokens: int | None = None
    overlap_tokens: int | None = None
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    batch_size: int = 256
    prune: bool = False
    show_progress: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.batch_size, int) or self.batch_size <= 0:
            raise ValueError(
                f"batch_size must be a positive integer, got {self.batch_size!r}; typical values are 64-1024"
            )


@dataclass
class IngestReport:
    """What an ingestion run did."""

    collection: str
    files_seen: int = 0
    files_other: int = 0
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    chunks_written: int = 0
    chunks_deleted: int = 0
    chunks_truncated: int = 0
    max_length: int = 0
    created_collection: bool = False
    chunking: str = ""
    embed_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_written / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """Human-readable multi-line summary."""
        lines = [
            f"collection {self.collection!r}{' (created)' if self.created_collection else ''}: "
            f"{self.files_seen} files seen, {len(self.new)} new, {len(self.changed)} changed, "
            f"{len(self.unchanged)} unchanged, {len(self.skipped)} skipped",
            f"chunks: {self.chunks_written} written, {self.chunks_deleted} stale deleted "
            f"({self.chunking}); {self.seconds:.1f}s, {self.chunks_per_second:.1f} chunks/s",
        ]
        if self.chunks_truncated:
            lines.append(
                f"WARNING: {self.chunks_truncated} chunks were longer than the model window "
                f"({self.max_length} tokens) and were truncated when embedded; lower --chunk-tokens"
            )
        if self.cleaned:
            lines.append(f"finished an interrupted update of {len(self.cleaned)} documents (stale chunks removed)")
        if self.pruned:
            lines.append(f"pruned {len(self.pruned)} documents no longer on disk")
        if self.files_other:
            lines.append(f"ignored {self.files_other} files with other extensions")
        for s in self.skipped:
            lines.append(f"skipped {s.source}: {s.reason}")
        return "\n".join(lines)


@dataclass(frozen=True)
class PlannedChunk:
    """A chunk ready to embed: its point id, text and payload."""

    doc_id: str
    point_id: str
    text: str
    payload: dict[str, Any]


def describe_encoder(encoder: Any) -> str:
    """Short description of an encoder for error messages."""
    name = getattr(encoder, "model_id", None) or type(encoder).__name__
    try:
        return f"{name} (fingerprint {encoder.fingerprint()})"
    except Exception:  # pragma: no cover - description only
        return str(name)


def chunking_key(chunking: Any, spans_name: str) -> str:
    """The string that identifies how a document was chunked (stored with every point).

    Single-process and Ray ingestion must agree on it, or reruns re-embed everything.
    """
    return f"{chunking.key()};spans={spans_name}"


def spans_for(encoder: Any) -> tuple[SpanFn, str]:
    """Chunk on the encoder's own (fast) tokenizer if it has one, else on whitespace."""
    tok = getattr(encoder, "tokenizer", None)
    if tok is not None and getattr(tok, "is_fast", False):
        return tokenizer_spans(tok), "tokenizer"
    return whitespace_spans, "whitespace"


def resolve_chunking(
    encoder: Encoder, chunk_tokens: int | None = None, overlap_tokens: int | None = None
) -> ChunkingConfig:
    """Chunking that fits the encoder's window unless sizes are given explicitly.

    An explicit ``chunk_tokens`` above the window is allowed (the chunks are
    truncated when embedded, and the report says how many) but logged.
    """
    n_special = int(encoder.count_tokens([""])[0])
    window = int(encoder.max_length) - n_special
    if window <= 0:
        raise ValueError(
            f"encoder max_length={encoder.max_length} leaves no room for text after {n_special} special tokens"
        )
    if chunk_tokens is None:
        chunk_tokens = min(DEFAULT_CHUNK_TOKENS, window)
    elif chunk_tokens > window:
        logger.warning(
            "chunk_tokens=%d exceeds the model window of %d text tokens (max_length %d); "
            "chunks will be truncated when embedded",
            chunk_tokens,
            window,
            encoder.max_length,
        )
    if overlap_tokens is None:
        overlap_tokens = min(DEFAULT_OVERLAP_TOKENS, chunk_tokens // 8)
    return ChunkingConfig(chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)


def prepare_document(
    doc: SourceDocument,
    *,
    chunking: ChunkingConfig,
    chunking_key: str,
    spans_fn: SpanFn,
    fingerprints: Mapping[str, str],
    count_tokens: Any,
    max_length: int,
) -> list[PlannedChunk]:
    """Chunk one document into planned points (pure given its inputs).

    Every ingestion path must build points with this function so that ids and
    payloads agree.
    """
    version = document_version(doc.content_hash, chunking_key, fingerprints)
    chunks = chunk_text(doc.text, chunking, spans_fn)
    n_tokens = list(count_tokens([c.text for c in chunks])) if chunks else []
    return [
        PlannedChunk(
            doc_id=doc.doc_id,
            point_id=point_id(doc.doc_id, version, c.index),
            text=c.text,
            payload=P.build_payload(
                doc,
                c,
                n_chunks=len(chunks),
                version=version,
                fingerprints=fingerprints,
                n_tokens=n,
                truncated=n > max_length,
                chunking_key=chunking_key,
            ),
        )
        for c, n in zip(chunks, n_tokens)
    ]


def create_record_indexes(client: Any, collection: str) -> None:
    """Keyword payload indexes on ``doc_id`` and ``version`` (used by every diff and
    delete on a server; embedded mode ignores payload indexes, so its warning is muted)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key in (P.DOC_ID, P.VERSION):
            client.create_payload_index(
                collection, field_name=key, field_schema=models.PayloadSchemaType.KEYWORD, wait=True
            )


def _posfair_filter(doc_id: str) -> list[Any]:
    return [
        models.FieldCondition(key=P.DOC_ID, match=models.MatchValue(value=doc_id)),
        models.FieldCondition(key=P.FORMAT, range=models.Range(gte=1)),
    ]


def stored_records(client: Any, collection: str) -> dict[str, dict[str, list[int]]]:
    """``doc_id -> version -> [points stored, n_chunks of that version]`` for posfair points."""
    records: dict[str, dict[str, list[int]]] = defaultdict(dict)
    offset = None
    while True:
        points, offset = client.scroll(
            collection,
            limit=2048,
            offset=offset,
            with_vectors=False,
            with_payload=models.PayloadSelectorInclude(include=P.RECORD_FIELDS + [P.FORMAT]),
        )
        for p in points:
            pl = p.payload or {}
            if P.FORMAT not in pl or P.DOC_ID not in pl:
                continue
            rec = records[pl[P.DOC_ID]].setdefault(pl[P.VERSION], [0, int(pl.get(P.N_CHUNKS, 0))])
            rec[0] += 1
        if offset is None:
            return dict(records)


def _delete(client: Any, collection: str, must: list[Any], must_not: list[Any] | None = None) -> int:
    flt = models.Filter(must=must, must_not=must_not or None)
    n = client.count(collection, count_filter=flt, exact=True).count
    if n:
        client.delete(collection, points_selector=models.FilterSelector(filter=flt), wait=True)
    return n


def delete_stale(client: Any, collection: str, doc_id: str, keep_version: str) -> int:
    """Delete a document's points of every version but ``keep_version``; returns how many."""
    return _delete(
        client,
        collection,
        _posfair_filter(doc_id),
        [models.FieldCondition(key=P.VERSION, match=models.MatchValue(value=keep_version))],
    )


def ingest_documents(
    client: Any,
    collection: str,
    documents: Sequence[SourceDocument],
    vectors: Mapping[str, Encoder],
    config: IngestConfig | None = None,
    *,
    report: IngestReport | None = None,
) -> IngestReport:
    """Ingest decoded documents; see the module docstring for the guarantees.

    Args:
        client: a ``QdrantClient`` (embedded or server).
        collection: collection name; created with the right named vectors if missing.
        documents: documents with distinct ``doc_id``.
        vectors: vector name -> encoder, e.g. ``{"calibrated": enc}`` or
            ``{"vanilla": plain, "calibrated": cal}``. Chunking uses the first.
        config: run settings.

    Raises:
        SchemaMismatchError: before any write, if the collection does not fit the encoders.
        ValueError: on duplicate document ids or no vectors.
    """
    config = config or IngestConfig()
    report = report or IngestReport(collection=collection)
    t0 = time.perf_counter()
    if not vectors:
        raise ValueError("vectors must map at least one vector name to an encoder, e.g. {'calibrated': encoder}")
    ids = [d.doc_id for d in documents]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"document ids must be distinct, got duplicates {dup[:5]}")
    specs = [VectorSpec(name, int(enc.dimension), encoder=describe_encoder(enc)) for name, enc in vectors.items()]
    report.created_collection = ensure_collection(client, collection, specs)  # raises before any point is written
    if report.created_collection:
        create_record_indexes(client, collection)

    first = next(iter(vectors.values()))
    chunking = resolve_chunking(first, config.chunk_tokens, config.overlap_tokens)
    spans_fn, spans_name = spans_for(first)
    chunk_key = chunking_key(chunking, spans_name)
    report.chunking = f"{chunking.chunk_tokens}-token chunks, {chunking.overlap_tokens} overlap, {spans_name} tokens"
    fingerprints = {name: enc.fingerprint() for name, enc in vectors.items()}
    max_length = min(int(enc.max_length) for enc in vectors.values())
    report.max_length = max_length

    stored = stored_records(client, collection)
    to_write: list[tuple[SourceDocument, str]] = []
    to_clean: list[tuple[str, str]] = []
    for doc in documents:
        version = document_version(doc.content_hash, chunk_key, fingerprints)
        st = stored.get(doc.doc_id, {})
        cur = st.get(version)
        complete = cur is not None and cur[0] == cur[1]
        if complete and len(st) == 1:
            report.unchanged.append(doc.doc_id)
        elif complete:
            to_clean.append((doc.doc_id, version))
        else:
            (report.changed if st else report.new).append(doc.doc_id)
            to_write.append((doc, version))

    # finish interrupted updates: the new version is complete, only stale points remain
    for doc_id, version in to_clean:
        report.chunks_deleted += delete_stale(client, collection, doc_id, version)
        report.cleaned.append(doc_id)

    planned: list[PlannedChunk] = []
    for doc, _ in to_write:
        planned.extend(
            prepare_document(
                doc,
                chunking=chunking,
                chunking_key=chunk_key,
                spans_fn=spans_fn,
                fingerprints=fingerprints,
                count_tokens=first.count_tokens,
                max_length=max_length,
            )
        )
    report.chunks_truncated = sum(1 for c in planned if c.payload[P.TRUNCATED])
    if report.chunks_truncated:
        logger.warning(
            "%d of %d chunks exceed the model window of %d tokens and will be truncated when embedded",
            report.chunks_truncated,
            len(planned),
            max_length,
        )
    remaining = defaultdict(int)
    for c in planned:
        remaining[c.doc_id] += 1
    versions = {doc.doc_id: v for doc, v in to_write}

    bar = None
    if config.show_progress and planned:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(planned), unit="chunk", desc=f"ingest {collection}")
    try:
        for start in range(0, len(planned), config.batch_size):
            batch = planned[start : start + config.batch_size]
            texts = [c.text for c in batch]
            te = time.perf_counter()
            vecs = {}
            for name, enc in vectors.items():  # 1. embed (local compute: never retried)
                arr = np.asarray(enc.encode_documents(texts), dtype=np.float32)
                if arr.shape != (len(texts), int(enc.dimension)):
                    raise RuntimeError(
                        f"encoder for vector {name!r} returned shape {arr.shape}, expected {(len(texts), enc.dimension)}"
                    )
                vecs[name] = arr.tolist()
            report.embed_seconds += time.perf_counter() - te
            client.upsert(  # 2. write, and wait until it is stored
                collection,
                points=models.Batch(ids=[c.point_id for c in batch], vectors=vecs, payloads=[c.payload for c in batch]),
                wait=True,
            )
            report.chunks_written += len(batch)
            if bar is not None:
                bar.update(len(batch))
            for c in batch:  # 3. a document fully written: drop its stale version
                remaining[c.doc_id] -= 1
                if remaining[c.doc_id] == 0:
                    report.chunks_deleted += delete_stale(client, collection, c.doc_id, versions[c.doc_id])
    finally:
        if bar is not None:
            bar.close()

    if config.prune:
        present = {d.doc_id for d in documents}
        for doc_id in sorted(set(stored) - present):
            report.chunks_deleted += _delete(client, collection, _posfair_filter(doc_id))
            report.pruned.append(doc_id)
    report.seconds += time.perf_counter() - t0
    return report


def load_folder(
    path: str | Path, extensions: Iterable[str] = DEFAULT_EXTENSIONS
) -> tuple[list[SourceDocument], list[SkippedFile], int]:
    """Read every candidate file under ``path``.

    Returns:
        ``(documents, skipped, n_other)``; each skip is logged with its reason.
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


def ingest_path(
    client: Any,
    collection: str,
    path: str | Path,
    vectors: Mapping[str, Encoder],
    config: IngestConfig | None = None,
) -> IngestReport:
    """Ingest a folder of .txt/.md files (or one file); see :func:`ingest_documents`.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        SchemaMismatchError: before any write, if the collection does not fit.
    """
    config = config or IngestConfig()
    t0 = time.perf_counter()
    docs, skipped, n_other = load_folder(path, config.extensions)
    report = IngestReport(
        collection=collection, files_seen=len(docs) + len(skipped), files_other=n_other, skipped=skipped
    )
    if not docs and not config.prune:
        # still validate the schema so a wrong collection is reported
        ensure_collection(
            client,
            collection,
            [VectorSpec(n, int(e.dimension), encoder=describe_encoder(e)) for n, e in vectors.items()],
        )
        report.seconds = time.perf_counter() - t0
        return report
    report.seconds = time.perf_counter() - t0
    return ingest_documents(client, collection, docs, vectors, config, report=report)
