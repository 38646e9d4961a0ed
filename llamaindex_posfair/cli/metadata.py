"""The metadata flags: ``--metadata KEY=VALUE`` (``ingest``) and ``--filter EXPR`` (``query``).

Both read values the same way (:func:`parse_value`); filters become LlamaIndex ``MetadataFilters``
(translated to Qdrant by :func:`llamaindex_posfair.integrations.filters.to_qdrant_filter`). The syntax
and the values' rules are in ``docs/cli.md`` ("Filters", "Metadata").

Example:
    >>> metadata_item("year=2021"), metadata_item('code="007"')
    (('year', 2021), ('code', '007'))
    >>> f = parse_filters(["year>=2020", "lang=en"])
    >>> [(x.key, x.operator.value, x.value) for x in f.filters]
    [('year', '>=', 2020), ('lang', '==', 'en')]
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from llamaindex_posfair.cli.options import CliError

#: ``--filter`` operators -> LlamaIndex ``FilterOperator`` values.
OPERATORS = {"=": "==", "==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<="}
_KEY = r"[A-Za-z_][\w.\-]*"
_EXPR = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>[=!<>~]+)\s*(?P<value>.*?)\s*$")
_ITEM = re.compile(rf"^\s*(?P<key>{_KEY})\s*=(?P<value>.*)$")


def parse_value(text: str) -> int | float | str:
    """A flag value: an integer, else a finite number, else text (``"..."``: always text, quotes removed).

    Example:
        >>> parse_value("3"), parse_value("2.5"), parse_value("true"), parse_value('"3"')
        (3, 2.5, 'true', '3')
    """
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if value == value and abs(value) != float("inf") else text


def metadata_item(text: str) -> tuple[str, Any]:
    """``--metadata KEY=VALUE`` as ``(key, value)`` (an argparse ``type``).

    Raises:
        argparse.ArgumentTypeError: no ``=`` or an invalid key.
    """
    m = _ITEM.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE with KEY a name such as team or doc.year, got {text!r}; e.g. --metadata team=docs"
        )
    return m["key"], parse_value(m["value"])


metadata_item.__name__ = "KEY=VALUE"


def metadata_dict(items: Sequence[tuple[str, Any]] | None) -> dict[str, Any]:
    """The ``--metadata`` items as a dict (a key given twice keeps its last value; no key is reserved:
    posfair's own payload fields live apart, :mod:`qdrant_tools.payload`)."""
    return dict(items or [])


def parse_filter(text: str) -> Any:
    """One ``--filter`` expression as a LlamaIndex ``MetadataFilter`` (or, for a number and ``=``/``!=``,
    the ``MetadataFilters`` that also match its text).

    Raises:
        CliError: not ``KEY OP VALUE``, an unknown operator, or a range on a value that is not a number
            or an ISO date.
    """
    from llama_index.core.vector_stores.types import FilterCondition, MetadataFilter, MetadataFilters

    m = _EXPR.match(text)
    if m is None or not m["value"]:
        raise CliError(f"--filter {text!r}: expected KEY OP VALUE, e.g. --filter lang=en or --filter 'year>=2020'")
    key, op, raw = m["key"], m["op"], m["value"]
    if op not in OPERATORS:
        raise CliError(f"--filter {text!r}: unknown operator {op!r}; use one of {', '.join(OPERATORS)}")
    value, operator = parse_value(raw), OPERATORS[op]
    if operator in (">", ">=", "<", "<=") and isinstance(value, str) and not _is_date(value):
        raise CliError(f"--filter {text!r}: {op} needs a number or an ISO date (e.g. 2024-01-31), got {raw!r}")
    if isinstance(value, str) or operator not in ("==", "!="):
        return MetadataFilter(key=key, operator=operator, value=value)
    either = [MetadataFilter(key=key, operator=operator, value=v) for v in (value, raw.strip())]
    return MetadataFilters(filters=either, condition=FilterCondition.OR if operator == "==" else FilterCondition.AND)


def _is_date(text: str) -> bool:
    import datetime as dt

    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def parse_filters(texts: Sequence[str] | None) -> Any:
    """The ``--filter`` expressions, ANDed, as LlamaIndex ``MetadataFilters`` (``None`` without any).

    Raises:
        CliError: see :func:`parse_filter`.
    """
    if not texts:
        return None
    from llama_index.core.vector_stores.types import FilterCondition, MetadataFilters

    return MetadataFilters(filters=[parse_filter(t) for t in texts], condition=FilterCondition.AND)


def qdrant_filter(texts: Sequence[str] | None) -> Any:
    """The Qdrant filter of the ``--filter`` expressions (``None`` without any), through ``to_qdrant_filter``.

    Raises:
        CliError: see :func:`parse_filter`, or a value the translation refuses.
    """
    filters = parse_filters(texts)
    if filters is None:
        return None
    from llamaindex_posfair.integrations.filters import UnsupportedFilterError, to_qdrant_filter

    try:
        return to_qdrant_filter(filters)
    except UnsupportedFilterError as exc:
        raise CliError(f"--filter: {exc}") from None


def add_metadata_arg(p: argparse.ArgumentParser) -> None:
    """``--metadata KEY=VALUE`` (repeatable): stored with every document of the run, filterable."""
    p.add_argument(
        "--metadata",
        action="append",
        type=metadata_item,
        default=None,
        metavar="KEY=VALUE",
        help="metadata stored with every document read (repeat the flag for several; filter on it with "
        "posfair query --filter); values: integer, number or text (true/false are text)",
    )


def add_filter_arg(p: argparse.ArgumentParser) -> None:
    """``--filter EXPR`` (repeatable, ANDed)."""
    p.add_argument(
        "--filter",
        action="append",
        default=None,
        metavar="EXPR",
        help="only nodes whose metadata match KEY OP VALUE, OP one of = != > >= < <= "
        "(e.g. lang=en, 'year>=2020', 'page_number<5'); repeat the flag to AND several",
    )
