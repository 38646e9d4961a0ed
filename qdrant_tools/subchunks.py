"""Sentence-aligned sub-chunks of a node: short spans embedded alone, scored by their best match.

A *node* is what the user's LLM reads (a chunk of hundreds of tokens); its
*sub-chunks* are short runs of whole sentences inside it, each embedded on its
own by the node's encoder. A node then scores ``max_j cos(q, s_j)`` (MaxSim with
one query vector), so where a fact sits in the node stops mattering — unless a
sub-chunk boundary cuts it. Sub-chunks therefore never cut a sentence that fits
the budget: sentences are packed greedily up to ``max_tokens`` tokens, and
consecutive sub-chunks share ``overlap_sentences`` sentences, so a fact spanning
a sentence boundary is still seen whole by one of them. Only a sentence longer
than the budget is cut, into token windows that overlap by a quarter.

Pure functions (no model, no Qdrant): ingestion, the reranker and the evaluation
harness cut sub-chunks with the same code. Sentences come from
:func:`qdrant_tools.text.sentence_spans` (re-exported here), the splitter the needle
builder uses too.

Example:
    >>> from qdrant_tools.subchunks import SubchunkConfig, subchunk_text
    >>> text = "One fish. Two fish. Red fish. Blue fish."
    >>> [s.text for s in subchunk_text(text, SubchunkConfig(max_tokens=4, overlap_sentences=1))]
    ['One fish. Two fish.', 'Two fish. Red fish.', 'Red fish. Blue fish.']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from qdrant_tools.chunking import Span, SpanFn, whitespace_spans
from qdrant_tools.text import SPLITTER_TAG, sentence_spans

__all__ = [
    "FUSED_VECTOR",
    "NODE_SOURCES",
    "SUBCHUNK_VECTOR",
    "NodeSource",
    "SubChunk",
    "SubchunkConfig",
    "sentence_spans",
    "subchunk_text",
]

#: Name of the multivector that holds a node's sub-chunk vectors (MaxSim).
SUBCHUNK_VECTOR = "subchunks"
#: Name of the optional multivector of a node's sub-chunks fused with its node vector at a fixed weight ``w``:
#: rows ``(1 - w) * s_j + w * node`` (unit ``s_j`` and node, dot product), so its MaxSim for a unit query is
#: ``(1 - w) * max_j cos(q, s_j) + w * cos(q, node)``: the node-weighted score in one arm (:mod:`qdrant_tools.search`).
FUSED_VECTOR = "subchunks_fused"
#: Where a node's vector comes from: ``"encoded"``, an encoding of the node text; ``"subchunk-mean"``, the
#: normalised mean of its sub-chunk vectors (:func:`qdrant_tools.encoding.subchunk_mean`: each text is encoded once).
#: The layout (``NodeLayout.node_source``), ``posfair ingest --node-source`` and the reranker all spell it so.
NodeSource = Literal["encoded", "subchunk-mean"]
NODE_SOURCES: tuple[str, ...] = get_args(NodeSource)


def check_node_source(value: object, name: str = "node_source") -> None:
    """Raise ``ValueError`` unless ``value`` is one of :data:`NODE_SOURCES` (``name``: the parameter, for the error).

    Example:
        >>> check_node_source("mean")
        Traceback (most recent call last):
        ...
        ValueError: node_source must be "encoded" or "subchunk-mean", got 'mean'
    """
    if value not in NODE_SOURCES:
        raise ValueError(f'{name} must be "encoded" or "subchunk-mean", got {value!r}')


@dataclass(frozen=True)
class SubchunkConfig:
    """How a node is cut into sub-chunks; ``SubchunkConfig()`` is the sub-chunking of ``posfair ingest``:
    32-token sub-chunks without overlap (the evidence: research/results/default_pipeline/sweep.md, reproduced by
    ``python -m research.default_pipeline``).

    Args:
        max_tokens: token budget of a sub-chunk (special tokens not counted);
            typical values 32-128. Smaller finds single facts better and stores more vectors.
        overlap_sentences: sentences shared by consecutive sub-chunks (0 = none).

    Raises:
        ValueError: ``max_tokens`` below 4 or a negative overlap.
    """

    max_tokens: int = 32
    overlap_sentences: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 4:
            raise ValueError(f"max_tokens must be an integer >= 4, got {self.max_tokens!r}; typical values are 32-128")
        if not isinstance(self.overlap_sentences, int) or self.overlap_sentences < 0:
            raise ValueError(
                f"overlap_sentences must be an integer >= 0, got {self.overlap_sentences!r}; 0 or 1 is typical"
            )

    def key(self) -> str:
        """Stable string identifying these settings (part of a document's version).

        Names the sentence splitter too (``qdrant_tools.text.SPLITTER_TAG``): sub-chunk spans follow
        its boundaries, so a collection ingested with another splitter re-embeds instead of mixing.
        """
        return f"sub={self.max_tokens};ov={self.overlap_sentences};split={SPLITTER_TAG}"


@dataclass(frozen=True)
class SubChunk:
    """One sub-chunk: ``text == node_text[start_char:end_char]``."""

    index: int
    text: str
    start_char: int
    end_char: int
    n_tokens: int


def _token_counts(sentences: Sequence[Span], tokens: Sequence[Span]) -> list[list[Span]]:
    """The token spans inside each sentence (a token belongs to the sentence holding its start)."""
    out: list[list[Span]] = [[] for _ in sentences]
    j = 0
    for tok in tokens:
        while j < len(sentences) - 1 and tok[0] >= sentences[j + 1][0]:
            j += 1
        out[j].append(tok)
    return out


def _windows(tokens: Sequence[Span], budget: int) -> list[tuple[int, int, int]]:
    """Overlapping token windows ``(start_char, end_char, n_tokens)`` over one over-long sentence."""
    step = max(1, budget - budget // 4)
    out = []
    for i in range(0, len(tokens), step):
        part = tokens[i : i + budget]
        out.append((part[0][0], part[-1][1], len(part)))
        if i + budget >= len(tokens):
            break
    return out


def _pieces(text: str, spans_fn: SpanFn, budget: int) -> list[tuple[int, int, int]]:
    """Sentences as ``(start_char, end_char, n_tokens)``; sentences over ``budget`` become windows."""
    sentences = sentence_spans(text)
    tokens = list(spans_fn(text))
    pieces: list[tuple[int, int, int]] = []
    for (start, end), toks in zip(sentences, _token_counts(sentences, tokens)):
        if len(toks) > budget:
            pieces.extend(_windows(toks, budget))
        elif toks:
            pieces.append((start, end, len(toks)))
    return pieces


def subchunk_text(text: str, config: SubchunkConfig, spans_fn: SpanFn = whitespace_spans) -> list[SubChunk]:
    """Cut ``text`` into sentence-aligned sub-chunks of at most ``config.max_tokens`` tokens.

    Args:
        text: the node text.
        config: budget and overlap.
        spans_fn: tokenizer as a span function (``qdrant_tools.chunking.tokenizer_spans``).

    Returns:
        Sub-chunks in order; consecutive ones share ``overlap_sentences`` pieces when
        the budget allows; empty for a text without tokens.
    """
    pieces = _pieces(text, spans_fn, config.max_tokens)
    out: list[SubChunk] = []
    i = 0
    while i < len(pieces):
        j, total = i, 0
        while j < len(pieces) and (j == i or total + pieces[j][2] <= config.max_tokens):
            total += pieces[j][2]
            j += 1
        start, end = pieces[i][0], pieces[j - 1][1]
        out.append(SubChunk(len(out), text[start:end], start, end, total))
        if j >= len(pieces):
            break
        i = _next_start(pieces, i, j, config)
    return out


def _next_start(pieces: Sequence[tuple[int, int, int]], i: int, j: int, config: SubchunkConfig) -> int:
    """First piece of the next sub-chunk: up to ``overlap_sentences`` pieces back, as many as fit beside piece ``j``."""
    for s in range(max(i + 1, j - config.overlap_sentences), j):
        if sum(p[2] for p in pieces[s : j + 1]) <= config.max_tokens:
            return s
    return j
