"""Which sentence splitter should sub-chunks and the needle builder share? Gold accuracy, speed, disagreements.

Candidates (each returns character spans into the original text, whitespace trimmed):

* **a_subchunks_re**: the regex ``qdrant_tools.subchunks`` used until now (frozen copy):
  ``[.!?…]`` + closing quotes before whitespace, blank lines, a line break before a list item or heading.
* **b_needle_re**: the regex the needle builder used until now (frozen copy of ``eval/benchmarks/needle._SENT``):
  ``[.!?]`` + closing quotes + whitespace + an upper-case letter; paragraphs at ``\\n\\n``.
* **c_punkt**: NLTK Punkt (english), parameters read from the ``punkt_tab`` data llama-index-core ships
  (``llama_index/core/_static/nltk_cache``; nothing downloaded), ``span_tokenize`` on the whole text.
* **c2_punkt_blocks**: the same Punkt model plus a short list of abbreviations it lacks (e.g., i.e., etc.,
  fig., no., vol., cf., ...), run inside the structural blocks of (a) (blank lines, list items, headings).
* **d_regex_abbrev**: (a)'s candidates, kept only where the next word does not start lower case, the word
  before is not a title/abbreviation/initial/list number, and a dotted acronym or ``etc.`` is followed by a
  common sentence starter (Punkt's idea, as a table): :func:`qdrant_tools.text.sentence_spans`.

Measured: on hand-made hard cases with hand-labelled gold sentences (``GOLD`` below): cases split exactly
right, and boundary precision/recall/F1 (a boundary = the start offset of every sentence but the first);
on the shipped passages (natural-docs and needle-prose ``test`` corpora): sentences/s (best of 3, one
core) and, per splitter, boundaries no other splitter puts ("alone") and boundaries every other splitter
puts but this one does not ("missed"), plus a sample of disagreements with (a).

Decision rule, written before the first run: a splitter is eligible if it runs at >= 20,000 sentences/s
here (the reranker cuts the top-k nodes at query time: ~250 sentences for 10 nodes of 500 tokens is then
<= 12.5 ms) -- and, as the brief suggests, within 10x of (a)'s speed if any eligible splitter meets both;
among the eligible, the most gold cases split exactly right wins; ties go to the higher boundary F1, then
to the one without a data dependency (a regex), then to the faster.

Usage::

    nice -n 5 .venv/bin/python research/bench/sentence_splitters.py            # table + 12 sample disagreements
    nice -n 5 .venv/bin/python research/bench/sentence_splitters.py --sample 30
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

Span = tuple[int, int]

# ----------------------------------------------------------------------------- gold
#: (text, gold sentences in order). Boundaries are where the gold sentences start (after the first).
GOLD: list[tuple[str, list[str]]] = [
    ("Dr. Smith met Mr. Jones in the U.S. on Monday.", ["Dr. Smith met Mr. Jones in the U.S. on Monday."]),
    ("Dr. Smith met Mr. Jones in the U.S. They talked.", ["Dr. Smith met Mr. Jones in the U.S.", "They talked."]),
    ("Mrs. Brown and Prof. Xavier spoke to Sen. Warren.", ["Mrs. Brown and Prof. Xavier spoke to Sen. Warren."]),
    (
        "Use a fast tokenizer, e.g. the Rust one. It is quicker, i.e. about 10x faster.",
        ["Use a fast tokenizer, e.g. the Rust one.", "It is quicker, i.e. about 10x faster."],
    ),
    ("Pick a language, e.g. Python or Lua.", ["Pick a language, e.g. Python or Lua."]),
    ("Pi is about 3.14 here. The ratio is 2.5 today.", ["Pi is about 3.14 here.", "The ratio is 2.5 today."]),
    ("Install version 1.2.3 now. Then restart.", ["Install version 1.2.3 now.", "Then restart."]),
    ("He paused... Then he left.", ["He paused...", "Then he left."]),
    ("Wait... what did you say?", ["Wait... what did you say?"]),
    ('She said "Stop." Then she left.', ['She said "Stop."', "Then she left."]),
    ('"Where?" he asked. "Here."', ['"Where?" he asked.', '"Here."']),
    ("(This is an aside.) Next one.", ["(This is an aside.)", "Next one."]),
    (
        "Call os.path.join(a, b) to build the path. It returns a str.",
        ["Call os.path.join(a, b) to build the path.", "It returns a str."],
    ),
    ("The file is config.yaml. Edit it.", ["The file is config.yaml.", "Edit it."]),
    (
        "To show line numbers type :set nu. Press CTRL-W w to go to the next window.",
        ["To show line numbers type :set nu.", "Press CTRL-W w to go to the next window."],
    ),
    ("Type :set nu. to show numbers.", ["Type :set nu. to show numbers."]),
    ("Press CTRL-W. Then type j.", ["Press CTRL-W.", "Then type j."]),
    ("Use :q! to quit without saving.", ["Use :q! to quit without saving."]),
    ("Steps:\n1. Open the file.\n2. Save it.", ["Steps:", "1. Open the file.", "2. Save it."]),
    ("Options:\n- fast mode\n- safe mode", ["Options:", "- fast mode", "- safe mode"]),
    ("A title without a period\n\nThe body starts here.", ["A title without a period", "The body starts here."]),
    ("This sentence is\nwrapped over two lines. Next.", ["This sentence is\nwrapped over two lines.", "Next."]),
    ("See Fig. 3 for details. Table 2 agrees.", ["See Fig. 3 for details.", "Table 2 agrees."]),
    ("Item No. 5 is mine.", ["Item No. 5 is mine."]),
    ("J. R. R. Tolkien wrote it. He was English.", ["J. R. R. Tolkien wrote it.", "He was English."]),
    ("We bought apples, pears, etc. Then we left.", ["We bought apples, pears, etc.", "Then we left."]),
    ("We bought apples, pears, etc. and more.", ["We bought apples, pears, etc. and more."]),
    ("It starts at 5 p.m. tomorrow. Bring notes.", ["It starts at 5 p.m. tomorrow.", "Bring notes."]),
    ("It costs $4.50. That is cheap! Really? Yes.", ["It costs $4.50.", "That is cheap!", "Really?", "Yes."]),
    ("The answer is 42. The question is unknown.", ["The answer is 42.", "The question is unknown."]),
    ("See https://example.com/a.b. It helps.", ["See https://example.com/a.b.", "It helps."]),
    ("Compare A vs. B in Sect. 2.", ["Compare A vs. B in Sect. 2."]),
]


def gold_boundaries(text: str, sentences: list[str]) -> set[int]:
    """Start offsets of the gold sentences after the first (each found in order in ``text``)."""
    out, pos = set(), 0
    for i, s in enumerate(sentences):
        at = text.index(s, pos)
        if i:
            out.add(at)
        pos = at + len(s)
    return out


def boundaries(spans: list[Span]) -> set[int]:
    return {a for a, _ in spans[1:]}


# ----------------------------------------------------------------------------- candidates
def _trimmed(text: str, cuts: list[int]) -> list[Span]:
    """Spans between consecutive cut offsets, whitespace trimmed, empty ones dropped."""
    out: list[Span] = []
    for a, b in zip([0, *cuts], [*cuts, len(text)]):
        piece = text[a:b]
        left, right = len(piece) - len(piece.lstrip()), len(piece.rstrip())
        if right > left:
            out.append((a + left, a + right))
    return out


_A_END = re.compile(r"""[.!?…]+["'”’)\]]*(?=\s)|\n\s*\n|\n(?=\s*(?:[-*•#]|\d+[.)])\s)""")


