"""Build a PosQ-style needle benchmark from any prose the user has.

Recipe (one query per passage):

1. Clean each source text into *units* (sentences; over-long ones are split at
   ``;``/``:`` and then by words) and pack consecutive units into windows just
   under ``max_tokens`` (special tokens included), leaving room for the needle.
   Windows never overlap, so passages of different splits share no text.
2. For every window, invent one *fact* (an evidence sentence about a person
   with a unique, made-up name) and a *query* that paraphrases it and can be
   answered only from that sentence (it names the person).
3. Insert the evidence sentence at a unit boundary so that its midpoint, as a
   fraction of the passage's content tokens, falls inside the chosen position
   group (``begin``/``middle``/``end`` = first/second/third third). The target
   fraction is drawn uniformly inside the group, so evidence is not always at
   the very edge.
4. Every other passage is a distractor made of real prose; facts reuse the same
   templates with other names, so the query's content words also appear in
   hard negatives and only the evidence sentence answers it.

Example:
    >>> words = lambda texts: [len(t.split()) + 2 for t in texts]
    >>> prose = {"s": " ".join(f"Sentence number {i} is here." for i in range(400))}
    >>> cfg = NeedleConfig(max_tokens=120, min_tokens=90, per_group=2, splits=("dev",))
    >>> splits = build_needle_benchmark(prose, words, cfg)
    >>> sorted(q["group"] for q in splits["dev"].queries)
    ['begin', 'begin', 'end', 'end', 'middle', 'middle']
"""

from __future__ import annotations

import gzip
import json
import logging
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from llamaindex_posfair.eval.facts import PEOPLE, THINGS, make_fact, near_duplicate, person_names, qualifiers
from qdrant_tools.text import sentence_spans

__all__ = [
    "NeedleConfig",
    "NeedleSplit",
    "build_needle_benchmark",
    "clean_gutenberg",
    "clean_texinfo",
    "make_fact",
    "split_units",
    "write_needle_benchmark",
]

logger = logging.getLogger(__name__)

TokenCounter = Callable[[list[str]], list[int]]


@dataclass(frozen=True)
class NeedleConfig:
    """Settings of the needle builder.

    Args:
        max_tokens: Largest passage length in tokens *including* special tokens
            (keep it at or under the encoder's window so nothing is truncated).
        min_tokens: Windows shorter than this (with the needle) are discarded.
        groups: Position groups; group ``i`` of ``n`` is the ``i``-th ``1/n`` of the passage.
        per_group: Queries per group per split.
        splits: Split names; passages and queries of different splits are disjoint.
        seed: Seed of every random choice (facts, positions, split assignment).
        max_unit_tokens: Sentences longer than this are split further.
        edge_margin: Keep the needle midpoint at least this fraction of a group's
            width away from the group's borders.
        facts: ``"people"``: every fact is about an invented person (``needle-prose``);
            ``"mixed"``: people, things and places (``facts.THINGS``).
        distractors: Passages per split that answer no query (real prose, plus the
            hard negatives below).
        hard_negatives: Near-duplicate facts per template per split, each a target's
            fact about another invented name (same slot values, same kind of thing),
            planted in that split's distractors; needs ``distractors > 0``.

    Raises:
        ValueError: a setting is out of range (the message names it).
    """

    max_tokens: int = 510
    min_tokens: int = 470
    groups: tuple[str, ...] = ("begin", "middle", "end")
    per_group: int = 50
    splits: tuple[str, ...] = ("dev", "test")
    seed: int = 13
    max_unit_tokens: int = 90
    edge_margin: float = 0.05
    facts: str = "people"
    distractors: int = 0
    hard_negatives: int = 0

    def __post_init__(self) -> None:
        if self.max_tokens < 32:
            raise ValueError(
                f"max_tokens must be at least 32, got {self.max_tokens}; use the encoder's window (e.g. 510)"
            )
        if not 0 < self.min_tokens <= self.max_tokens:
            raise ValueError(
                f"min_tokens must be in (0, max_tokens={self.max_tokens}], got {self.min_tokens}; "
                "try about 92% of max_tokens"
            )
        if len(self.groups) < 1 or len(set(self.groups)) != len(self.groups):
            raise ValueError(f"groups must be distinct labels, got {self.groups!r}")
        if self.per_group < 1:
            raise ValueError(f"per_group must be a positive integer, got {self.per_group}")
        if len(self.splits) < 1 or len(set(self.splits)) != len(self.splits):
            raise ValueError(f"splits must be distinct names, got {self.splits!r}; e.g. ('dev', 'test')")
        if not 0.0 <= self.edge_margin < 0.5:
            raise ValueError(f"edge_margin must be in [0, 0.5), got {self.edge_margin}")
        if self.max_unit_tokens < 8:
            raise ValueError(f"max_unit_tokens must be at least 8, got {self.max_unit_tokens}")
        if self.facts not in ("people", "mixed"):
            raise ValueError(f"facts must be 'people' or 'mixed', got {self.facts!r}")
        if self.distractors < 0 or self.hard_negatives < 0:
            raise ValueError(
                f"distractors and hard_negatives must be >= 0, got {self.distractors} and {self.hard_negatives}"
            )
        if self.hard_negatives and not self.distractors:
            raise ValueError(
                f"hard_negatives={self.hard_negatives} needs distractor passages to hold them; set distractors > 0"
            )


