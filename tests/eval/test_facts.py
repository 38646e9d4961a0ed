"""Invented facts: near duplicates differ only by the name, names avoid the prose, templates are checked."""

from __future__ import annotations

import random

import pytest

from llamaindex_posfair.eval.facts import PEOPLE, THINGS, make_fact, near_duplicate, qualifiers


@pytest.mark.parametrize("template", range(len(PEOPLE) + len(THINGS)))
def test_every_template_names_its_entity_in_statement_and_query_and_states_the_answer(template):
    f = make_fact(random.Random(template), "Ada Ashwick" if template < len(PEOPLE) else "Tolbrook", template)
    assert f["entity"] in f["statement"] and f["entity"] in f["query"]
    assert f["answer"] in f["statement"] and f["query"] != f["statement"]


def test_a_near_duplicate_differs_only_by_the_name():
    thing = make_fact(random.Random(2), "Tolbrook", template=len(PEOPLE) + 1)
    twin = near_duplicate(thing, "Aldmere")
    assert twin["statement"] == thing["statement"].replace("Tolbrook", "Aldmere")
    assert twin["entity"].split()[1:] == thing["entity"].split()[1:]  # the same kind of thing
    person = make_fact(random.Random(2), "Ada Ashwick", template=3)
    assert near_duplicate(person, "Ivo Kelby")["statement"] == person["statement"].replace("Ada Ashwick", "Ivo Kelby")


def test_qualifiers_leave_out_words_of_the_prose():
    every = qualifiers(random.Random(0))
    avoided = qualifiers(random.Random(0), [f"We walked to {every[0]} and {every[1].lower()} yesterday."])
    assert len(set(every)) == len(every) and len(avoided) == len(every) - 2
    assert every[0] not in avoided and every[1] not in avoided


def test_an_unknown_template_is_refused():
    with pytest.raises(ValueError, match="template must be in"):
        make_fact(random.Random(0), "Tolbrook", template=len(PEOPLE) + len(THINGS))
