"""Probes of an audit: queries whose evidence sits at a known position of a passage (no LLM, no model).

A *passage* is what a retriever stores and embeds as one unit: each document cut by LlamaIndex's
``SentenceSplitter`` at the pipeline's sizes. A probe's evidence lies wholly inside exactly one passage, and its
*group* is the third of that passage holding the evidence's midpoint (:data:`GROUPS`). The kinds
(:data:`KINDS`: ``extractive``, ``planted``, ``question``) and how they are drawn: docs/audit.md, "The measure".
Probes are deterministic given the documents and :class:`ProbeConfig`, and a :class:`ProbeSet` is saved as
JSON and loaded back, so a before/after comparison runs on the same probes.

Example:
    >>> text = " ".join(f"Sentence number {i} says something plain about topic {i}." for i in range(60))
    >>> probes = build_probes({"a.txt": text, "b.txt": text.replace("topic", "theme")},
    ...                       ProbeConfig(per_group=2, passage_tokens=2048))
    >>> probes.group_counts()
    {'begin': 2, 'middle': 2, 'end': 2}
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qdrant_tools.text import sentence_spans

__all__ = [
    "GROUPS",
    "KINDS",
    "AuditInputError",
    "Plant",
    "Probe",
    "ProbeConfig",
    "ProbeSet",
    "build_probes",
    "corpus_digest",
    "evidence_in",
    "group_of",
    "passage_spans",
    "read_questions",
]

#: Position groups, in report order: the first, middle and last third of a passage.
GROUPS = ("begin", "middle", "end")
#: Probe kinds, in the order they are drawn.
KINDS = ("extractive", "planted", "question")
#: Format version of a saved probe set.
FORMAT_VERSION = 1


class AuditInputError(ValueError):
    """The audit's input cannot give a measurement (no documents, no probe, a target that returns nothing, ...)."""


@dataclass(frozen=True)
class ProbeConfig:
    """How probes are drawn.

    Args:
        per_group: probes of each drawn kind per position group (``extractive`` and ``planted``;
            ``question`` probes are all kept).
        kinds: the kinds to draw, a subset of :data:`KINDS` (``question`` needs questions).
        seed: seed of every random choice.
        passage_tokens: chunk size of the passages (``SentenceSplitter`` tokens); set it to your
            pipeline's chunk size.
        passage_overlap: chunk overlap of the passages (``SentenceSplitter`` tokens).
        min_words / max_words: an extractive probe is a sentence of this many whitespace words.

    Raises:
        ValueError: a value out of range (the message names it).

    Example:
        >>> ProbeConfig(per_group=10, kinds=("extractive", "planted")).kinds
        ('extractive', 'planted')
    """

    per_group: int = 40
    kinds: tuple[str, ...] = ("extractive",)
    seed: int = 0
    passage_tokens: int = 1024
    passage_overlap: int = 200
    min_words: int = 6
    max_words: int = 60

    def __post_init__(self) -> None:
        for name in ("per_group", "passage_tokens", "min_words", "max_words"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0 <= self.passage_overlap < self.passage_tokens:
            raise ValueError(
                f"passage_overlap must lie in [0, passage_tokens={self.passage_tokens}), got {self.passage_overlap!r}; "
                "LlamaIndex's default is 200 for 1024-token chunks"
            )
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) must not exceed max_words ({self.max_words})")
        kinds = tuple(self.kinds)
        bad = [k for k in kinds if k not in KINDS]
        if bad or not kinds:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {self.kinds!r}")
        object.__setattr__(self, "kinds", kinds)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "kinds": list(self.kinds)}


@dataclass(frozen=True)
class Probe:
    """One query and where its evidence lies.

    Attributes:
        id: unique in its set (``"extractive-0007"``).
        kind: one of :data:`KINDS`.
        query: the text sent to the retriever.
        evidence: the text that answers it (a retrieved node holds it or not: :func:`evidence_in`).
        doc_id: the document (its path relative to the audited folder).
        start / end: the evidence's characters in the document as indexed (planted facts included).
        passage: index of the passage of the document that holds it.
        rel_position: the evidence's midpoint as a fraction of that passage's characters.
        group: the third of the passage, one of :data:`GROUPS`.
    """

    id: str
    kind: str
    query: str
    evidence: str
    doc_id: str
    start: int
    end: int
    passage: int
    rel_position: float
    group: str


