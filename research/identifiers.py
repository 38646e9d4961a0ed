"""Identifier queries over natural-docs: questions that name an identifier found in one passage only.

A documentation user searches for ``HashMap::get``, ``E0502`` or ``co_firstlineno``: a rare name that
BM25 ranks first and a dense encoder splits into common word pieces shared with its neighbours
(``co_filename``, ``co_names``). This benchmark asks that question of the natural-docs corpus
(901 passages of Python and Vim documentation, the shipped ``natural-docs`` corpus unchanged):

* an identifier is a ``snake_case`` word with an underscore, or a ``camelCase`` / ``CamelCase`` word
  with an inner capital (:data:`IDENTIFIER`);
* it qualifies when it occurs exactly once in the whole corpus: one match, in one passage, and its
  lower-cased text is a substring of no other passage (so ``co_name`` qualifies only if no passage
  holds ``co_names``);
* its position group is the third of the passage's whitespace words that holds it (the natural-docs
  group rule);
* the query is one of six question templates naming the identifier (:data:`TEMPLATES`); the template
  and the split (dev or test, about half each) follow from a hash of the identifier, and each split keeps
  the first :data:`PER_GROUP` identifiers of each group in hash order, at most :data:`PER_PASSAGE` per
  passage.

The queries are templated, not written by people: they test whether a rare name stays decisive, not
whether a question is understood. Both splits are scored against all 901 passages, as natural-docs is.

Example:
    >>> from research.identifiers import load_identifiers
    >>> load_identifiers("dev").group_counts()
    {'begin': 60, 'middle': 60, 'end': 60}
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from typing import Any

from research.eval.benchmarks.data import PositionBenchmark
from research.eval.benchmarks.loaders import load_shipped

NAME = "docs-identifiers"
GROUPS = ("begin", "middle", "end")
#: Identifiers per position group and split.
PER_GROUP = 60
#: Queries that may target one passage, per split.
PER_PASSAGE = 3
IDENTIFIER = re.compile(
    r"(?<![\w.])(?:[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+|[a-z]+[A-Z][A-Za-z0-9]+|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]+)(?![\w])"
)
TEMPLATES = (
    "What does {x} do?",
    "Where is {x} described?",
    "How is {x} used?",
    "What is {x} for?",
    "What does the documentation say about {x}?",
    "Explain {x}.",
)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def candidates(corpus: dict[str, str]) -> list[dict[str, Any]]:
    """Every identifier that occurs once in ``corpus``, with its passage and position group."""
    matches: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for doc_id, text in corpus.items():
        for m in IDENTIFIER.finditer(text):
            matches[m.group(0)].append((doc_id, m.start()))
    lowered = [t.lower() for t in corpus.values()]
    found = []
    for ident, where in matches.items():
        if len(where) != 1 or sum(ident.lower() in t for t in lowered) != 1:
            continue
        doc_id, start = where[0]
        text = corpus[doc_id]
        words, before = len(text.split()), len(text[:start].split())
        group = GROUPS[min(2, 3 * before // max(words, 1))]
        found.append({"identifier": ident, "doc_id": doc_id, "group": group, "rel_position": before / max(words, 1)})
    return sorted(found, key=lambda c: _digest(c["identifier"]))


def build_queries(corpus: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """``{"dev": rows, "test": rows}``: the query rows of each split (``_id``, ``text``, ``doc_id``, ``group``)."""
    out: dict[str, list[dict[str, Any]]] = {"dev": [], "test": []}
    per_group: dict[str, Counter[str]] = {s: Counter() for s in out}
    per_doc: dict[str, Counter[str]] = {s: Counter() for s in out}
    for c in candidates(corpus):
        h = _digest(c["identifier"])
        split = ("dev", "test")[h % 2]
        if per_group[split][c["group"]] >= PER_GROUP or per_doc[split][c["doc_id"]] >= PER_PASSAGE:
            continue
        per_group[split][c["group"]] += 1
        per_doc[split][c["doc_id"]] += 1
        text = TEMPLATES[(h // 2) % len(TEMPLATES)].format(x=c["identifier"])
        out[split].append({"_id": f"{split[0]}{len(out[split]):03d}", "text": text, **c})
    return out


def load_identifiers(split: str = "test") -> PositionBenchmark:
    """The ``split`` (``"dev"`` or ``"test"``) of the benchmark, over the shipped natural-docs corpus.

    Raises:
        ValueError: ``split`` is neither.
    """
    if split not in ("dev", "test"):
        raise ValueError(f"{NAME}: no split {split!r}; pass 'dev' or 'test'")
    corpus = dict(load_shipped("natural-docs", split).corpus)
    rows = build_queries(corpus)[split]
    short = [g for g in GROUPS if sum(r["group"] == g for r in rows) < PER_GROUP]
    if short:
        raise ValueError(f"{NAME}: the corpus yields fewer than {PER_GROUP} identifiers in groups {short}")
    return PositionBenchmark(
        name=f"{NAME}/{split}",
        corpus=corpus,
        queries={r["_id"]: r["text"] for r in rows},
        qrels={r["_id"]: {r["doc_id"]: 1.0} for r in rows},
        groups={r["_id"]: r["group"] for r in rows},
        group_order=GROUPS,
        position_bins={r["_id"]: str(min(int(r["rel_position"] * 20), 19)).zfill(2) for r in rows},
        meta={"format": "identifiers", "split": split, "corpus": "natural-docs"},
    )


def load(name: str, split: str) -> PositionBenchmark:
    """A shipped benchmark, or this one for ``name == NAME``."""
    return load_identifiers(split) if name == NAME else load_shipped(name, split)