@dataclass
class NeedleSplit:
    """One split: ``corpus`` rows (``_id``, ``text`` ...) and ``queries`` rows."""

    name: str
    corpus: list[dict] = field(default_factory=list)
    queries: list[dict] = field(default_factory=list)


# ------------------------------------------------------------------------ prose prep
_GUTENBERG_END = re.compile(
    r"^\s*\*+\s*END OF (THE|THIS) PROJECT GUTENBERG|^\*End of The Project Gutenberg", re.I | re.M
)
_GUTENBERG_START = re.compile(r"^\s*\*+\s*START OF (THE|THIS) PROJECT GUTENBERG.*$", re.I | re.M)


def clean_gutenberg(text: str, start_marker: str | None = None) -> str:
    """Strip Project Gutenberg boilerplate and non-prose paragraphs.

    Keeps the text between the ``*** START``/``*** END`` markers (or from
    ``start_marker`` on), joins hard-wrapped lines, drops paragraphs that are
    not running text (headings, lists, addresses: fewer than 12 words, or
    mostly capitalised/numeric words), and returns paragraphs separated by
    blank lines.
    """
    m = _GUTENBERG_START.search(text)
    if m:
        text = text[m.end() :]
    if start_marker is not None:
        idx = text.find(start_marker)
        if idx < 0:
            raise ValueError(f"start_marker {start_marker!r} not found in the text")
        text = text[idx:]
    m = _GUTENBERG_END.search(text)
    if m:
        text = text[: m.start()]
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        para = " ".join(line.strip() for line in block.splitlines() if line.strip())
        para = re.sub(r"\s+", " ", para).replace("`", "'").strip()
        if _running_text(para) and "*" not in para and "(202)" not in para:
            paragraphs.append(para)
    return "\n\n".join(paragraphs)


_INFO_SKIP_NODES = re.compile(r"licen[cs]e|index|copying|^top$|history|concept|authors|bugs|reporting", re.I)
_INFO_HEADING = re.compile(r"^[*=\-.]{3,}$")
_INFO_TERM = re.compile(r"^(\S*‘[^’]*’\S*[,\s]*)+$")
_INFO_NOTE = re.compile(r"\*[Nn]ote\s+([^:]+?)\s*:(?::|\s*[^.,]*[.,])", re.S)
_CODE_CHARS = re.compile(r"[$=|{}<>\\/#@~^]|^-|\(\)|_")


