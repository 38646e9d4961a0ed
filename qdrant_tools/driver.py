"""The driver side of an ingestion run, shared by the single-process and the Ray path.

Both paths are the same five steps; only step 4 differs::

    1. read the input (read_folder)
    2. writer.check (schema, raises before any write) -> writer.read_state (one scroll)
    3. plan_ingestion -> writer.ensure (collection + payload indexes) -> finish interrupted updates
    4. encode the planned chunks (local batches, or a Ray actor pool) -> PointBatch stream
    5. IngestionRun.write: upsert(wait=True) each batch; a document's stale
       versions are deleted once its new version is complete; then prune and
       build the search index (IngestionRun.finish)

The guarantees of both paths live here and in the writer (docs/integration.md, "Guarantees of
``posfair ingest``"): the schema is checked before any write, point ids are deterministic (a rerun completes
an interrupted run), a changed document's new chunks are written before its old ones are deleted, and the
state lives in Qdrant payloads.

Example:
    >>> run = IngestionRun.start(client, "demo", docs, IngestSettings().point_encoding(vectors), IngestReport("demo"),
    ...                          IngestSettings())                                    # doctest: +SKIP
    >>> run.write(batches); run.finish()                                                # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from qdrant_tools import payload as P
from qdrant_tools.chunking import DEFAULT_EXTENSIONS, SkippedFile, SourceDocument, load_folder
from qdrant_tools.encoding import Encoder, PointEncoding
from qdrant_tools.layout import NodeLayout
from qdrant_tools.plan import CompletionTracker, IngestionPlan, plan_ingestion, rebase_ids
from qdrant_tools.report import IngestReport
from qdrant_tools.retry import RetryPolicy
from qdrant_tools.sparse import Bm25Sparse
from qdrant_tools.spec import CollectionSpec
from qdrant_tools.writer import PointBatch, QdrantWriter, spec_for_vectors

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=IngestReport)


@dataclass(frozen=True, kw_only=True)
class IngestSettings:
    """Settings every ingestion path shares.

    Args:
        layout: how documents are cut into nodes and which vectors each node stores
            (:class:`qdrant_tools.layout.NodeLayout`).
        extensions: file suffixes ingested from a folder.
        follow_links: read the files that links under the ingested folder lead to outside it
            (:func:`qdrant_tools.chunking.gather_files`; default: skipped and reported).
        prune: delete documents stored in the collection whose file is no
            longer under the ingested path (off by default: a missing file
            never deletes data unless asked).
        prune_under: with ``prune``, only documents read from a file under this folder are deleted
            (:func:`scoped_to` sets it to the ingested folder); ``None``: every stored document
            absent from the input.
        read_from: the path the documents were read from (:func:`scoped_to` sets it): when it lies inside
            a folder the collection was filled from, the documents' ids are made relative to that folder
            (:func:`qdrant_tools.plan.rebase_ids`), so a subfolder or one file updates its documents in place.
        retry: backoff of every Qdrant call (transient network errors only; never applied to encoding).
        show_progress: progress bar over written chunks.
        sparse: a BM25 sparse vector of every node's text (:class:`qdrant_tools.sparse.Bm25Sparse`),
            for hybrid search; ``None`` = none.
        metadata: collection metadata to record, e.g. ``{RECIPE_KEY: recipe}`` (:mod:`qdrant_tools.metadata`):
            written when the collection is created (or first recorded into an older one), and checked
            against what the collection holds before any write.

    Example:
        >>> from qdrant_tools.layout import NodeLayout
        >>> IngestSettings(layout=NodeLayout(chunk_tokens=128, subchunks=None)).layout.chunk_tokens
        128
    """

    layout: NodeLayout = field(default_factory=NodeLayout)
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    follow_links: bool = False
    prune: bool = False
    prune_under: str | None = None
    read_from: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    show_progress: bool = True
    sparse: Bm25Sparse | None = None
    metadata: Mapping[str, Any] | None = None

    def point_encoding(self, vectors: Mapping[str, Encoder]) -> PointEncoding:
        """The run's :class:`~qdrant_tools.encoding.PointEncoding`: ``vectors``' sizes and fingerprints with this
        layout and sparse vector (every ingestion path builds it here; :meth:`NodeLayout.point_encoding`)."""
        return self.layout.point_encoding(vectors, sparse=self.sparse)


#: Reads a path: ``(path, extensions) -> (documents, skipped, n_other)`` (:func:`qdrant_tools.chunking.load_folder`).
Loader = Callable[[str | Path, Iterable[str]], tuple[list[SourceDocument], list[SkippedFile], int]]
S = TypeVar("S", bound=IngestSettings)


def scoped_to(settings: S, path: str | Path) -> S:
    """``settings`` for documents read from ``path``: ids rebased onto the collection's folder, pruning limited
    to the documents under the folder ``path``.

    Document ids are paths relative to the ingested folder, so they say nothing of where
    the folder is: the stored ``source`` does (:func:`qdrant_tools.plan.plan_ingestion`,
    :func:`qdrant_tools.plan.rebase_ids`).

    Raises:
        ValueError: ``prune`` with a single file ``path`` (it would prune every other document); nothing written.
    """
    if settings.prune and Path(path).is_file():
        raise ValueError(
            f"prune with the single file {str(path)!r} would delete every other document of the collection; "
            "pass the folder to prune, or ingest the file without prune"
        )
    return dataclasses.replace(settings, read_from=str(path), prune_under=str(path) if settings.prune else None)


def read_folder(
    path: str | Path, extensions: Iterable[str], report: R, load: Loader = load_folder
) -> tuple[list[SourceDocument], R]:
    """Read the files under ``path`` with ``load``; record what was seen and skipped, and the time taken, in ``report``.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    t0 = time.perf_counter()
    docs, skipped, n_other = load(path, extensions)
    report.files_seen += len(docs) + len(skipped)
    report.files_other += n_other
    report.skipped.extend(skipped)
    report.seconds += time.perf_counter() - t0
    return docs, report