@dataclass(frozen=True)
class Plant:
    """A planted sentence: ``text`` inserted at character ``at`` of the user's document ``doc_id``."""

    doc_id: str
    at: int
    text: str


@dataclass
class ProbeSet:
    """Probes, the facts planted for them, and what they were drawn from.

    Attributes:
        probes: in a fixed order (kinds, then groups interleaved).
        plants: every planted sentence (some may answer no probe: they stay as distractors).
        config: the :class:`ProbeConfig` used.
        digest: :func:`corpus_digest` of the user's documents (before planting).
        skipped: why questions were not used (question text -> reason).

    Example:
        >>> ps = ProbeSet([], [], ProbeConfig(), corpus_digest({"a": "x"}))
        >>> ProbeSet.from_dict(ps.to_dict()) == ps
        True
    """

    probes: list[Probe]
    plants: list[Plant]
    config: ProbeConfig
    digest: str
    skipped: dict[str, str] = field(default_factory=dict)

    def group_counts(self, kind: str | None = None) -> dict[str, int]:
        """Probes per group (of one ``kind``, or all)."""
        counts = dict.fromkeys(GROUPS, 0)
        for p in self.probes:
            if kind is None or p.kind == kind:
                counts[p.group] += 1
        return counts

    def kinds(self) -> list[str]:
        """The kinds present, in :data:`KINDS` order."""
        present = {p.kind for p in self.probes}
        return [k for k in KINDS if k in present]

    def documents(self, texts: Mapping[str, str]) -> dict[str, str]:
        """The documents a target must index: ``texts`` with the planted sentences in.

        Raises:
            AuditInputError: ``texts`` are not the documents the probes were drawn from.
        """
        digest = corpus_digest(texts)
        if digest != self.digest:
            raise AuditInputError(
                f"these documents (digest {digest[:12]}) are not the ones the probes were drawn from "
                f"(digest {self.digest[:12]}); audit the same folder, or draw new probes without --probes"
            )
        return apply_plants(texts, self.plants)

    def subset(self, max_probes: int | None) -> ProbeSet:
        """At most ``max_probes`` probes, balanced: groups and kinds taken in turn, each in its saved order."""
        if max_probes is None or max_probes >= len(self.probes):
            return self
        if isinstance(max_probes, bool) or not isinstance(max_probes, int) or max_probes < 1:
            raise ValueError(f"max_probes must be a positive integer, got {max_probes!r}")
        queues: dict[tuple[str, str], list[Probe]] = defaultdict(list)
        for p in self.probes:
            queues[(p.kind, p.group)].append(p)
        keys = [(k, g) for k in KINDS for g in GROUPS if queues[(k, g)]]
        chosen: list[Probe] = []
        depth = 0
        while len(chosen) < max_probes:
            for key in keys:
                if depth < len(queues[key]) and len(chosen) < max_probes:
                    chosen.append(queues[key][depth])
            depth += 1
        keep = {p.id for p in chosen}
        return dataclasses.replace(self, probes=[p for p in self.probes if p.id in keep])

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "posfair-audit-probes",
            "version": FORMAT_VERSION,
            "config": self.config.to_dict(),
            "corpus_digest": self.digest,
            "plants": [dataclasses.asdict(p) for p in self.plants],
            "probes": [dataclasses.asdict(p) for p in self.probes],
            "skipped": self.skipped,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeSet:
        """Rebuild a set from :meth:`to_dict`.

        Raises:
            AuditInputError: not a probe file of this format.
        """
        if data.get("format") != "posfair-audit-probes" or data.get("version") != FORMAT_VERSION:
            raise AuditInputError(
                f"not a posfair audit probe file (format {data.get('format')!r}, version {data.get('version')!r}); "
                "save one with `posfair audit DOCS --save-probes FILE`"
            )
        config = ProbeConfig(**{**data["config"], "kinds": tuple(data["config"]["kinds"])})
        return cls(
            probes=[Probe(**p) for p in data["probes"]],
            plants=[Plant(**p) for p in data["plants"]],
            config=config,
            digest=str(data["corpus_digest"]),
            skipped=dict(data.get("skipped", {})),
        )

    def save(self, path: str | Path) -> Path:
        """Write the set as JSON (UTF-8); returns the path."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1), encoding="utf-8")
        return out

    @classmethod
    def load(cls, path: str | Path) -> ProbeSet:
        """Read a set written by :meth:`save`.

        Raises:
            AuditInputError: the file is missing or not a probe file.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise AuditInputError(f"probe file {str(path)!r} does not exist; write one with --save-probes") from None
        except json.JSONDecodeError as exc:
            raise AuditInputError(f"probe file {str(path)!r} is not JSON ({exc})") from None
        return cls.from_dict(data)