def a_subchunks_re(text: str) -> list[Span]:
    return _trimmed(text, [m.end() for m in _A_END.finditer(text)])


_B_SENT = re.compile(r"(?<=[.!?])['\")\]]*\s+(?=[\"'(\[]?[A-Z])")


def b_needle_re(text: str) -> list[Span]:
    """The needle regex as spans (``re.split`` dropped the closing quotes it matched; kept here)."""
    cuts = []
    for m in re.finditer(r"\n\n", text):
        cuts.append(m.end())
    for m in _B_SENT.finditer(text):
        cuts.append(m.end())
    return _trimmed(text, sorted(set(cuts)))


@cache
def _punkt(extra: bool):
    import llama_index.core
    import nltk.data
    from nltk.tokenize.punkt import PunktSentenceTokenizer, load_punkt_params

    cache_dir = Path(llama_index.core.__file__).parent / "_static/nltk_cache"
    if not (cache_dir / "tokenizers/punkt_tab/english").is_dir():
        raise SystemExit(f"Punkt data not found under {cache_dir}; llama-index-core ships it, nothing is downloaded")
    if str(cache_dir) not in nltk.data.path:  # nltk opens model files only under its data path
        nltk.data.path.append(str(cache_dir))
    params = load_punkt_params(nltk.data.find("tokenizers/punkt_tab/english/", paths=[str(cache_dir)]))
    if extra:
        params.abbrev_types.update(_EXTRA_ABBREV)
    return PunktSentenceTokenizer(params)


_EXTRA_ABBREV = {"e.g", "i.e", "etc", "fig", "figs", "no", "nos", "vol", "cf", "approx", "sect", "eq", "ca"}


def c_punkt(text: str) -> list[Span]:
    return [(a, b) for a, b in _punkt(False).span_tokenize(text) if text[a:b].strip()]


_BLOCK = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*•#]|\d+[.)])\s)")