def plan_run(
    client: StoreLike,
    collection: str,
    documents: Sequence[SourceDocument],
    encoders: PointEncoding,
    settings: IngestSettings,
    *,
    spec: CollectionSpec | None = None,
    ordering: str | None = None,
) -> tuple[QdrantWriter, IngestionPlan]:
    """Step 2 and the plan of step 3, writing nothing: check the collection, read its state, plan.

    What :meth:`IngestionRun.start` does before its first write, and all a dry run does
    (the plan says what would be added, replaced and pruned).

    Raises:
        CollectionMismatchError: the collection (or ``spec``) does not fit the encoders.
        ValueError: duplicate document ids.
    """
    metadata = encoders.metadata(settings.metadata)
    spec = spec_for_vectors(collection, encoders.vector_configs(), spec, metadata, sparse=encoders.sparse_configs())
    writer = QdrantWriter(client, spec, descriptions=encoders.descriptions, retry=settings.retry, ordering=ordering)
    writer.check()
    stored = writer.read_state()
    if settings.read_from is not None:
        documents = rebase_ids(documents, stored, settings.read_from)
    plan = plan_ingestion(
        stored,
        documents,
        encoders.chunking_key,
        encoders.fingerprints,
        prune=settings.prune,
        prune_under=settings.prune_under,
    )
    return writer, plan


