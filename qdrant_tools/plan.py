"""What an ingestion run must do, worked out from what the collection holds (pure: no client, no model).

:func:`plan_ingestion` compares the input documents with the stored state
(per document and version: the chunk indices stored and the version's chunk
count, read once by :meth:`qdrant_tools.writer.QdrantWriter.read_state`) and
classifies each document:

* ``new``: nothing stored -> encode every chunk;
* ``changed``: other versions only -> encode every chunk, then delete the
  other versions;
* ``partial``: this version with chunks missing (an interrupted run) ->
  encode only the missing chunks, then delete the other versions;
* ``cleanup``: this version complete and other versions too (a crash before
  the stale delete) -> delete the other versions;
* ``unchanged``: this version complete, nothing else -> nothing.

A document's *version* (:func:`qdrant_tools.ids.document_version`) hashes its
content, the chunking and every encoder fingerprint, so any of them changing
makes a document ``changed``. Stored documents missing from the input are
prune candidates (deleted only when asked), and with ``prune_under`` only those
whose stored ``source`` file lies under that folder: ingesting one folder never
prunes the documents of another.

:class:`CompletionTracker` follows the chunks as they are written and says
when a document's new version is complete, the only moment its stale versions
may be deleted.

Example:
    >>> from qdrant_tools.chunking import SourceDocument
    >>> doc = SourceDocument("a.md", "hello", "/data/a.md", "00")
    >>> plan = plan_ingestion({}, [doc], "tokens=256;overlap=32", {"calibrated": "f1"})
    >>> [(d.doc.doc_id, d.action) for d in plan.documents]
    [('a.md', 'new')]
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from qdrant_tools.chunking import SourceDocument
from qdrant_tools.ids import document_version

Action = Literal["new", "changed", "partial", "cleanup", "unchanged"]
#: Actions whose documents have chunks to encode.
ENCODE_ACTIONS: frozenset[str] = frozenset({"new", "changed", "partial"})


@dataclass(frozen=True)
class StoredVersion:
    """The chunks of one document version found in the collection.

    Args:
        chunks: chunk indices stored.
        n_chunks: how many chunks the version has (from the payloads).
        source: the path the version was read from (its payload's ``source``), if known.
    """

    chunks: frozenset[int]
    n_chunks: int
    source: str | None = field(default=None, compare=False)

    @property
    def complete(self) -> bool:
        """Every chunk ``0 .. n_chunks - 1`` is stored."""
        return self.n_chunks > 0 and self.chunks.issuperset(range(self.n_chunks))


#: ``doc_id -> version -> StoredVersion``.
StoredState = Mapping[str, Mapping[str, StoredVersion]]


@dataclass(frozen=True)
class DocumentPlan:
    """What the run does with one input document.

    Args:
        doc: the document.
        version: its version under the current chunking and encoders.
        action: see the module docstring.
        done: chunk indices of ``version`` already stored (not encoded again).
        stale: other stored versions, deleted once ``version`` is complete.
    """

    doc: SourceDocument
    version: str
    action: Action
    done: frozenset[int] = frozenset()
    stale: tuple[str, ...] = ()


@dataclass(frozen=True)
class IngestionPlan:
    """The plan of one run: one :class:`DocumentPlan` per input document, in input order."""

    documents: tuple[DocumentPlan, ...]
    prune: tuple[str, ...] = ()

    def doc_ids(self, action: Action) -> list[str]:
        """Ids of the documents with ``action``, in input order."""
        return [d.doc.doc_id for d in self.documents if d.action == action]

    @property
    def to_encode(self) -> list[DocumentPlan]:
        """Documents with chunks to encode (new, changed, partial)."""
        return [d for d in self.documents if d.action in ENCODE_ACTIONS]

    @property
    def chunks_resumed(self) -> int:
        """Chunks of partly stored documents that are already stored and are not encoded again."""
        return sum(len(d.done) for d in self.documents if d.action == "partial")


def check_distinct_ids(documents: Sequence[SourceDocument]) -> None:
    """Raise if two documents share a ``doc_id``.

    Raises:
        ValueError: naming up to five duplicated ids.
    """
    counts = Counter(d.doc_id for d in documents)
    dup = sorted(i for i, n in counts.items() if n > 1)
    if dup:
        raise ValueError(
            f"document ids must be distinct, got duplicates {dup[:5]}; each file under the ingested path "
            "must have its own relative path"
        )


def classify(version: str, stored: Mapping[str, StoredVersion]) -> tuple[Action, frozenset[int], tuple[str, ...]]:
    """Action, chunks already done and stale versions of one document (see the module docstring)."""
    stale = tuple(sorted(v for v in stored if v != version))
    cur = stored.get(version)
    if cur is None:
        return ("changed" if stale else "new"), frozenset(), stale
    if not cur.complete:
        return "partial", frozenset(cur.chunks), stale
    return ("cleanup" if stale else "unchanged"), frozenset(cur.chunks), stale


def plan_ingestion(
    stored: StoredState,
    documents: Sequence[SourceDocument],
    chunking_key: str,
    fingerprints: Mapping[str, str],
    *,
    prune: bool = False,
    prune_under: str | None = None,
) -> IngestionPlan:
    """Classify every document against the stored state.

    Args:
        stored: ``doc_id -> version -> StoredVersion`` of the collection's posfair points.
        documents: the input, with distinct ``doc_id``.
        chunking_key: :func:`qdrant_tools.encoding.chunking_key` of this run.
        fingerprints: vector name -> encoder fingerprint of this run.
        prune: list stored documents absent from the input as prune candidates.
        prune_under: a folder: only stored documents read from a file under it are prune candidates
            (``None``: every stored document absent from the input).

    Returns:
        The :class:`IngestionPlan`.

    Raises:
        ValueError: on duplicate document ids (before anything is planned).
    """
    check_distinct_ids(documents)
    plans = []
    for doc in documents:
        version = document_version(doc.content_hash, chunking_key, fingerprints)
        action, done, stale = classify(version, stored.get(doc.doc_id, {}))
        plans.append(DocumentPlan(doc=doc, version=version, action=action, done=done, stale=stale))
    gone = sorted(set(stored) - {d.doc_id for d in documents}) if prune else []
    if prune_under is not None:
        gone = [doc_id for doc_id in gone if _read_under(stored[doc_id].values(), prune_under)]
    return IngestionPlan(documents=tuple(plans), prune=tuple(gone))


def stored_roots(stored: StoredState) -> set[str]:
    """The folders the stored documents were read from: each ``source`` less its ``doc_id`` (absolute paths).

    Example:
        >>> sorted(stored_roots({"sub/a.md": {"v": StoredVersion(frozenset(), 1, "/data/sub/a.md")}}))
        ['/data']
    """
    roots = set()
    for doc_id, versions in stored.items():
        parts = PurePosixPath(doc_id).parts
        for v in versions.values():
            src = Path(os.path.abspath(v.source)).parts if v.source else ()
            if parts and len(src) > len(parts) and tuple(src[-len(parts) :]) == parts:
                roots.add(str(Path(*src[: -len(parts)])))
    return roots


def rebase_ids(documents: Sequence[SourceDocument], stored: StoredState, path: str) -> list[SourceDocument]:
    """``documents`` read from ``path``, their ids made relative to the stored folder ``path`` lies in.

    Ids are relative to the folder ingested; ingesting a subfolder (or one file) of a folder the
    collection was filled from would otherwise give its documents new ids (``b.md`` instead of
    ``sub/b.md``) and store them twice. The nearest stored folder above ``path`` wins; a ``path``
    that is itself a stored folder keeps its ids.

    Example:
        >>> stored = {"sub/a.md": {"v": StoredVersion(frozenset({0}), 1, "/data/sub/a.md")}}
        >>> docs = [SourceDocument("b.md", "b", "/data/sub/b.md", "h")]
        >>> [d.doc_id for d in rebase_ids(docs, stored, "/data/sub")]
        ['sub/b.md']
    """
    here = os.path.realpath(path)  # a linked file or folder is placed where it really is (as its ids are)
    base = os.path.dirname(here) if os.path.isfile(here) else here
    roots = {os.path.realpath(r) for r in stored_roots(stored)}
    if here in roots:
        return list(documents)
    above = [r for r in roots if os.path.commonpath([r, base]) == r]
    if not above:
        return list(documents)
    prefix = PurePosixPath(*Path(os.path.relpath(base, max(above, key=len))).parts)
    if str(prefix) == ".":
        return list(documents)
    return [dataclasses.replace(d, doc_id=str(prefix / d.doc_id)) for d in documents]


def _read_under(versions: Iterable[StoredVersion], folder: str) -> bool:
    """Whether any version was read from a file under ``folder`` (paths made absolute from the working directory).

    Example:
        >>> _read_under([StoredVersion(frozenset(), 1, "data/sub/a.md")], "data/sub"), _read_under([], "data")
        (True, False)
    """
    root = os.path.abspath(folder)
    for v in versions:
        if v.source is not None:
            src = os.path.abspath(v.source)
            if os.path.commonpath([root, src]) == root and src != root:
                return True
    return False


@dataclass
class CompletionTracker:
    """Says when each planned document's version is completely stored.

    Feed it the ``(doc_id, chunk_index, n_chunks)`` of every chunk once its
    upsert is confirmed; a chunk delivered twice (a retried Ray task) counts
    once. A document is reported exactly once, when its last missing chunk
    arrives.

    Example:
        >>> t = CompletionTracker({"a.md": frozenset({0})})
        >>> t.add([("a.md", 1, 3)]), t.add([("a.md", 1, 3), ("a.md", 2, 3)])
        ([], ['a.md'])
    """

    done: Mapping[str, frozenset[int]]
    _seen: dict[str, set[int]] = field(default_factory=dict, init=False)
    _complete: set[str] = field(default_factory=set, init=False)

    def add(self, written: Iterable[tuple[str, int, int]]) -> list[str]:
        """Record written chunks; return the documents completed by them, in order of completion."""
        completed = []
        for doc_id, index, n_chunks in written:
            seen = self._seen.setdefault(doc_id, set(self.done.get(doc_id, ())))
            seen.add(int(index))
            if doc_id not in self._complete and seen.issuperset(range(int(n_chunks))):
                self._complete.add(doc_id)
                completed.append(doc_id)
        return completed
