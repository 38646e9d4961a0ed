"""Idempotent single-process ingestion of text files into Qdrant named vectors.

Pipeline (the steps and guarantees shared with :mod:`qdrant_tools.ray_ingest`
are in :mod:`qdrant_tools.driver`): read files -> check the collection and read
its state -> :func:`qdrant_tools.plan.plan_ingestion` -> chunk and embed the
planned chunks here, ``batch_size`` at a time -> :class:`qdrant_tools.writer.QdrantWriter`.
Chunks are planned, embedded and written a window at a time (:func:`planned_windows`), so the
memory of a run does not grow with the size of a file and a large file's first points are
written while the rest is still to be embedded.

Example:
    >>> from qdrant_tools.ingest import IngestConfig, ingest_path
    >>> from qdrant_tools.store import open_store
    >>> client = open_store("./.posfair/qdrant")                     # doctest: +SKIP
    >>> report = ingest_path(client, "demo", "examples/data",
    ...                      {"calibrated": encoder}, IngestConfig())  # doctest: +SKIP
    >>> print(report.summary())                                      # doctest: +SKIP
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdrant_client.uploader.uploader import iter_batch

from qdrant_tools.chunking import SourceDocument, load_folder
from qdrant_tools.driver import IngestionRun, IngestSettings, read_folder, scoped_to
from qdrant_tools.encoding import ChunkEncoder, Encoder, PlannedChunk
from qdrant_tools.plan import DocumentPlan
from qdrant_tools.report import IngestReport
from qdrant_tools.spec import CollectionSpec
from qdrant_tools.writer import PointBatch

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

__all__ = ["Encoder", "IngestConfig", "IngestReport", "ingest_documents", "ingest_path"]


@dataclass(frozen=True, kw_only=True)
class IngestConfig(IngestSettings):
    """Settings of one single-process ingestion run: :class:`qdrant_tools.driver.IngestSettings` plus

    Args:
        batch_size: chunks embedded and upserted together (one ``upsert(wait=True)`` each).

    Raises:
        ValueError: ``batch_size`` is not a positive integer.

    Example:
        >>> from qdrant_tools.layout import NodeLayout
        >>> IngestConfig(layout=NodeLayout(chunk_tokens=128), batch_size=64).batch_size
        64
    """

    batch_size: int = 256

    def __post_init__(self) -> None:
        if not isinstance(self.batch_size, int) or self.batch_size <= 0:
            raise ValueError(
                f"batch_size must be a positive integer, got {self.batch_size!r}; typical values are 64-1024"
            )


def _ignore(n: int) -> None:
    """No-op ``expect`` of :func:`planned_windows`."""


def planned_windows(
    encoder: ChunkEncoder, documents: Iterable[DocumentPlan], batch_size: int, expect: Callable[[int], None] = _ignore
) -> Iterator[list[PlannedChunk]]:
    """The chunks still to encode of ``documents``, ``batch_size`` at a time, planned a window at a time.

    Each document is read once for its chunk bounds (:meth:`ChunkEncoder.bounds`), then its chunks are
    planned ``batch_size`` at a time, so a large file is never planned whole; a window may span documents.
    ``expect`` is told how many chunks each document adds, once its bounds are known.
    """
    pending: list[PlannedChunk] = []
    for d in documents:
        bounds = encoder.bounds(d.doc)
        todo = [i for i in range(len(bounds)) if i not in d.done]
        expect(len(todo))
        for part in iter_batch(todo, batch_size):
            pending.extend(encoder.chunks(d.doc, bounds=bounds, indices=part))
            while len(pending) >= batch_size:
                yield pending[:batch_size]
                pending = pending[batch_size:]
    if pending:
        yield pending


def _encoded_batches(
    encoder: ChunkEncoder, windows: Iterable[list[PlannedChunk]], report: IngestReport
) -> Iterable[PointBatch]:
    """Embed each window of planned chunks, timing the encoders."""
    for part in windows:
        t = time.perf_counter()
        batch = encoder.encode(part)
        report.embed_seconds += time.perf_counter() - t
        yield batch


def ingest_documents(
    client: StoreLike,
    collection: str,
    documents: Sequence[SourceDocument],
    vectors: Mapping[str, Encoder],
    config: IngestConfig | None = None,
    *,
    report: IngestReport | None = None,
    spec: CollectionSpec | None = None,
) -> IngestReport:
    """Ingest decoded documents; see :mod:`qdrant_tools.driver` for the guarantees.

    Args:
        client: what :func:`qdrant_tools.store.open_store` returns (embedded store or server
            ``QdrantClient``); the writer adds the retries.
        collection: collection name; created with the right named vectors and payload indexes if missing.
        documents: documents with distinct ``doc_id``.
        vectors: vector name -> encoder, e.g. ``{"calibrated": enc}`` or
            ``{"vanilla": plain, "calibrated": cal}``. Chunking uses the first.
        config: run settings.
        report: filled in place (default: a new one).
        spec: an operator's collection spec to create the collection from (default: from the encoders).

    Returns:
        The report.

    Raises:
        CollectionMismatchError: before any write, if the collection does not fit the encoders.
        ValueError: on duplicate document ids or no vectors.
    """
    config = config or IngestConfig()
    report = report or IngestReport(collection=collection)
    t0 = time.perf_counter()
    encoding = config.point_encoding(vectors)
    encoder = ChunkEncoder(vectors, encoding)
    run = IngestionRun.start(client, collection, documents, encoding, report, config, spec=spec, started=t0)
    windows = planned_windows(encoder, run.plan.to_encode, config.batch_size, expect=run.expect)
    run.write(_encoded_batches(encoder, windows, report), show_progress=config.show_progress, total=0)
    run.finish()
    return report


def ingest_path(
    client: StoreLike,
    collection: str,
    path: str | Path,
    vectors: Mapping[str, Encoder],
    config: IngestConfig | None = None,
    **kwargs: Any,
) -> IngestReport:
    """Ingest a folder of .txt/.md files (or one file); see :func:`ingest_documents` (``kwargs`` go there).

    With ``prune``, only documents read from under ``path`` are pruned (:func:`qdrant_tools.driver.scoped_to`).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        CollectionMismatchError: before any write, if the collection does not fit.
        ValueError: ``prune`` with a single file (nothing written).
    """
    config = scoped_to(config or IngestConfig(), path)
    load = functools.partial(load_folder, follow_links=config.follow_links)
    docs, report = read_folder(path, config.extensions, IngestReport(collection=collection), load=load)
    return ingest_documents(client, collection, docs, vectors, config, report=report, **kwargs)
