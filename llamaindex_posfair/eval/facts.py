"""The invented facts a needle benchmark plants: names, slot values, templates.

A fact is one evidence sentence and a query that paraphrases it and names its
entity. ``PEOPLE`` facts (the ``needle-prose`` kind) are about an invented
person; ``THINGS`` facts are about an invented thing or place, named by an
invented qualifier ("the Tollbrook heron", "the island of Kelmere"), so that
other facts of the same template about other qualifiers are near duplicates
that only the name tells apart.

Example:
    >>> f = make_fact(random.Random(0), "Ada Ashwick", template=4)
    >>> "Ada Ashwick" in f["statement"] and "Ada Ashwick" in f["query"]
    True
    >>> t = make_fact(random.Random(0), "Tolbrook", template=len(PEOPLE))
    >>> t["entity"] in t["statement"] and t["entity"] in t["query"] and t["entity"].startswith("Tolbrook ")
    True
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

__all__ = ["PEOPLE", "THINGS", "Template", "make_fact", "near_duplicate", "person_names", "qualifiers"]

_FIRST = (
    "Ada Alaric Amos Anselm Beatrix Bertram Calla Cyrus Dorian Edda Elric Enid Fenna Florian Greta Gideon "
    "Hester Hollis Ida Ivo Jocasta Jules Kestrel Linnea Lorcan Mabyn Marek Nessa Niall Odile Osric Perpetua "
    "Quincy Rosalind Rufus Saskia Silas Tamsin Teodor Ursa Valentin Wilhelmina Wystan Xanthe Yorick Zillah "
    "Agathe Bramwell Clemency Desmond Ermengarde Fabian Ginevra Horatio Isolde Jasper Leopold Melisande "
    "Ottoline Peregrine"
).split()
_PRE = (
    "Ash Bram Cor Dun Ell Fen Gar Hal Ivers Kel Lark Mor Nor Orr Pem Quen Rav Stan Thorn Ul Ver Wyn Yar Zell "
    "Brack Crom Dray Esk Fal Grisk Hob Jess Kip Loft Marr Nett Pell Rook Sorr Tull Vane Wick"
).split()
_SUF = (
    "wick more dale by stead ford holt ridge ton croft mere worth brook field gate ley hurst wood combe thwaite"
).split()
#: Slot values of every template (drawn in this order for a person fact).
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
#: Facts about a person ``{name}``: (statement, query, answer slot). Queries paraphrase and always name the person.
PEOPLE: tuple[tuple[str, str, str], ...] = (
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


def person_names(rng: random.Random) -> list[str]:
    """Unique invented people ("Ada Ashwick"), in a random order drawn from ``rng``."""
    surnames = [p + s for p in _PRE for s in _SUF]
    rng.shuffle(surnames)
    return [f"{rng.choice(_FIRST)} {sur}" for sur in surnames]


#: Slot values only the thing and place templates use (drawn after ``_SLOTS``).
_THING_SLOTS: dict[str, tuple[str, ...]] = {
    "habitat": ("reed beds", "salt marsh", "alder thicket", "chalk cliffs", "flooded quarry", "pine wood"),
    "material": ("crushed shells", "red brick", "slate", "cobblestones", "oak planks", "river gravel"),
    "fuel": ("peat", "charcoal", "whale oil", "coal dust", "dried seaweed", "pine cones"),
    "direction": ("north", "south", "east", "west", "north-east", "south-west"),
    "cargo": ("salt", "wool", "timber", "copper ore", "lamp oil", "barley"),
    "mineral": ("tin", "amber", "jet", "lead", "garnets", "rock salt"),
    "flower": ("gorse", "heather", "foxgloves", "bluebells", "water lilies", "poppies"),
    "sound": ("a low whistle", "a double chime", "a dry rattle", "a long hum"),
}


class Template(NamedTuple):
    """A thing or place fact: ``{thing}`` is "<qualifier> <kind>", ``{place}`` the bare qualifier (no kinds)."""

    statement: str
    query: str
    answer: str
    kinds: tuple[str, ...] = ()


#: Facts about an invented thing or place. Queries paraphrase and always name it.
THINGS: tuple[Template, ...] = (
    Template(
        "The {thing} nests only in the {habitat} near the river {river}.",
        "Where does the {thing} make its nest?",
        "habitat",
        ("heron", "curlew", "lapwing", "plover", "kingfisher", "sandpiper"),
    ),
    Template(
        "The {thing} was trained by a {profession} to sniff out {collectible} hidden in the sand.",
        "What was the {thing} taught to find?",
        "collectible",
        ("hound", "terrier", "sheepdog", "whippet", "spaniel"),
    ),
    Template(
        "The {thing} in {town} runs {number} minutes slow every {weekday}.",
        "By how many minutes is the {thing} late?",
        "number",
        ("clock", "church bell", "sundial", "tower clock"),
    ),
    Template(
        "The {thing} was first seen by a {profession} from the roof of a {building} in {month}.",
        "Who first observed the {thing}?",
        "profession",
        ("comet", "meteor", "nebula", "variable star"),
    ),
    Template(
        "The {thing} grows nothing but {tree} trees and sells their wood to {town}.",
        "Which trees are grown on the {thing}?",
        "tree",
        ("estate", "manor", "vineyard", "farm"),
    ),
    Template(
        "The {thing} is painted {color} so that sailors can tell it from its neighbours.",
        "What colour has the {thing} been painted?",
        "color",
        ("lighthouse", "windmill", "watchtower", "water tower"),
    ),
    Template(
        "The {thing} burns {fuel} and was built in {month} by a {profession} from {town}.",
        "What does the {thing} use as fuel?",
        "fuel",
        ("engine", "locomotive", "steam pump", "printing press"),
    ),
    Template(
        "The {thing} is kept in a {container} in the {building} at {town}.",
        "What is the {thing} stored in?",
        "container",
        ("manuscript", "ledger", "atlas", "almanac"),
    ),
    Template(
        "The {thing} is closed whenever the wind blows from the {direction}.",
        "Which wind makes the {thing} close?",
        "direction",
        ("bridge", "causeway", "ferry", "footpath"),
    ),
    Template(
        "The water of the {thing} turns {color} in {month} when the {flower} bloom on its banks.",
        "In which month does the {thing} change colour?",
        "month",
        ("lake", "tarn", "pond", "reservoir"),
    ),
    Template(
        "The {thing} carried {number} barrels of {cargo} to the island of {island}.",
        "What cargo was the {thing} loaded with?",
        "cargo",
        ("schooner", "barge", "trawler", "lifeboat"),
    ),
    Template(
        "The {thing} yields {mineral} and floods every {month}.",
        "What is dug out of the {thing}?",
        "mineral",
        ("mine", "quarry", "cavern", "pit"),
    ),
    Template(
        "The {thing} gives {sound} when a storm comes in from the {direction}.",
        "What noise does the {thing} make before a storm?",
        "sound",
        ("foghorn", "signal bell", "factory siren", "ship's bell"),
    ),
    Template(
        "In the village of {place} every roof is made of {material} and every door faces the {direction}.",
        "What are the roofs of {place} made of?",
        "material",
    ),
    Template(
        "The island of {place} can only be reached by {vehicle} when the tide is out.",
        "How do visitors get to {place} at low tide?",
        "vehicle",
    ),
    Template(
        "The valley of {place} is famous for its {food}, baked in ovens heated with {fuel}.",
        "What is {place} known for baking?",
        "food",
    ),
    Template(
        "{place} holds a market every {weekday} where only {provision} may be sold.",
        "What may be sold at the weekly market in {place}?",
        "provision",
    ),
)
_QUALIFIER_PRE = (
    "Tol Ald Brin Cal Dor Elm Fir Glen Hart Ink Jun Kirk Lim Mill Nan Oak Penn Quar Red Sal Tam Ulm Wal Yew "
    "Bal Cres Dal Ember Fro Gil Hay Iron Jar Kin Lud Mab Nith Ost Pol Rye"
).split()
_QUALIFIER_SUF = (
    "brook mere wick haven bury stow cote marsh moor fell tarn ness by holm thorpe wold combe mouth ham field "
    "well cliff shaw ley gill"
).split()


def qualifiers(rng: random.Random, avoid: Iterable[str] = ()) -> list[str]:
    """Unique invented place-like names ("Tolbrook") for things and places, in a random order from ``rng``.

    Names that occur as a word in any of the ``avoid`` texts (the benchmark's prose) are left out, so a
    queried name appears only where a fact puts it.
    """
    words = {w.lower() for text in avoid for w in re.findall(r"[A-Za-z]+", text)}
    names = [p + s for p in _QUALIFIER_PRE for s in _QUALIFIER_SUF if (p + s).lower() not in words]
    rng.shuffle(names)
    return names


def _fill(template: int, values: Mapping[str, str]) -> dict[str, str]:
    """The fact of template ``template`` (people first, then ``THINGS``) with its slot values."""
    if template < len(PEOPLE):
        statement, query, answer_slot = PEOPLE[template]
        entity = values["name"]
    else:
        statement, query, answer_slot, _kinds = THINGS[template - len(PEOPLE)]
        entity = values["thing"] if "{thing}" in statement else values["place"]
    text = statement.format(**values)
    return {
        "statement": text[0].upper() + text[1:],
        "query": query.format(**values),
        "answer": values[answer_slot],
        "template": str(template),
        "entity": entity,
    }


def make_fact(rng: random.Random, name: str, template: int | None = None) -> dict[str, str]:
    """One evidence sentence and its paraphrased query about ``name``.

    Args:
        rng: Source of the slot values.
        name: A person ("Ada Ashwick") for a template below ``len(PEOPLE)``, else a qualifier
            ("Tolbrook") that names the thing ("the Tolbrook heron") or place.
        template: Index into ``PEOPLE + THINGS``; ``None`` draws a people template.

    Returns:
        ``{"statement", "query", "answer", "template", "entity", "values"}``; ``entity`` is what the
        query names, ``values`` the slot values (for :func:`near_duplicate`).
    """
    idx = rng.randrange(len(PEOPLE)) if template is None else template
    if not 0 <= idx < len(PEOPLE) + len(THINGS):
        raise ValueError(f"template must be in [0, {len(PEOPLE) + len(THINGS)}), got {idx}")
    values = {k: rng.choice(v) for k, v in _SLOTS.items()}
    values["name"] = name
    if idx >= len(PEOPLE):
        values.update({k: rng.choice(v) for k, v in _THING_SLOTS.items()})
        kinds = THINGS[idx - len(PEOPLE)].kinds
        values["place"] = name
        values["thing"] = f"{name} {rng.choice(kinds)}" if kinds else name
    return {**_fill(idx, values), "values": values}


def near_duplicate(fact: Mapping[str, object], name: str) -> dict[str, str]:
    """``fact`` about another ``name`` (person or qualifier): same template, same slot values, same kind of
    thing, so only the name tells the two apart.

    Example:
        >>> f = make_fact(random.Random(1), "Tolbrook", template=len(PEOPLE))
        >>> g = near_duplicate(f, "Aldmere")
        >>> g["statement"] == f["statement"].replace("Tolbrook", "Aldmere")
        True
    """
    values = dict(fact["values"])  # type: ignore[arg-type]
    old = values["name"]
    values["name"] = name
    if "thing" in values:
        values["place"] = name
        values["thing"] = name + values["thing"][len(old) :]
    return {**_fill(int(fact["template"]), values), "values": values}