def _running_text(para: str) -> bool:
    """At least 12 words, mostly words with letters, and some sentence punctuation (not a heading, a
    list or a table of contents)."""
    words = para.split()
    if len(words) < 12 or len([w for w in words if re.search(r"[a-z]", w)]) < 0.8 * len(words):
        return False
    return len(re.findall(r"[.!?;:]", para)) >= len(words) / 60


def _prose_like(para: str) -> bool:
    """Running text with few code tokens."""
    words = para.split()
    return _running_text(para) and len([w for w in words if _CODE_CHARS.search(w)]) <= 0.1 * len(words)


def clean_texinfo(text: str) -> str:
    """Keep the running prose of a GNU Info manual (the ``.info`` text a Texinfo build installs).

    Drops the nodes that are not the manual's own prose (licence, indices, copying, the top node),
    node headers, menus, headings, option-name lines and code examples; turns cross-references
    (``*note Node::``) into plain words, joins wrapped lines and returns paragraphs separated by
    blank lines, as :func:`clean_gutenberg` does.

    Example:
        >>> info = "\\x1f\\nFile: x.info,  Node: Usage,  Up: Top\\n\\n1 Usage\\n*******\\n\\n" + (
        ...     "The program reads each input file in turn and copies it to the output, "
        ...     "one line at a time, until the end.  *Note Options::.\\n"
        ... )
        >>> clean_texinfo(info)
        'The program reads each input file in turn and copies it to the output, one line at a time, until the end. see Options.'
    """
    paragraphs = []
    for node in text.split("\x1f")[1:]:
        lines = node.strip("\n").splitlines()
        header = re.search(r"Node:\s*([^,]+)", lines[0]) if lines else None
        if header is None or _INFO_SKIP_NODES.search(header.group(1).strip()):
            continue
        for block in re.split(r"\n\s*\n", "\n".join(lines[1:])):
            kept = _block_lines(block.splitlines())
            para = re.sub(r"\s+", " ", " ".join(kept)).strip()
            para = _INFO_NOTE.sub(lambda m: "see " + re.sub(r"\s+", " ", m.group(1)), para)
            if _prose_like(para):
                paragraphs.append(para)
    return "\n\n".join(paragraphs)


def _block_lines(lines: list[str]) -> list[str]:
    """The lines of one Info block without menus, headings and option-name lines (examples are left to
    :func:`_prose_like`)."""
    if not lines or lines[0].startswith("* ") or any(_INFO_HEADING.match(line.strip()) for line in lines):
        return []
    return [line.strip() for line in lines if line.strip() and not _INFO_TERM.match(line.strip())]


def split_units(text: str, count_content: Callable[[list[str]], list[int]], max_unit_tokens: int) -> list[str]:
    """Split prose into sentence-like units of at most ``max_unit_tokens`` tokens.

    Sentences are cut by :func:`qdrant_tools.text.sentence_spans` (the sub-chunks' splitter). Only
    the builder calls this; loading and scoring a built benchmark never re-split its passages.
    """
    out: list[str] = []
    for para in text.split("\n\n"):
        sents = [para[a:b] for a, b in sentence_spans(para)]
        lens = count_content(sents) if sents else []
        for s, n in zip(sents, lens):
            if n <= max_unit_tokens:
                out.append(s)
                continue
            pieces = [p.strip() for p in re.split(r"(?<=[;:])\s+", s) if p.strip()]
            plens = count_content(pieces)
            for p, pn in zip(pieces, plens):
                if pn <= max_unit_tokens:
                    out.append(p)
                else:  # still too long: cut by words, proportionally
                    words = p.split()
                    step = max(4, int(len(words) * max_unit_tokens / pn * 0.9))
                    out.extend(" ".join(words[i : i + step]) for i in range(0, len(words), step))
    return out