# ------------------------------------------------------------------ text helpers
def corpus_digest(texts: Mapping[str, str]) -> str:
    """sha256 over the documents' ids and texts, in id order."""
    h = hashlib.sha256()
    for doc_id in sorted(texts):
        h.update(doc_id.encode("utf-8") + b"\0" + texts[doc_id].encode("utf-8") + b"\0")
    return h.hexdigest()


_SPACE = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


#: Evidence of at least this many words also counts as found when a node holds one half of it whole.
MIN_HALF_WORDS = 5


def evidence_in(node_text: str, evidence: str) -> bool:
    """Whether a retrieved node holds the evidence (whitespace and case ignored).

    A node holds it when it contains it whole or, for evidence of ``2 * MIN_HALF_WORDS`` words or more,
    when it contains its first or its second half whole: a node boundary that cuts the evidence leaves
    at least half of it in one node, and that node counts.

    Example:
        >>> evidence_in("A b.  The cat sat on the mat today.", "the cat sat  on the mat")
        True
        >>> evidence_in("one two three four five six", "one two three four five six seven eight nine ten")
        True
        >>> evidence_in("one two three", "one two three four five six seven eight nine ten")
        False
    """
    hay, needle = _norm(node_text), _norm(evidence)
    if not needle:
        return False
    if needle in hay:
        return True
    words = needle.split(" ")
    if len(words) < 2 * MIN_HALF_WORDS:
        return False
    mid = len(words) // 2
    return " ".join(words[:mid]) in hay or " ".join(words[mid:]) in hay


def group_of(rel_position: float) -> str:
    """The third of a passage that holds ``rel_position`` (0..1).

    Example:
        >>> [group_of(x) for x in (0.0, 0.34, 0.99)]
        ['begin', 'middle', 'end']
    """
    return GROUPS[min(int(rel_position * 3), 2)]


def passage_spans(text: str, chunk_tokens: int, overlap_tokens: int) -> list[tuple[int, int]]:
    """Character spans of the passages LlamaIndex's ``SentenceSplitter`` cuts ``text`` into (overlaps included)."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    splitter = SentenceSplitter(chunk_size=chunk_tokens, chunk_overlap=overlap_tokens)
    spans = []
    for node in splitter.get_nodes_from_documents([Document(text=text, id_="audit")]):
        if node.start_char_idx is not None and node.end_char_idx is not None:
            spans.append((int(node.start_char_idx), int(node.end_char_idx)))
    return spans


def _locate(spans: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, float] | None:
    """``(passage, rel_position)`` of ``[start, end)`` when exactly one passage holds it whole, else ``None``."""
    holders = [i for i, (a, b) in enumerate(spans) if a <= start and end <= b]
    if len(holders) != 1:
        return None
    a, b = spans[holders[0]]
    return holders[0], ((start + end) / 2 - a) / max(b - a, 1)


def apply_plants(texts: Mapping[str, str], plants: Iterable[Plant]) -> dict[str, str]:
    """``texts`` with each plant's text inserted at its offset (offsets are into the original text)."""
    by_doc: dict[str, list[Plant]] = defaultdict(list)
    for p in plants:
        by_doc[p.doc_id].append(p)
    out = dict(texts)
    for doc_id, items in by_doc.items():
        text = texts[doc_id]
        for p in sorted(items, key=lambda p: p.at, reverse=True):
            text = text[: p.at] + p.text + text[p.at :]
        out[doc_id] = text
    return out


