"""The --metadata and --filter values (llamaindex_posfair.cli.metadata)."""

from __future__ import annotations

import argparse

import pytest
from llama_index.core.vector_stores.types import FilterCondition, MetadataFilters

from llamaindex_posfair.cli.metadata import metadata_dict, metadata_item, parse_filter, parse_value, qdrant_filter
from llamaindex_posfair.cli.options import CliError


@pytest.mark.parametrize(
    ("text", "value"),
    [("2021", 2021), ("-3", -3), ("2.5", 2.5), ("en", "en"), ("true", "true"), ('"2021"', "2021"), ("nan", "nan")],
)
def test_values_are_integers_numbers_or_text(text, value):
    assert parse_value(text) == value and type(parse_value(text)) is type(value)


def test_metadata_items_split_at_the_first_equals_sign():
    assert metadata_item("note=a=b") == ("note", "a=b")
    with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
        metadata_item("no-equals-sign")


def test_no_metadata_key_is_reserved():
    assert metadata_dict([("text", "x"), ("doc_id", "y"), ("page_label", "iv")]) == {
        "text": "x",
        "doc_id": "y",
        "page_label": "iv",
    }


@pytest.mark.parametrize(
    ("expr", "op", "value"),
    [("year>=2020", ">=", 2020), ("year > 2020", ">", 2020), ("page_number<5", "<", 5), ("n<=1.5", "<=", 1.5),
     ("lang=en", "==", "en"), ("lang==en", "==", "en"), ("lang!=en", "!=", "en"), ("d>=2024-01-31", ">=", "2024-01-31")],
)  # fmt: skip
def test_filter_expressions_become_metadata_filters(expr, op, value):
    f = parse_filter(expr)
    assert (f.operator.value, f.value) == (op, value)


def test_a_number_compared_for_equality_also_matches_its_text():
    f = parse_filter("page_label=3")
    assert isinstance(f, MetadataFilters) and f.condition == FilterCondition.OR
    assert [(x.operator.value, x.value) for x in f.filters] == [("==", 3), ("==", "3")]


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("year=>2020", "unknown operator '=>'; use one of =, ==, !=, >, >=, <, <="),
        ("year~2020", "unknown operator '~'"),
        ("year>=soon", ">= needs a number or an ISO date"),
        ("=2020", "expected KEY OP VALUE"),
        ("year>=", "expected KEY OP VALUE"),
    ],
)
def test_a_bad_filter_is_a_clear_error(expr, message):
    with pytest.raises(CliError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_filter(expr)


def test_repeated_filters_are_anded_in_one_qdrant_filter():
    flt = qdrant_filter(["lang=en", "year>=2020"])
    assert [c.key for c in flt.must] == ["lang", "year"] and flt.must[1].range.gte == 2020
    assert qdrant_filter(None) is None
