"""What an ingestion run did: one report, one JSON shape, for every ingestion path.

Example:
    >>> r = IngestReport(collection="demo", new=["a.md"], chunks_written=3)
    >>> d = r.to_dict()
    >>> d["collection"], d["new"], d["chunks_written"]
    ('demo', ['a.md'], 3)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from qdrant_tools.chunking import SkippedFile


@dataclass
class IngestReport:
    """What an ingestion run did.

    Documents are listed by what the run did with them (see
    :mod:`qdrant_tools.plan`): ``new``, ``changed``, ``resumed`` (a partly
    stored version completed chunk by chunk), ``unchanged``, ``cleaned`` (an
    interrupted update finished by deleting the stale version) and ``pruned``.

    Example:
        >>> IngestReport(collection="demo", chunks_written=10, seconds=2.0).chunks_per_second
        5.0
    """

    collection: str
    files_seen: int = 0
    files_other: int = 0
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    chunks_written: int = 0
    chunks_resumed: int = 0  # chunks of partly stored documents already there (not encoded again)
    chunks_deleted: int = 0
    chunks_truncated: int = 0
    max_length: int = 0
    created_collection: bool = False
    chunking: str = ""
    vectors: dict[str, str] = field(default_factory=dict)  # vector name -> encoder fingerprint
    embed_seconds: float = 0.0
    index_seconds: float = 0.0  # building the search index after the writes (embedded store)
    seconds: float = 0.0

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_written / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready values (skips as ``{source, reason}``, seconds rounded to ms).

        The one JSON shape of ``posfair ingest --json`` and ``posfair ingest-ray --json``;
        subclasses add their fields automatically.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "skipped":
                value = [{"source": s.source, "reason": s.reason} for s in value]
            elif isinstance(value, float):
                value = round(value, 3)
            elif isinstance(value, (list, dict)):
                value = type(value)(value)
            out[f.name] = value
        out["chunks_per_second"] = round(self.chunks_per_second, 3)
        return out

    def summary(self) -> str:
        """Human-readable multi-line summary."""
        lines = [
            f"collection {self.collection!r}{' (created)' if self.created_collection else ''}: "
            f"{self.files_seen} files seen, {len(self.new)} new, {len(self.changed)} changed, "
            f"{len(self.unchanged)} unchanged, {len(self.skipped)} skipped",
            f"chunks: {self.chunks_written} written, {self.chunks_deleted} stale deleted "
            f"({self.chunking}); {self.seconds:.1f}s, {self.chunks_per_second:.1f} chunks/s"
            + (f" (search index {self.index_seconds:.1f}s)" if self.index_seconds >= 0.05 else ""),
        ]
        if self.resumed:
            lines.append(
                f"resumed {len(self.resumed)} partly stored documents: {self.chunks_resumed} chunks were "
                "already stored and not re-encoded"
            )
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
        lines += [f"skipped {s.source}: {s.reason}" for s in self.skipped]
        return "\n".join(lines)