# ------------------------------------------------------------------ drawing
class _Corpus:
    """The documents as indexed, their passages, and a lookup of how often a text occurs in all of them."""

    def __init__(self, texts: Mapping[str, str], config: ProbeConfig) -> None:
        self.texts = dict(sorted(texts.items()))
        self.spans = {d: passage_spans(t, config.passage_tokens, config.passage_overlap) for d, t in self.texts.items()}
        self._joined = "\n\0\n".join(_norm(t) for t in self.texts.values())

    def unique(self, text: str) -> bool:
        needle = _norm(text)
        first = self._joined.find(needle)
        return first >= 0 and self._joined.find(needle, first + 1) < 0


def _take_balanced(pool: dict[str, list[Any]], per_group: int, rng: random.Random, key: Any) -> list[Any]:
    """Up to ``per_group`` items of each group, drawn in a seeded order, one per passage before any second."""
    chosen: list[Any] = []
    for group in GROUPS:
        items = pool.get(group, [])
        order = list(range(len(items)))
        rng.shuffle(order)
        seen: set[Any] = set()
        first: list[int] = []
        rest: list[int] = []
        for i in order:
            (rest if key(items[i]) in seen else first).append(i)
            seen.add(key(items[i]))
        chosen.extend(items[i] for i in (first + rest)[:per_group])
    return chosen


def _extractive(corpus: _Corpus, config: ProbeConfig, rng: random.Random, avoid: Mapping[str, list]) -> list[Probe]:
    pool: dict[str, list[tuple[str, int, int, int, float]]] = defaultdict(list)
    for doc_id, text in corpus.texts.items():
        blocked = avoid.get(doc_id, [])
        for s, e in sentence_spans(text):
            if not config.min_words <= len(text[s:e].split()) <= config.max_words:
                continue
            if any(s < b and a < e for a, b in blocked):
                continue
            where = _locate(corpus.spans[doc_id], s, e)
            if where is not None:
                pool[group_of(where[1])].append((doc_id, s, e, where[0], where[1]))
    probes: list[Probe] = []
    for group in GROUPS:
        candidates = _take_balanced({group: pool[group]}, len(pool[group]), rng, key=lambda c: (c[0], c[3]))
        picked = 0
        for doc_id, s, e, passage, rel in candidates:
            if picked == config.per_group:
                break
            sentence = corpus.texts[doc_id][s:e]
            if corpus.unique(sentence):
                probes.append(_probe("extractive", sentence, sentence, doc_id, (s, e), (passage, rel)))
                picked += 1
    return probes


def _plant_candidates(texts: Mapping[str, str], config: ProbeConfig, rng: random.Random) -> list[tuple[str, int]]:
    """``(doc_id, offset)`` sentence boundaries to plant at: twice as many per group as wanted (some fall into an overlap once planted), at most one per group
    and passage, the groups taken in turn."""
    pool: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for doc_id, text in texts.items():
        spans = passage_spans(text, config.passage_tokens, config.passage_overlap)
        for s, _ in sentence_spans(text):
            where = _locate(spans, s, s)
            if where is not None:
                pool[group_of(where[1])].append((doc_id, s, where[0]))
    want = 2 * config.per_group
    chosen = {g: _take_balanced({g: pool[g]}, want, rng, key=lambda c: (c[0], c[2])) for g in GROUPS}
    sites: list[tuple[str, int]] = []
    used: set[tuple[str, int, str]] = set()
    for i in range(want):
        for g in GROUPS:
            if i < len(chosen[g]) and (key := (chosen[g][i][0], chosen[g][i][2], g)) not in used:
                used.add(key)
                sites.append((chosen[g][i][0], chosen[g][i][1]))
    return sites