# --------------------------------------------------------------------------- builder
def _windows(units: list[str], lens: list[int], budget: int, min_fill: int) -> list[list[int]]:
    """Pack consecutive units into windows of at most ``budget`` content tokens."""
    windows, cur, used = [], [], 0
    for i, n in enumerate(lens):
        if used + n > budget:
            if cur and used >= min_fill:
                windows.append(cur)
            cur, used = [], 0
            if n > budget:
                continue
        cur.append(i)
        used += n
    if cur and used >= min_fill:
        windows.append(cur)
    return windows


def _place(lens: list[int], needle: int, lo: float, hi: float, target: float) -> int | None:
    """Boundary index (0..len(lens)) whose needle midpoint lies in [lo, hi], closest to target."""
    total = sum(lens) + needle
    best, best_d, before = None, None, 0
    for b in range(len(lens) + 1):
        mid = (before + needle / 2) / total
        if lo <= mid <= hi:
            d = abs(mid - target)
            if best_d is None or d < best_d:
                best, best_d = b, d
        if b < len(lens):
            before += lens[b]
    return best


def build_needle_benchmark(
    sources: Mapping[str, str],
    count_tokens: TokenCounter,
    config: NeedleConfig = NeedleConfig(),
    show_progress_bar: bool = False,
) -> dict[str, NeedleSplit]:
    """Build the splits of a needle benchmark from cleaned prose.

    Args:
        sources: Source name -> prose (paragraphs separated by blank lines; see
            ``clean_gutenberg`` and ``clean_texinfo``).
        count_tokens: Token counts of texts *including* special tokens, e.g.
            ``PosFairEncoder.count_tokens`` or a tokenizer wrapper.
        config: Builder settings.
        show_progress_bar: Show a tqdm bar while tokenising sources.

    Returns:
        Split name -> ``NeedleSplit``; every split has ``per_group`` queries per group
        and ``per_group x groups + distractors`` passages.

    Raises:
        ValueError: the prose is too short for the requested size (the message
            says how many windows were found and how many are needed).
    """
    rng = random.Random(config.seed)
    ctx = _Context(config, count_tokens)
    windows = _prose_windows(sources, ctx, show_progress_bar)
    n_targets = config.per_group * len(config.groups)
    needed = n_targets * len(config.splits)
    used = needed + config.distractors * len(config.splits)
    if len(windows) < used:
        raise ValueError(
            f"the prose gives {len(windows)} windows of {config.min_tokens}-{config.max_tokens} tokens, "
            f"but {used} are needed (per_group={config.per_group} x "
            f"{len(config.groups)} groups + distractors={config.distractors}, x {len(config.splits)} splits); "
            "add prose or lower per_group"
        )
    rng.shuffle(windows)
    logger.info("needle builder: %d prose windows available, %d used", len(windows), used)
    names = person_names(rng)
    if len(names) < needed:  # pragma: no cover - 840 surnames
        raise ValueError(f"only {len(names)} unique names available for {needed} needles; lower per_group")
    mixed = config.facts == "mixed"
    things = qualifiers(random.Random(config.seed + 1), sources.values()) if mixed else []
    pool = _NamePool(names[needed:], things)
    n_templates = len(PEOPLE) + (len(THINGS) if mixed else 0)
    out: dict[str, NeedleSplit] = {}
    k = 0
    for s_i, split in enumerate(config.splits):
        out[split] = NeedleSplit(split)
        for j in range(n_targets):
            src, units, lens = windows[k]
            k += 1
            template = (k * 7 + s_i) % n_templates
            fact = make_fact(rng, names[k - 1] if template < len(PEOPLE) else pool.qualifier(), template)
            doc, query = _target(ctx, rng, split, j, units, lens, fact)
            out[split].corpus.append(
                {"_id": doc["_id"], "text": doc["text"], "source": src, "n_tokens": doc["n_tokens"]}
            )
            out[split].queries.append(query)
        first = needed + s_i * config.distractors
        _add_distractors(ctx, out[split], windows[first : first + config.distractors], pool)
    return out


