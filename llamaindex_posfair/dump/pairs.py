"""Label-free, position-balanced training pairs from plain text (inverse cloze; pure, no model).

From passages of the user's own documents (the nodes the default pipeline stores): a pseudo-query is a run of
sentences whose start is drawn uniformly over a passage's sentences, cut out of the passage with probability
``remove_prob`` (inverse cloze, Lee et al. 2019); the positive is that passage, the hard negative a neighbouring
passage. Documents, not passages, are split into train and dev; everything is deterministic given ``seed``.
Details: docs/dump.md, "Label-free training from your own text". Sentences are cut by
:func:`qdrant_tools.subchunks.sentence_spans` (the splitter the sub-chunk layout uses).

Example:
    >>> text = "The cat sat on the mat. A dog barked at the moon. Rain fell on the old town."
    >>> passages = [Passage("a.txt", 0, text), Passage("a.txt", 1, text.upper())]
    >>> pairs = build_pairs(passages, PairConfig(remove_prob=0.0, pairs_per_passage=1))
    >>> [p.query in p.positive for p in pairs], [p.negative_kind for p in pairs]
    ([True, True], ['neighbour', 'neighbour'])
"""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from qdrant_tools.chunking import Span
from qdrant_tools.subchunks import sentence_spans

__all__ = [
    "EvalSet",
    "PairConfig",
    "Passage",
    "PseudoQuery",
    "TrainingPair",
    "build_eval_set",
    "build_pairs",
    "draw_query",
    "pair_statistics",
    "position_counts",
    "query_candidates",
    "split_documents",
]

#: A positive must keep at least this many words after the query is cut out, else the query stays in.
MIN_POSITIVE_WORDS = 8


