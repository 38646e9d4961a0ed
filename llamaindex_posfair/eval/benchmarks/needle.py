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

from qdrant_tools.text import sentence_spans

__all__ = [
    "NeedleConfig",
    "NeedleSplit",
    "build_needle_benchmark",
    "clean_gutenberg",
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
        words = para.split()
        if len(words) < 12:
            continue
        alpha = [w for w in words if re.search(r"[a-z]", w)]
        if len(alpha) < 0.8 * len(words):
            continue
        if "*" in para or "(202)" in para:
            continue
        if len(re.findall(r"[.!?;:]", para)) < len(words) / 60:  # tables of contents, lists
            continue
        paragraphs.append(para)
    return "\n\n".join(paragraphs)


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


# ----------------------------------------------------------------------------- facts
_FIRST = [
    "Ada",
    "Alaric",
    "Amos",
    "Anselm",
    "Beatrix",
    "Bertram",
    "Calla",
    "Cyrus",
    "Dorian",
    "Edda",
    "Elric",
    "Enid",
    "Fenna",
    "Florian",
    "Greta",
    "Gideon",
    "Hester",
    "Hollis",
    "Ida",
    "Ivo",
    "Jocasta",
    "Jules",
    "Kestrel",
    "Linnea",
    "Lorcan",
    "Mabyn",
    "Marek",
    "Nessa",
    "Niall",
    "Odile",
    "Osric",
    "Perpetua",
    "Quincy",
    "Rosalind",
    "Rufus",
    "Saskia",
    "Silas",
    "Tamsin",
    "Teodor",
    "Ursa",
    "Valentin",
    "Wilhelmina",
    "Wystan",
    "Xanthe",
    "Yorick",
    "Zillah",
    "Agathe",
    "Bramwell",
    "Clemency",
    "Desmond",
    "Ermengarde",
    "Fabian",
    "Ginevra",
    "Horatio",
    "Isolde",
    "Jasper",
    "Leopold",
    "Melisande",
    "Ottoline",
    "Peregrine",
]
_PRE = [
    "Ash",
    "Bram",
    "Cor",
    "Dun",
    "Ell",
    "Fen",
    "Gar",
    "Hal",
    "Ivers",
    "Kel",
    "Lark",
    "Mor",
    "Nor",
    "Orr",
    "Pem",
    "Quen",
    "Rav",
    "Stan",
    "Thorn",
    "Ul",
    "Ver",
    "Wyn",
    "Yar",
    "Zell",
    "Brack",
    "Crom",
    "Dray",
    "Esk",
    "Fal",
    "Grisk",
    "Hob",
    "Jess",
    "Kip",
    "Loft",
    "Marr",
    "Nett",
    "Pell",
    "Rook",
    "Sorr",
    "Tull",
    "Vane",
    "Wick",
]
_SUF = [
    "wick",
    "more",
    "dale",
    "by",
    "stead",
    "ford",
    "holt",
    "ridge",
    "ton",
    "croft",
    "mere",
    "worth",
    "brook",
    "field",
    "gate",
    "ley",
    "hurst",
    "wood",
    "combe",
    "thwaite",
]
_SLOTS: dict[str, tuple[str, ...]] = {
    "profession": (
        "cooper",
        "glassblower",
        "ferryman",
        "bookbinder",
        "saddler",
        "clockmaker",
        "weaver",
        "beekeeper",
        "cartographer",
        "chandler",
        "tanner",
        "apothecary",
    ),
    "town": (
        "Harrowmere",
        "Quillby",
        "Oxenhallow",
        "Saltcombe",
        "Bellwether Cross",
        "Marrowdean",
        "Thistlegate",
        "Wrenford",
        "Caddis Hollow",
        "Penhallow",
        "Larkspur Green",
        "Fallowmere",
    ),
    "color": ("crimson", "grey", "yellow", "green", "blue", "white", "black", "copper-coloured"),
    "animal": ("goat", "owl", "hedgehog", "ferret", "tortoise", "parrot", "badger", "hare", "raven", "donkey"),
    "tool": ("bent hairpin", "pocket knife", "pair of tweezers", "sewing needle", "fish hook", "nail file"),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "island": ("Skerrow", "Inchmurrin", "Valla", "Brennis", "Torsey", "Halmoor", "Ulvin", "Cairnholm"),
    "instrument": ("hurdy-gurdy", "bassoon", "harp", "concertina", "viola", "bagpipes", "dulcimer", "oboe"),
    "number": ("three", "five", "seven", "nine", "eleven", "twelve", "fifteen", "forty", "sixty", "eighty"),
    "tree": ("walnut", "cherry", "linden", "rowan", "chestnut", "plum", "birch", "quince"),
    "food": ("ginger biscuits", "plum pudding", "oat cakes", "apple tarts", "honey bread", "mince pies"),
    "document": ("train ticket", "love letter", "tax notice", "hymn sheet", "shipping manifest", "theatre bill"),
    "garment": ("scarf", "bonnet", "waistcoat", "glove", "shawl", "boot"),
    "river": ("Wendle", "Ashbourne", "Calder", "Morrow", "Tavy", "Lune", "Sorrel"),
    "month": ("January", "March", "April", "June", "August", "October", "November"),
    "container": ("tin box", "leather satchel", "wicker basket", "clay jar", "canvas sack"),
    "provision": ("dried figs", "salted almonds", "hard cheese", "black bread", "pickled herring"),
    "collectible": ("brass buttons", "sea shells", "railway tickets", "pressed ferns", "foreign coins", "thimbles"),
    "fear": ("thunder", "deep water", "church bells", "geese", "tall ladders", "moths"),
    "vegetable": ("pumpkin", "marrow", "cabbage", "turnip", "beetroot", "cucumber"),
    "building": ("disused mill", "boathouse", "chapel", "hay barn", "lighthouse", "signal box"),
    "constellation": ("Great Bear", "Swan", "Hunter", "Lyre", "Eagle", "Cassiopeia"),
    "vehicle": ("rowing boat", "bicycle", "pony cart", "handcart", "sledge"),
    "craft": ("lace", "baskets", "candles", "kites", "violins", "model ships"),
}
# (statement, query, answer slot). Queries paraphrase and always name the person.
_TEMPLATES: tuple[tuple[str, str, str], ...] = (
    (
        "{name}, a {profession} from {town}, once kept a {color} {animal} that slept beside the kitchen stove.",
        "What kind of pet did the {profession} {name} have at home?",
        "animal",
    ),
    (
        "It was {name} who repaired the great clock of {town}, using nothing but a {tool}.",
        "Which small tool did {name} use to mend the town clock?",
        "tool",
    ),
    (
        "Every {weekday} {name} wrote a long letter to a cousin who lived on the island of {island}.",
        "On which island did the cousin that {name} wrote to each week live?",
        "island",
    ),
    (
        "The only person in {town} who could play the {instrument} was {name}, who had learned it from a travelling {profession}.",
        "Who taught {name} to play the {instrument}?",
        "profession",
    ),
    (
        "{name} planted {number} {tree} trees along the road to {town} and tended them for twenty years.",
        "How many trees did {name} plant beside the road?",
        "number",
    ),
    (
        "Every winter {name} baked {food} for the whole street, following a recipe written on the back of an old {document}.",
        "What did {name} bake for the neighbours each winter?",
        "food",
    ),
    (
        "{name} lost a {color} {garment} while wading across the river {river} and never found it again.",
        "Which piece of clothing did {name} lose in the river?",
        "garment",
    ),
    (
        "In {month} {name} walked from {town} to the coast carrying only a {container} of {provision}.",
        "What food did {name} take on the long walk to the sea?",
        "provision",
    ),
    (
        "{name} kept a small collection of {collectible} in a {container} under the bed.",
        "What did {name} collect and hide beneath the bed?",
        "collectible",
    ),
    (
        "Ever since a childhood summer spent in {town}, {name} had been afraid of {fear}.",
        "What has {name} been frightened of since childhood?",
        "fear",
    ),
    (
        "The {color} front door of the house owned by {name} had been painted by a {profession} who refused payment.",
        "Which tradesman painted the door of {name}'s house?",
        "profession",
    ),
    (
        "{name} won first prize at the {town} fair for growing a {vegetable} that weighed {number} pounds.",
        "What vegetable won {name} a prize at the fair?",
        "vegetable",
    ),
    (
        "For {number} years {name} taught the children of {town} to read in an old {building}.",
        "In what kind of building did {name} teach children to read?",
        "building",
    ),
    (
        "When the great storm came, {name} sheltered in a {building} together with a {animal} and a lantern.",
        "Where did {name} take cover during the storm?",
        "building",
    ),
    (
        "{name} could name every star of the {constellation} without ever looking at a chart.",
        "Which constellation did {name} know by heart?",
        "constellation",
    ),
    (
        "At the market in {town}, {name} once traded a battered {instrument} for a {vehicle}.",
        "What did {name} receive in exchange for the {instrument}?",
        "vehicle",
    ),
    (
        "In the evenings {name} made {craft} by candlelight and sold them to sailors in {town}.",
        "What did {name} make by hand and sell to sailors?",
        "craft",
    ),
)


def _names(rng: random.Random) -> list[str]:
    surnames = [p + s for p in _PRE for s in _SUF]
    rng.shuffle(surnames)
    return [f"{rng.choice(_FIRST)} {sur}" for sur in surnames]


def make_fact(rng: random.Random, name: str, template: int | None = None) -> dict[str, str]:
    """One evidence sentence and its paraphrased query about ``name``.

    Returns:
        ``{"statement", "query", "answer", "template"}``.

    Example:
        >>> f = make_fact(random.Random(0), "Ada Ashwick", template=4)
        >>> "Ada Ashwick" in f["statement"] and "Ada Ashwick" in f["query"]
        True
    """
    idx = rng.randrange(len(_TEMPLATES)) if template is None else template
    statement, query, answer_slot = _TEMPLATES[idx]
    values = {k: rng.choice(v) for k, v in _SLOTS.items()}
    values["name"] = name
    text = statement.format(**values)
    return {
        "statement": text[0].upper() + text[1:],
        "query": query.format(**values),
        "answer": values[answer_slot],
        "template": str(idx),
    }


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
            ``clean_gutenberg``).
        count_tokens: Token counts of texts *including* special tokens, e.g.
            ``PosFairEncoder.count_tokens`` or a tokenizer wrapper.
        config: Builder settings.
        show_progress_bar: Show a tqdm bar while tokenising sources.

    Returns:
        Split name -> ``NeedleSplit``; every split has ``per_group`` queries per group.

    Raises:
        ValueError: the prose is too short for the requested size (the message
            says how many windows were found and how many are needed).
    """
    rng = random.Random(config.seed)
    n_special = count_tokens([""])[0]

    def content(texts: list[str]) -> list[int]:
        return [n - n_special for n in count_tokens(texts)] if texts else []

    windows: list[tuple[str, list[str], list[int]]] = []
    needle_room = 34  # a typical evidence sentence; longer ones trim the window's tail below
    budget = config.max_tokens - n_special - needle_room
    min_fill = config.min_tokens - n_special - needle_room
    for src, text in tqdm(list(sources.items()), desc="prose", disable=not show_progress_bar):
        units = split_units(text, content, config.max_unit_tokens)
        lens = content(units)
        for w in _windows(units, lens, budget, min_fill):
            windows.append((src, [units[i] for i in w], [lens[i] for i in w]))
    needed = config.per_group * len(config.groups) * len(config.splits)
    if len(windows) < needed:
        raise ValueError(
            f"the prose gives {len(windows)} windows of {config.min_tokens}-{config.max_tokens} tokens, "
            f"but {needed} are needed (per_group={config.per_group} x {len(config.groups)} groups x "
            f"{len(config.splits)} splits); add prose or lower per_group"
        )
    rng.shuffle(windows)
    logger.info("needle builder: %d prose windows available, %d used", len(windows), needed)
    names = _names(rng)
    if len(names) < needed:  # pragma: no cover - 880 surnames
        raise ValueError(f"only {len(names)} unique names available for {needed} needles; lower per_group")
    n_groups = len(config.groups)
    out: dict[str, NeedleSplit] = {s: NeedleSplit(s) for s in config.splits}
    k = 0
    for s_i, split in enumerate(config.splits):
        for j in range(config.per_group * n_groups):
            src, units, lens = windows[k]
            name = names[k]
            k += 1
            g_i = j % n_groups
            fact = make_fact(rng, name, template=(k * 7 + s_i) % len(_TEMPLATES))
            needle_len = content([fact["statement"]])[0]
            while len(lens) > 1 and sum(lens) + needle_len + n_special > config.max_tokens:
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
            pieces = units[:b] + [fact["statement"]] + units[b:]
            text = " ".join(pieces)
            before = sum(lens[:b])
            total = sum(lens) + needle_len
            char_start = len(" ".join(units[:b])) + (1 if b else 0)
            n_tok = count_tokens([text])[0]
            if n_tok > config.max_tokens:
                raise ValueError(
                    f"passage has {n_tok} tokens > max_tokens={config.max_tokens}; the token counter is not "
                    "additive over whitespace-joined sentences, lower max_tokens"
                )
            did = f"{split}-p{j:04d}"
            out[split].corpus.append({"_id": did, "text": text, "source": src, "n_tokens": n_tok})
            out[split].queries.append(
                {
                    "_id": f"{split}-q{j:04d}",
                    "text": fact["query"],
                    "doc_id": did,
                    "group": config.groups[g_i],
                    "rel_position": round((before + needle_len / 2) / total, 4),
                    "needle": fact["statement"],
                    "needle_char_start": char_start,
                    "needle_token_start": before,
                    "needle_tokens": needle_len,
                    "answer": fact["answer"],
                    "entity": name,
                    "template": fact["template"],
                }
            )
    return out


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