class _Context:
    """What every placement needs: the settings and the token counts with and without special tokens."""

    def __init__(self, config: NeedleConfig, count_tokens: TokenCounter) -> None:
        self.config = config
        self.count_tokens = count_tokens
        self.n_special = count_tokens([""])[0]

    def content(self, texts: list[str]) -> list[int]:
        return [n - self.n_special for n in self.count_tokens(texts)] if texts else []


class _NamePool:
    """Names no target uses, handed out once each: people for near-duplicate people facts, qualifiers for
    things and places."""

    def __init__(self, people: list[str], qualifiers: list[str]) -> None:
        self._people, self._qualifiers = people, qualifiers

    def person(self) -> str:
        if not self._people:
            raise ValueError("ran out of unique invented people; lower per_group or hard_negatives")
        return self._people.pop()

    def qualifier(self) -> str:
        if not self._qualifiers:
            raise ValueError("ran out of unique invented thing and place names; lower per_group or hard_negatives")
        return self._qualifiers.pop()


def _prose_windows(
    sources: Mapping[str, str], ctx: _Context, show_progress_bar: bool
) -> list[tuple[str, list[str], list[int]]]:
    """Every source cut into ``(source, units, unit token counts)`` windows that leave room for a needle."""
    needle_room = 34  # a typical evidence sentence; longer ones trim the window's tail
    budget = ctx.config.max_tokens - ctx.n_special - needle_room
    min_fill = ctx.config.min_tokens - ctx.n_special - needle_room
    windows: list[tuple[str, list[str], list[int]]] = []
    for src, text in tqdm(list(sources.items()), desc="prose", disable=not show_progress_bar):
        units = split_units(text, ctx.content, ctx.config.max_unit_tokens)
        lens = ctx.content(units)
        for w in _windows(units, lens, budget, min_fill):
            windows.append((src, [units[i] for i in w], [lens[i] for i in w]))
    return windows


def _target(
    ctx: _Context, rng: random.Random, split: str, j: int, units: list[str], lens: list[int], fact: dict
) -> tuple[dict, dict]:
    """Passage ``j`` of ``split`` with ``fact`` planted in its position group, and its query row."""
    config = ctx.config
    n_groups = len(config.groups)
    g_i = j % n_groups
    needle_len = ctx.content([fact["statement"]])[0]
    while len(lens) > 1 and sum(lens) + needle_len + ctx.n_special > config.max_tokens:
        units, lens = units[:-1], lens[:-1]  # keep the prose contiguous: drop from the tail
    width = 1.0 / n_groups
    lo = g_i * width + config.edge_margin * width
    hi = (g_i + 1) * width - config.edge_margin * width
    b = _place(lens, needle_len, lo, hi, rng.uniform(lo, hi))
    if b is None:  # cannot happen with units << group width; fail loudly
        raise ValueError(
            f"could not place a needle in group {config.groups[g_i]!r}; lower max_unit_tokens "
            f"(now {config.max_unit_tokens})"
        )
    text = " ".join(units[:b] + [fact["statement"]] + units[b:])
    before = sum(lens[:b])
    total = sum(lens) + needle_len
    n_tok = _checked_length(ctx, text)
    did = f"{split}-p{j:04d}"
    query = {
        "_id": f"{split}-q{j:04d}",
        "text": fact["query"],
        "doc_id": did,
        "group": config.groups[g_i],
        "rel_position": round((before + needle_len / 2) / total, 4),
        "needle": fact["statement"],
        "needle_char_start": len(" ".join(units[:b])) + (1 if b else 0),
        "needle_token_start": before,
        "needle_tokens": needle_len,
        "answer": fact["answer"],
        "entity": fact["entity"],
        "template": fact["template"],
        "_fact": fact,
    }
    return {"_id": did, "text": text, "n_tokens": n_tok}, query