def _planted(texts: Mapping[str, str], config: ProbeConfig, rng: random.Random) -> tuple[list[Plant], list[Probe]]:
    from llamaindex_posfair.eval.facts import make_fact, person_names

    corpus_text = "\n".join(texts.values())
    sites = _plant_candidates(texts, config, rng)
    unused = (n for n in person_names(rng) if n not in corpus_text)
    names = [n for _, n in zip(sites, unused)]
    plants, facts = [], {}
    for (doc_id, at), name in zip(sites, names):
        fact = make_fact(rng, name)
        plants.append(Plant(doc_id, at, fact["statement"] + " "))
        facts[(doc_id, at)] = fact
    planted = apply_plants(texts, plants)
    pool: dict[str, list[Probe]] = defaultdict(list)
    for p in plants:
        start = _final_offset(p, plants)
        end = start + len(p.text.rstrip())
        spans = passage_spans(planted[p.doc_id], config.passage_tokens, config.passage_overlap)
        where = _locate(spans, start, end)
        if where is None:
            continue
        fact = facts[(p.doc_id, p.at)]
        probe = _probe("planted", fact["query"], fact["statement"], p.doc_id, (start, end), where)
        pool[probe.group].append(probe)
    chosen = [p for g in GROUPS for p in pool[g][: config.per_group]]
    return plants, chosen


def _questions(
    corpus: _Corpus, rows: Sequence[Mapping[str, Any]], skipped: dict[str, str], avoid: Mapping[str, list]
) -> list[Probe]:
    probes = []
    for row in rows:
        query, answer = str(row["query"]), str(row["answer"])
        docs = [d for d in corpus.texts if _doc_matches(d, row.get("doc"))] if row.get("doc") else list(corpus.texts)
        found = [(d, m) for d in docs for m in _find_all(corpus.texts[d], answer)]
        if len(found) != 1:
            skipped[query] = "answer not found in the documents" if not found else f"answer found {len(found)} times"
            continue
        doc_id, (s, e) = found[0]
        if any(s < b and a < e for a, b in avoid.get(doc_id, [])):
            skipped[query] = "answer overlaps a planted fact"
            continue
        where = _locate(corpus.spans[doc_id], s, e)
        if where is None:
            skipped[query] = "answer not wholly inside exactly one passage (it crosses a passage boundary or overlap)"
            continue
        group = str(row.get("group") or group_of(where[1]))
        if group not in GROUPS:
            skipped[query] = f"group {group!r} is not one of {GROUPS}"
            continue
        probes.append(_probe("question", query, answer, doc_id, (s, e), where, group))
    return probes


def _probe(
    kind: str, query: str, evidence: str, doc_id: str, span: tuple[int, int], where: tuple[int, float], group: str = ""
) -> Probe:
    """An unnumbered probe with its evidence at ``span`` of ``doc_id``; ``where`` is :func:`_locate`'s answer."""
    return Probe("", kind, query, evidence, doc_id, *span, where[0], round(where[1], 4), group or group_of(where[1]))


def _doc_matches(doc_id: str, wanted: Any) -> bool:
    wanted = str(wanted)
    path = Path(doc_id)
    return doc_id == wanted or path.stem == wanted or path.name == wanted


