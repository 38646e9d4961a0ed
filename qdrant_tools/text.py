"""The sentence splitter: character spans of the sentences of a text (one home for sub-chunks and the needle builder).

A sentence ends at ``.``/``!``/``?``/``…`` (with closing quotes or brackets) before whitespace,
at a blank line, or at a line break before a list item or heading -- unless what follows starts
lower case ("e.g. the", "Wait... what", "Use :q! to quit"), or the word before the period is a
title ("Dr.", "Mr."), an initial ("J."), a list number at the start of a line ("1."), an
abbreviation that never ends a sentence ("e.g.", "i.e.", "cf.", "vs.") or is followed by a number
("Fig. 3", "No. 5"). A dotted acronym or ``etc.``/``a.m.``/``p.m.`` ends a sentence only before a
common sentence starter ("in the U.S. They ..." but "the U.S. Army").

Chosen over NLTK Punkt and the two earlier regexes by ``research/bench/sentence_splitters.py`` (gold hard
cases, speed, disagreements on the shipped corpora). Pure function, no data files.

Example:
    >>> from qdrant_tools.text import sentence_spans
    >>> text = "Dr. Smith met Mr. Jones in the U.S. They talked."
    >>> [text[a:b] for a, b in sentence_spans(text)]
    ['Dr. Smith met Mr. Jones in the U.S.', 'They talked.']
"""

from __future__ import annotations

import re

__all__ = ["SPLITTER_TAG", "sentence_spans"]

#: Names this splitter in keys that depend on its boundaries (``SubchunkConfig.key()``): a change
#: of the rules below that moves a boundary must change the tag, so stored sub-chunks re-embed.
SPLITTER_TAG = "abbrev1"

Span = tuple[int, int]

# Candidate ends: terminal punctuation (+ closers) before whitespace, a blank line, or a line break
# before a list item / heading. Group "p" is the punctuation run of a terminal candidate.
_CANDIDATE = re.compile(r"""(?P<p>[.!?…]+)["'”’)\]]*(?=\s)|\n\s*\n|\n(?=\s*(?:[-*•#]|\d+[.)])\s)""")
_NEXT = re.compile(r"""\s*["'“‘(\[]*(\S*)""")
_CODE = re.compile(r"[_()./:<>\d]")
_ACRONYM = re.compile(r"(?:[a-z]\.)+[a-z]")

#: Words before a period that precede a name: never a sentence end.
_TITLES = frozenset(
    "mr mrs ms dr prof sen rep gen st sr jr rev hon capt lt col sgt gov pres mt messrs mme mlle".split()
)
#: Abbreviations that never end a sentence.
_NEVER_END = frozenset("e.g i.e cf vs viz".split())
#: Abbreviations that do not end a sentence before a number ("Fig. 3", "No. 5", "pp. 10").
_BEFORE_NUMBER = frozenset("no nos fig figs vol vols p pp ch sect sec eq eqs art".split())
#: Abbreviations that end a sentence only before a common sentence starter (as dotted acronyms).
_ENDABLE = frozenset("etc a.m p.m inc ltd co corp al".split())
#: Words that commonly start a sentence (Punkt's english ``sent_starters`` plus pronouns and articles).
_STARTERS = frozenset(
    """a an the this that these those it its he she they we i you his her their our my there here then
    but and or so yet if when while although though however thus also in on at as for after before
    since many most some all both each even meanwhile moreover nevertheless nonetheless indeed instead
    similarly despite according among under separately nor what which who how why where""".split()
)


def sentence_spans(text: str) -> list[Span]:
    """Character spans of the sentences of ``text``: whitespace trimmed, in order, never empty.

    Every non-space character of ``text`` lies in exactly one span, and ``text[a:b]`` is the
    sentence itself (offsets into the original text; nothing is normalised).

    Args:
        text: any text (prose, Markdown, documentation with code).

    Returns:
        ``[(start, end), ...]``; empty for a text of whitespace only.
    """
    cuts = [m.end() for m in _CANDIDATE.finditer(text) if _is_end(text, m)]
    spans: list[Span] = []
    start = 0
    for end in [*cuts, len(text)]:
        piece = text[start:end]
        left, right = len(piece) - len(piece.lstrip()), len(piece.rstrip())
        if right > left:
            spans.append((start + left, start + right))
        start = end
    return spans


def _is_end(text: str, m: re.Match[str]) -> bool:
    """Whether the candidate ``m`` ends a sentence."""
    punct = m.group("p")
    if punct is None:  # blank line, list item, heading
        return True
    after = _NEXT.match(text, m.end())
    nxt = after.group(1)  # the next word, opening quotes dropped
    if nxt[:1].islower() and text[after.start(1) - 1].isspace() and not _CODE.search(nxt):
        return False  # lower case next ("e.g. the", ":q! to"); a quoted or code-like word ("ch_get()") may start one
    if punct != ".":
        return True
    word = _word_before(text, m.start())
    low = word.lower()
    if low in _TITLES or low in _NEVER_END:
        return False
    if len(word) == 1 and word.isupper():  # an initial: "J. R. R. Tolkien"
        return False
    if low in _BEFORE_NUMBER:
        return not nxt[:1].isdigit()
    if word.isdigit() and not text[text.rfind("\n", 0, m.start()) + 1 : m.start() - len(word)].strip():
        return False  # "1. Open the file." at the start of a line
    if low in _ENDABLE or _ACRONYM.fullmatch(low):
        return nxt.lower().strip("\"'”’,;:") in _STARTERS
    return True


def _word_before(text: str, end: int) -> str:
    """The word that ends at ``end`` (back to whitespace), opening quotes and brackets dropped."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip("\"'“‘([")