def _checked_length(ctx: _Context, text: str) -> int:
    n_tok = ctx.count_tokens([text])[0]
    if n_tok > ctx.config.max_tokens:
        raise ValueError(
            f"passage has {n_tok} tokens > max_tokens={ctx.config.max_tokens}; the token counter is not "
            "additive over whitespace-joined sentences, lower max_tokens"
        )
    return n_tok


def _add_distractors(
    ctx: _Context, split: NeedleSplit, windows: list[tuple[str, list[str], list[int]]], pool: _NamePool
) -> None:
    """Append the split's distractor passages, dealing ``hard_negatives`` near duplicates per template among
    them, and record on each query the distractors that hold near duplicates of its fact."""
    rng = random.Random(f"{ctx.config.seed}-{split.name}-distractors")
    by_template: dict[str, list[dict]] = {}
    for q in split.queries:
        by_template.setdefault(q["template"], []).append(q)
    negatives: list[tuple[dict, dict]] = []
    for template in sorted(by_template, key=int):
        chosen = rng.sample(by_template[template], min(ctx.config.hard_negatives, len(by_template[template])))
        for q in chosen:
            fact = q["_fact"]
            name = pool.person() if int(template) < len(PEOPLE) else pool.qualifier()
            negatives.append((q, near_duplicate(fact, name)))
    rng.shuffle(negatives)
    for i, (src, units, lens) in enumerate(windows):
        did = f"{split.name}-d{i:04d}"
        planted = negatives[i :: len(windows)]
        text = _plant_all(ctx, rng, units, lens, [fact["statement"] for _q, fact in planted])
        split.corpus.append({"_id": did, "text": text, "source": src, "n_tokens": _checked_length(ctx, text)})
        for q, _fact in planted:
            q.setdefault("hard_negatives", []).append(did)
    for q in split.queries:
        q.pop("_fact")
        if ctx.config.hard_negatives:
            q.setdefault("hard_negatives", [])


def _plant_all(ctx: _Context, rng: random.Random, units: list[str], lens: list[int], statements: list[str]) -> str:
    """``units`` joined with every statement inserted at its own random unit boundary (tail trimmed to fit)."""
    extra = sum(ctx.content(statements))
    while len(lens) > 1 and sum(lens) + extra + ctx.n_special > ctx.config.max_tokens:
        units, lens = units[:-1], lens[:-1]
    pieces = list(units)
    cuts = sorted(rng.sample(range(len(units) + 1), min(len(statements), len(units) + 1)))
    for cut, statement in sorted(zip(cuts, statements), reverse=True):
        pieces.insert(cut, statement)
    return " ".join(pieces)


def _write_jsonl_gz(path: Path, rows: Sequence[dict]) -> None:
    with gzip.GzipFile(path, "wb", mtime=0) as fh:  # mtime=0: byte-identical rebuilds
        for r in rows:
            fh.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8"))


def write_needle_benchmark(
    splits: Mapping[str, NeedleSplit],
    folder: str | Path,
    name: str,
    config: NeedleConfig,
    extra_info: Mapping[str, object] | None = None,
) -> Path:
    """Write splits as ``<folder>/<split>/{corpus,queries}.jsonl.gz`` plus ``info.json``."""
    folder = Path(folder)
    for split, data in splits.items():
        d = folder / split
        d.mkdir(parents=True, exist_ok=True)
        _write_jsonl_gz(d / "corpus.jsonl.gz", data.corpus)
        _write_jsonl_gz(d / "queries.jsonl.gz", data.queries)
    info = {
        "name": name,
        "groups": list(config.groups),
        "config": asdict(config),
        "splits": {s: {"passages": len(v.corpus), "queries": len(v.queries)} for s, v in splits.items()},
        **dict(extra_info or {}),
    }
    (folder / "info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return folder