@dataclass
class IngestionRun:
    """One run's writer, plan, report and completion tracker (built by :meth:`start`)."""

    writer: QdrantWriter
    plan: IngestionPlan
    report: IngestReport
    tracker: CompletionTracker
    versions: dict[str, str]
    started: float
    show_progress: bool = False
    _bar: Any = field(default=None, init=False, repr=False)
    _bar_desc: str | None = field(default=None, init=False, repr=False)

    @classmethod
    def start(
        cls,
        client: StoreLike,
        collection: str,
        documents: Sequence[SourceDocument],
        encoders: PointEncoding,
        report: IngestReport,
        settings: IngestSettings,
        *,
        spec: CollectionSpec | None = None,
        ordering: str | None = None,
        started: float | None = None,
    ) -> IngestionRun:
        """Steps 2-3: check, read the state, plan, ensure the collection, finish interrupted updates.

        Args:
            client: a ``QdrantClient`` (not wrapped: the writer retries).
            collection: collection name.
            documents: the input, with distinct ``doc_id``.
            encoders: the run's :class:`~qdrant_tools.encoding.PointEncoding`.
            report: filled in place.
            settings: prune and retry settings.
            spec: an operator's collection spec (HNSW, indexes ...); default: built from the encoders.
            ordering: write ordering of upserts.
            started: ``time.perf_counter()`` when the caller began (default: now); counted in ``report.seconds``.

        Raises:
            CollectionMismatchError: the collection (or ``spec``) does not fit the encoders; nothing written.
            ValueError: duplicate document ids; nothing written.
        """
        writer, plan = plan_run(client, collection, documents, encoders, settings, spec=spec, ordering=ordering)
        report.created_collection = writer.ensure()
        _record_plan(report, plan, encoders)
        todo = plan.to_encode
        run = cls(
            writer=writer,
            plan=plan,
            report=report,
            tracker=CompletionTracker({d.doc.doc_id: d.done for d in todo}),
            versions={d.doc.doc_id: d.version for d in todo},
            started=time.perf_counter() if started is None else started,
            show_progress=settings.show_progress,
        )
        for d in plan.documents:  # an interrupted update: the new version is all there, only stale points remain
            if d.action == "cleanup":
                report.chunks_deleted += writer.delete_stale(d.doc.doc_id, d.version)
                report.cleaned.append(d.doc.doc_id)
        return run

    def write(
        self,
        batches: Iterable[PointBatch],
        *,
        show_progress: bool = False,
        total: int | None = None,
        on_write: Callable[[int], None] | None = None,
    ) -> None:
        """Step 5: write every batch; drop a document's stale versions once its new version is complete.

        ``total``: the chunks to write (``None``: unknown); the batches' producer may announce more with
        :meth:`expect` as it plans each document, and the progress bar's total grows (``total=0``: no bar
        until some are announced).
        """
        self._bar_desc = f"ingest {self.writer.collection}" if show_progress else None
        self._bar = _progress(show_progress, total, self._bar_desc or "")
        try:
            for batch in batches:
                n = self.writer.upsert(batch)
                if n == 0:
                    continue
                self.report.chunks_written += n
                self.report.chunks_truncated += sum(1 for p in batch.payloads if P.posfair_fields(p)[P.TRUNCATED])
                if self._bar is not None:
                    self._bar.update(n)
                if on_write is not None:
                    on_write(n)
                for doc_id in self.tracker.add(batch.written_chunks()):
                    self.report.chunks_deleted += self.writer.delete_stale(doc_id, self.versions[doc_id])
        finally:
            if self._bar is not None:
                self._bar.close()
            self._bar, self._bar_desc = None, None

    def expect(self, n: int) -> None:
        """Announce ``n`` more chunks to write (the progress bar's total grows by ``n``)."""
        if n <= 0:
            return
        if self._bar is None and self._bar_desc is not None:
            self._bar = _progress(True, n, self._bar_desc)
        elif self._bar is not None:
            self._bar.total = (self._bar.total or 0) + n
            self._bar.refresh()

    def finish(self) -> None:
        """Prune (if asked), build the search index, warn about truncated chunks, stop the clock.

        The index is built here, once the points are written, so the first query
        after an ingestion does not pay for it (the embedded store; a server
        indexes in the background).
        """
        if self.plan.prune:
            self.report.chunks_deleted += self.writer.delete_documents(self.plan.prune)
            self.report.pruned.extend(self.plan.prune)
        if self.report.chunks_written or self.report.chunks_deleted:
            self.report.index_seconds += self.writer.build_index(show_progress=self.show_progress)
        if self.report.chunks_truncated:
            logger.warning(
                "%d chunks exceeded the model window of %d tokens and were truncated when embedded",
                self.report.chunks_truncated,
                self.report.max_length,
            )
        self.report.seconds += time.perf_counter() - self.started


def _record_plan(report: IngestReport, plan: IngestionPlan, encoders: PointEncoding) -> None:
    report.new.extend(plan.doc_ids("new"))
    report.changed.extend(plan.doc_ids("changed"))
    report.resumed.extend(plan.doc_ids("partial"))
    report.unchanged.extend(plan.doc_ids("unchanged"))
    report.chunks_resumed += plan.chunks_resumed
    report.chunking = encoders.label
    report.max_length = encoders.max_length
    report.vectors = dict(encoders.fingerprints)


def _progress(enabled: bool, total: int | None, desc: str) -> Any:
    if not enabled or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="chunk", desc=desc)