def _find_all(text: str, answer: str) -> list[tuple[int, int]]:
    """Every occurrence of ``answer`` in ``text``, whitespace-insensitive."""
    words = answer.split()
    if not words:
        return []
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def read_questions(path: str | Path) -> list[dict[str, Any]]:
    """Questions with their answers from a JSON Lines file (or a JSON list).

    Each row has the question (``query``, or ``text`` / ``question``) and the answer text found in the
    documents (``answer``); optionally ``doc`` (or ``doc_id``: a document's path, name or stem) and ``group``.

    Raises:
        AuditInputError: the file is missing, or a row lacks a question or an answer.
    """
    p = Path(path)
    if not p.is_file():
        raise AuditInputError(f"questions file {str(p)!r} does not exist; pass a .jsonl of {{query, answer}} rows")
    raw = p.read_text(encoding="utf-8")
    if p.suffix == ".gz":
        import gzip

        raw = gzip.decompress(p.read_bytes()).decode("utf-8")
    text = raw.strip()
    rows = (
        json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines() if line.strip()]
    )
    out = []
    for i, row in enumerate(rows):
        query = row.get("query") or row.get("question") or row.get("text")
        if not query or not row.get("answer"):
            raise AuditInputError(
                f"{p}: row {i + 1} needs a question ('query', 'question' or 'text') and its 'answer' text, got "
                f"keys {sorted(row)}"
            )
        out.append({"query": query, "answer": row["answer"], "doc": row.get("doc") or row.get("doc_id"),
                    "group": row.get("group")})  # fmt: skip
    return out


def build_probes(
    texts: Mapping[str, str], config: ProbeConfig | None = None, questions: Sequence[Mapping[str, Any]] = ()
) -> ProbeSet:
    """Draw the probes of ``config.kinds`` from ``texts`` (document id -> text).

    Args:
        texts: the user's documents (e.g. :func:`~llamaindex_posfair.audit.read_documents`).
        config: what to draw (default :class:`ProbeConfig`).
        questions: rows ``{"query", "answer", "doc"?, "group"?}`` for ``question`` probes (:func:`read_questions`).

    Returns:
        A :class:`ProbeSet`; probe ids number each kind from 0.

    Raises:
        AuditInputError: no document with text, ``question`` asked without questions, or no probe could be drawn.
    """
    config = config or ProbeConfig()
    texts = {d: t for d, t in texts.items() if t.strip()}
    if not texts:
        raise AuditInputError("no document with text to draw probes from; pass a folder of readable documents")
    if "question" in config.kinds and not questions:
        raise AuditInputError("kind 'question' needs questions with their answers (--questions FILE.jsonl)")
    rng = random.Random(f"posfair-audit:{config.seed}")
    plants: list[Plant] = []
    probes: list[Probe] = []
    if "planted" in config.kinds:
        plants, planted = _planted(texts, config, rng)
        probes += planted
    final = apply_plants(texts, plants)
    corpus = _Corpus(final, config)
    planted_spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p in plants:
        planted_spans[p.doc_id].append((_final_offset(p, plants), _final_offset(p, plants) + len(p.text)))
    skipped: dict[str, str] = {}
    if "extractive" in config.kinds:
        probes = _extractive(corpus, config, rng, planted_spans) + probes
    if "question" in config.kinds:
        probes += _questions(corpus, questions, skipped, planted_spans)
    if not probes:
        raise AuditInputError(
            f"no probe could be drawn from {len(texts)} documents (kinds {list(config.kinds)}): no sentence of "
            f"{config.min_words}-{config.max_words} words lies inside exactly one passage; add documents or "
            "lower --passage-tokens"
        )
    return ProbeSet(_numbered(probes), plants, config, corpus_digest(texts), skipped)


def _final_offset(plant: Plant, plants: Sequence[Plant]) -> int:
    return plant.at + sum(len(q.text) for q in plants if q.doc_id == plant.doc_id and q.at < plant.at)


def _numbered(probes: Sequence[Probe]) -> list[Probe]:
    """Probes ordered by kind, then groups interleaved; ids ``kind-NNNN``."""
    out = []
    for kind in KINDS:
        by_group = {g: [p for p in probes if p.kind == kind and p.group == g] for g in GROUPS}
        depth = max((len(v) for v in by_group.values()), default=0)
        ordered = [by_group[g][i] for i in range(depth) for g in GROUPS if i < len(by_group[g])]
        out += [dataclasses.replace(p, id=f"{kind}-{i:04d}") for i, p in enumerate(ordered)]
    return out