def c2_punkt_blocks(text: str) -> list[Span]:
    tok = _punkt(True)
    out: list[Span] = []
    for a, b in _trimmed(text, [m.end() for m in _BLOCK.finditer(text)]):
        out.extend((a + s, a + e) for s, e in tok.span_tokenize(text[a:b]))
    return out


def d_regex_abbrev(text: str) -> list[Span]:
    from qdrant_tools.text import sentence_spans

    return sentence_spans(text)


SPLITTERS: dict[str, Callable[[str], list[Span]]] = {
    "a_subchunks_re": a_subchunks_re,
    "b_needle_re": b_needle_re,
    "c_punkt": c_punkt,
    "c2_punkt_blocks": c2_punkt_blocks,
    "d_regex_abbrev": d_regex_abbrev,
}


# ----------------------------------------------------------------------------- measures
def gold_scores(fn: Callable[[str], list[Span]]) -> tuple[int, float, float, float, list[str]]:
    """Exact cases, precision, recall, F1 over boundaries, and the texts of the failed cases."""
    exact, tp, fp, fn_, failed = 0, 0, 0, 0, []
    for text, sents in GOLD:
        want = gold_boundaries(text, sents)
        got = boundaries(fn(text))
        tp += len(want & got)
        fp += len(got - want)
        fn_ += len(want - got)
        if want == got:
            exact += 1
        else:
            failed.append(text)
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn_) if tp + fn_ else 1.0
    return exact, p, r, 2 * p * r / (p + r) if p + r else 0.0, failed


def speed(fn: Callable[[str], list[Span]], texts: list[str]) -> float:
    """Sentences per second, best of 3 passes."""
    fn(texts[0])  # load models once, outside the clock
    best = float("inf")
    n = 0
    for _ in range(3):
        t0 = time.perf_counter()
        n = sum(len(fn(t)) for t in texts)
        best = min(best, time.perf_counter() - t0)
    return n / best


def _context(text: str, at: int, width: int = 60) -> str:
    a, b = max(0, at - width), min(len(text), at + width)
    return (text[a:at] + " ‖ " + text[at:b]).replace("\n", "⏎")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=12, help="disagreements with (a) to print per splitter")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from research.eval.benchmarks.loaders import load_shipped

    corpora = {
        "natural-docs": list(load_shipped("natural-docs", "test").corpus.values()),
        "needle-prose": list(load_shipped("needle-prose", "test").corpus.values()),
    }
    texts = [t for ts in corpora.values() for t in ts]
    print(f"corpora: {', '.join(f'{k} {len(v)} passages' for k, v in corpora.items())}; gold cases: {len(GOLD)}\n")

    found = {n: [boundaries(fn(t)) for t in texts] for n, fn in SPLITTERS.items()}
    rows = []
    for name, fn in SPLITTERS.items():
        exact, p, r, f1, failed = gold_scores(fn)
        sps = speed(fn, texts)
        n_sent = sum(len(b) + 1 for b in found[name])
        others = [o for o in SPLITTERS if o != name]
        alone = sum(len(found[name][i] - set().union(*(found[o][i] for o in others))) for i in range(len(texts)))
        missed = sum(len(set.intersection(*(found[o][i] for o in others)) - found[name][i]) for i in range(len(texts)))
        rows.append((name, exact, p, r, f1, sps, n_sent, alone, missed, failed))

    print(
        "| splitter | gold exact | boundary P | boundary R | boundary F1 | sentences/s | sentences | alone | missed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, exact, p, r, f1, sps, n_sent, alone, missed, _ in rows:
        print(
            f"| {name} | {exact}/{len(GOLD)} | {p:.3f} | {r:.3f} | {f1:.3f} | {sps:,.0f} | {n_sent} | {alone} | {missed} |"
        )
    print("\nPairwise: boundaries in row not in column (both corpora)\n")
    names = list(SPLITTERS)
    print("| row \\ col | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for x in names:
        cells = [str(sum(len(found[x][i] - found[y][i]) for i in range(len(texts)))) for y in names]
        print(f"| {x} | " + " | ".join(cells) + " |")

    print("\nGold cases each splitter gets wrong:")
    for name, *_, failed in rows:
        print(f"- {name}: " + ("; ".join(repr(f) for f in failed) or "none"))

    rng = random.Random(args.seed)
    for name in names[1:]:
        diffs = [
            (i, at, "+" if at in found[name][i] else "-")
            for i in range(len(texts))
            for at in found[name][i] ^ found["a_subchunks_re"][i]
        ]
        print(f"\nSample of {name} vs a_subchunks_re ({len(diffs)} differing boundaries; + only {name}, - only a):")
        for i, at, sign in sorted(rng.sample(diffs, min(args.sample, len(diffs)))):
            print(f"  {sign} {_context(texts[i], at)}")


if __name__ == "__main__":
    main()
