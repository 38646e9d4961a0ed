"""The in-memory form every loader returns: a position-annotated retrieval benchmark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["PositionBenchmark"]


@dataclass(frozen=True)
class PositionBenchmark:
    """A retrieval benchmark whose queries carry the position of their evidence.

    Args:
        name: Short name used in tables (e.g. ``"needle-prose/test"``).
        corpus: Document id -> passage text (insertion order is the column order
            of every score matrix).
        queries: Query id -> query text.
        qrels: Query id -> {document id: gain}; gains ``> 0`` are relevant.
        groups: Query id -> position-group label (e.g. ``"begin"``); queries
            without a label count for overall scores only.
        group_order: Display order of the group labels.
        length_buckets: Query id -> document-length bucket (PosIR); optional.
        position_bins: Query id -> fine relative-position bin (PosIR); optional.
        meta: Free-form provenance (source path, licence, split).

    Raises:
        ValueError: a qrel or group names an unknown query/document, or the
            benchmark has no query or no document.

    Example:
        >>> b = PositionBenchmark("toy", {"d1": "a b"}, {"q1": "a"}, {"q1": {"d1": 1}},
        ...                       {"q1": "begin"}, ("begin",))
        >>> b.doc_ids, b.query_ids
        (('d1',), ('q1',))
    """

    name: str
    corpus: Mapping[str, str]
    queries: Mapping[str, str]
    qrels: Mapping[str, Mapping[str, float]]
    groups: Mapping[str, str] = field(default_factory=dict)
    group_order: tuple[str, ...] = ()
    length_buckets: Mapping[str, str] = field(default_factory=dict)
    position_bins: Mapping[str, str] = field(default_factory=dict)
    meta: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.corpus:
            raise ValueError(f"benchmark {self.name!r} has an empty corpus; check the corpus file/path")
        if not self.queries:
            raise ValueError(f"benchmark {self.name!r} has no queries; check the queries file/path and filters")
        for qid, docs in self.qrels.items():
            if qid not in self.queries:
                raise ValueError(f"qrels name query {qid!r}, which is not among the {len(self.queries)} queries")
            for did in docs:
                if did not in self.corpus:
                    raise ValueError(f"qrels of query {qid!r} name document {did!r}, which is not in the corpus")
        unknown = [q for q in self.groups if q not in self.queries]
        if unknown:
            raise ValueError(f"position groups name unknown queries, e.g. {unknown[:3]!r}")
        if not self.group_order:
            seen: list[str] = []
            for g in self.groups.values():
                if g not in seen:
                    seen.append(g)
            object.__setattr__(self, "group_order", tuple(seen))
        else:
            missing = sorted({g for g in self.groups.values()} - set(self.group_order))
            if missing:
                raise ValueError(f"group_order {self.group_order!r} lacks group labels {missing!r}")

    @property
    def doc_ids(self) -> tuple[str, ...]:
        """Document ids in corpus order (the columns of a score matrix)."""
        return tuple(self.corpus)

    @property
    def query_ids(self) -> tuple[str, ...]:
        """Query ids in order (the rows of a score matrix)."""
        return tuple(self.queries)

    def group_counts(self) -> dict[str, int]:
        """Number of queries per position group, in ``group_order``."""
        counts = {g: 0 for g in self.group_order}
        for g in self.groups.values():
            counts[g] += 1
        return counts

    def subset(
        self, query_ids: Sequence[str], name: str | None = None, judged_corpus_only: bool = False
    ) -> PositionBenchmark:
        """Only ``query_ids`` kept (e.g. for a quick run).

        Args:
            query_ids: Queries to keep.
            name: New table name (default: unchanged).
            judged_corpus_only: Also shrink the corpus to the kept queries' judged
                documents (fewer distractors: scores are not comparable to the full run).
        """
        keep = [q for q in query_ids if q in self.queries]
        corpus = self.corpus
        if judged_corpus_only:
            judged = {d for q in keep for d in self.qrels.get(q, {})}
            corpus = {d: t for d, t in self.corpus.items() if d in judged}
        return PositionBenchmark(
            name=name or self.name,
            corpus=corpus,
            queries={q: self.queries[q] for q in keep},
            qrels={q: self.qrels[q] for q in keep if q in self.qrels},
            groups={q: self.groups[q] for q in keep if q in self.groups},
            group_order=self.group_order,
            length_buckets={q: self.length_buckets[q] for q in keep if q in self.length_buckets},
            position_bins={q: self.position_bins[q] for q in keep if q in self.position_bins},
            meta=dict(self.meta),
        )