@dataclass(frozen=True)
class PairConfig:
    """How pseudo-queries are drawn and documents are split.

    Args:
        remove_prob: Probability that the query is cut out of its positive
            (inverse cloze; Lee et al. 2019 use 0.9). 0.5 (ours) trains both
            "find this sentence anywhere in the passage" and "match the context".
        max_query_sentences: A query is a run of 1..this many sentences (length
            drawn uniformly).
        min_query_words: Sentences with fewer words (headings, fragments cut by a
            passage boundary) never start or make a query.
        pairs_per_passage: Independent draws per training passage (the data set
            has ``pairs_per_passage x passages`` rows).
        dev_fraction: Share of the documents held apart for the in-domain check.
        seed: Seed of every random choice.

    Raises:
        ValueError: a value out of range (the message names it).

    Example:
        >>> PairConfig(remove_prob=0.9).remove_prob
        0.9
    """

    remove_prob: float = 0.5
    max_query_sentences: int = 1
    min_query_words: int = 4
    pairs_per_passage: int = 4
    dev_fraction: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.remove_prob <= 1.0:
            raise ValueError(f"remove_prob must lie in [0, 1], got {self.remove_prob!r}; 0.5 keeps half the queries")
        for name in ("max_query_sentences", "min_query_words", "pairs_per_passage"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 <= self.dev_fraction < 1.0:
            raise ValueError(f"dev_fraction must lie in [0, 1), got {self.dev_fraction!r}; typical 0.1-0.25")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Passage:
    """One passage (a node) of a document: ``index`` is its order in the document."""

    doc_id: str
    index: int
    text: str


@dataclass(frozen=True)
class PseudoQuery:
    """A drawn query: characters ``[start, end)`` of the passage.

    Attributes:
        rel_position: Midpoint of the span as a fraction of the passage's characters.
        removed: Whether the span is cut out of the positive.
    """

    start: int
    end: int
    rel_position: float
    removed: bool


@dataclass(frozen=True)
class TrainingPair:
    """One (query, positive, hard negative) row and where its query came from."""

    query: str
    positive: str
    negative: str
    doc_id: str
    passage: int
    rel_position: float
    removed: bool
    negative_kind: Literal["neighbour", "other_document"]


# ------------------------------------------------------------------ split
def split_documents(doc_ids: Iterable[str], dev_fraction: float, seed: int = 0) -> tuple[list[str], list[str]]:
    """Split document ids into (train, dev), deterministic given ``seed`` and the set of ids.

    With ``dev_fraction > 0`` and at least two documents, dev gets at least one
    document and train keeps at least one.

    Raises:
        ValueError: no document, or ``dev_fraction`` outside ``[0, 1)``.

    Example:
        >>> split_documents(["a", "b", "c", "d"], 0.25, seed=0)
        (['a', 'b', 'd'], ['c'])
    """
    ids = sorted(set(doc_ids))
    if not ids:
        raise ValueError("no document to split; the corpus folder holds no readable .txt/.md file")
    if not 0.0 <= dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must lie in [0, 1), got {dev_fraction!r}")
    order = ids[:]
    random.Random(seed).shuffle(order)
    n_dev = round(dev_fraction * len(ids))
    if dev_fraction > 0 and len(ids) >= 2:
        n_dev = min(max(n_dev, 1), len(ids) - 1)
    dev = set(order[:n_dev])
    return [d for d in ids if d not in dev], [d for d in ids if d in dev]


# ------------------------------------------------------------------ one query
def query_candidates(text: str, min_words: int) -> list[Span]:
    """Sentence spans of ``text`` with at least ``min_words`` words, in order."""
    return [(s, e) for s, e in sentence_spans(text) if len(text[s:e].split()) >= min_words]


def cut_span(text: str, start: int, end: int) -> str:
    """``text`` without characters ``[start, end)``, joined with one space."""
    return " ".join(part for part in (text[:start].rstrip(), text[end:].lstrip()) if part)


def draw_query(text: str, rng: random.Random, config: PairConfig) -> PseudoQuery | None:
    """Draw one pseudo-query from a passage; ``None`` if no sentence is long enough.

    The start sentence is uniform over the eligible sentences, the length
    uniform over ``1..max_query_sentences`` (fewer near the end, never past it).
    """
    spans = query_candidates(text, config.min_query_words)
    if not spans:
        return None
    length = min(rng.randint(1, config.max_query_sentences), len(spans))
    first = rng.randrange(len(spans) - length + 1)
    start, end = spans[first][0], spans[first + length - 1][1]
    removed = rng.random() < config.remove_prob
    if removed and len(cut_span(text, start, end).split()) < MIN_POSITIVE_WORDS:
        removed = False
    return PseudoQuery(start, end, (start + end) / 2 / max(len(text), 1), removed)


# ------------------------------------------------------------------ pairs
def _by_document(passages: Sequence[Passage]) -> dict[str, list[Passage]]:
    docs: dict[str, list[Passage]] = defaultdict(list)
    for p in passages:
        docs[p.doc_id].append(p)
    for items in docs.values():
        items.sort(key=lambda p: p.index)
    return dict(docs)


def _negative(
    docs: dict[str, list[Passage]], passage: Passage, pos: int, rng: random.Random
) -> tuple[str, Literal["neighbour", "other_document"]]:
    siblings = docs[passage.doc_id]
    neighbours = [siblings[j] for j in (pos - 1, pos + 1) if 0 <= j < len(siblings)]
    if neighbours:
        return rng.choice(neighbours).text, "neighbour"
    others = [d for d in docs if d != passage.doc_id]
    if not others:
        raise ValueError("need at least two passages for a hard negative; add text or lower --chunk-tokens")
    return rng.choice(docs[rng.choice(others)]).text, "other_document"


def build_pairs(passages: Sequence[Passage], config: PairConfig) -> list[TrainingPair]:
    """``pairs_per_passage`` independent pairs per passage, in a deterministic order.

    Passages without an eligible sentence give no pair (they still serve as negatives).

    Raises:
        ValueError: fewer than two passages, or no passage has an eligible sentence.
    """
    if len(passages) < 2:
        raise ValueError(f"need at least 2 passages for in-batch negatives, got {len(passages)}; add documents")
    docs = _by_document(passages)
    rng = random.Random(config.seed)
    pairs: list[TrainingPair] = []
    for _ in range(config.pairs_per_passage):
        for doc_id in sorted(docs):
            for pos, passage in enumerate(docs[doc_id]):
                q = draw_query(passage.text, rng, config)
                if q is None:
                    continue
                negative, kind = _negative(docs, passage, pos, rng)
                positive = cut_span(passage.text, q.start, q.end) if q.removed else passage.text
                query = passage.text[q.start : q.end]
                pairs.append(
                    TrainingPair(query, positive, negative, doc_id, passage.index, q.rel_position, q.removed, kind)
                )
    if not pairs:
        raise ValueError(
            f"no sentence of at least {config.min_query_words} words in {len(passages)} passages; "
            "lower --min-query-words or check the corpus"
        )
    return pairs


# ------------------------------------------------------------------ evaluation set
@dataclass(frozen=True)
class EvalSet:
    """Queries drawn from held-apart passages and the corpus they are retrieved from.

    Attributes:
        queries: Query texts.
        corpus: Passage texts (the columns of a score matrix).
        relevant: Per query, the column of its passage.
        rel_positions: Per query, where its span sits in its passage (0..1).
    """

    queries: list[str]
    corpus: list[str]
    relevant: list[int]
    rel_positions: list[float]


def build_eval_set(
    passages: Sequence[Passage], queries_per_passage: int, seed: int, *, removed: bool, min_query_words: int = 4
) -> EvalSet:
    """An in-domain retrieval check over ``passages`` (the dev documents).

    ``removed=False``: the corpus is the passages as they are, ``queries_per_passage``
    uniformly placed sentences each (find the passage that holds this sentence).
    ``removed=True``: one query per passage, cut out of it in the corpus (inverse
    cloze: find the passage this sentence was taken from).

    Raises:
        ValueError: no passage has an eligible sentence.
    """
    rng = random.Random(seed)
    config = PairConfig(remove_prob=0.0, min_query_words=min_query_words, seed=seed)
    queries, corpus, relevant, positions = [], [], [], []
    for passage in passages:
        draws = 1 if removed else queries_per_passage
        drawn = [q for q in (draw_query(passage.text, rng, config) for _ in range(draws)) if q is not None]
        if (
            removed
            and drawn
            and len(cut_span(passage.text, drawn[0].start, drawn[0].end).split()) >= MIN_POSITIVE_WORDS
        ):
            corpus.append(cut_span(passage.text, drawn[0].start, drawn[0].end))
        else:
            corpus.append(passage.text)
            drawn = [] if removed else drawn
        for q in drawn:
            queries.append(passage.text[q.start : q.end])
            relevant.append(len(corpus) - 1)
            positions.append(q.rel_position)
    if not queries:
        raise ValueError(f"no query could be drawn from {len(passages)} dev passages; lower --min-query-words")
    return EvalSet(queries, corpus, relevant, positions)


# ------------------------------------------------------------------ statistics
def position_counts(positions: Iterable[float], bins: int = 3) -> list[int]:
    """How many positions fall into each of ``bins`` equal parts of ``[0, 1]``.

    Example:
        >>> position_counts([0.1, 0.5, 0.9, 0.95])
        [1, 1, 2]
    """
    counts = [0] * bins
    for x in positions:
        counts[min(int(x * bins), bins - 1)] += 1
    return counts


def pair_statistics(pairs: Sequence[TrainingPair]) -> dict[str, Any]:
    """What the training data looks like: size, query positions per third, removal rate, negative kinds."""
    n = len(pairs)
    return {
        "pairs": n,
        "documents": len({p.doc_id for p in pairs}),
        "query_position_thirds": position_counts(p.rel_position for p in pairs),
        "removed_share": round(sum(p.removed for p in pairs) / max(n, 1), 4),
        "neighbour_negative_share": round(sum(p.negative_kind == "neighbour" for p in pairs) / max(n, 1), 4),
        "mean_query_words": round(sum(len(p.query.split()) for p in pairs) / max(n, 1), 2),
    }
