"""LlamaIndex ``MetadataFilters`` -> a Qdrant ``Filter``: the one place posfair translates filters.

Every reader of a posfair collection filters through here: :class:`PosFairVectorStore`
queries and deletes, :class:`PosFairRetriever` and ``posfair query --filter``. The
translation follows llama-index-vector-stores-qdrant, so a filter that works with
LlamaIndex's ``QdrantVectorStore`` works unchanged here; metadata keys are top-level
payload fields in both. Nested ``MetadataFilters`` and the ``AND`` / ``OR`` / ``NOT``
conditions nest as Qdrant sub-filters. A ``date`` / ``datetime`` in metadata is stored as an ISO
string (:func:`qdrant_tools.payload.json_metadata`), which a date range reads.

========================  ==============================================================
operator                  Qdrant condition
========================  ==============================================================
``==`` (EQ)               ``MatchValue``; a float: ``Range(gte=v, lte=v)``
``!=`` (NE)               ``MatchExcept([v])``; a float: ``must_not Range(gte=v, lte=v)``
``>`` ``>=`` ``<`` ``<=``  ``Range``; a date, datetime or ISO date string: ``DatetimeRange``
``in`` / ``nin``          ``MatchAny`` / ``MatchExcept`` (a list, or a comma-separated str)
``any`` / ``all``         ``MatchAny`` / one ``MatchValue`` per value (array fields)
``contains``              ``MatchValue`` (an array field holding the value)
``text_match``            ``MatchText`` (``text_match_insensitive`` too: Qdrant's word match,
                          is case-insensitive with a full-text index, exact without one)
``is_empty``              ``IsEmptyCondition``
========================  ==============================================================

Example:
    >>> from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
    >>> flt = to_qdrant_filter(MetadataFilters(filters=[MetadataFilter(key="lang", value="en")]))
    >>> flt.must[0].key, flt.must[0].match.value
    ('lang', 'en')
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from qdrant_client import models

from qdrant_tools import payload as P
from qdrant_tools.ids import node_point_id

__all__ = ["SUPPORTED_OPERATORS", "UnsupportedFilterError", "to_qdrant_filter"]


class UnsupportedFilterError(ValueError):
    """A filter this translation cannot express (an unknown operator or an ill-typed value)."""


def _values(f: MetadataFilter) -> list[Any]:
    value = f.value
    if isinstance(value, (list, tuple)):
        return list(value)
    return [v.strip() for v in str(value).split(",")] if isinstance(value, str) else [value]


def _iso(value: Any) -> dt.datetime | None:
    """``value`` as a datetime when it is one, a date (midnight) or an ISO date string; else ``None``."""
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time())
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def _range(f: MetadataFilter, bound: str) -> models.FieldCondition:
    when = _iso(f.value)
    if when is not None:
        return models.FieldCondition(key=f.key, range=models.DatetimeRange(**{bound: when}))
    if isinstance(f.value, bool) or not isinstance(f.value, (int, float)):
        raise UnsupportedFilterError(
            f"filter {f.key!r} {f.operator.value} {f.value!r}: a range needs a number or an ISO date string"
        )
    return models.FieldCondition(key=f.key, range=models.Range(**{bound: f.value}))


def _eq(f: MetadataFilter) -> Any:
    if isinstance(f.value, float):
        return models.FieldCondition(key=f.key, range=models.Range(gte=f.value, lte=f.value))
    return models.FieldCondition(key=f.key, match=models.MatchValue(value=f.value))


def _ne(f: MetadataFilter) -> Any:
    if isinstance(f.value, float):
        return models.Filter(must_not=[_eq(f)])
    return models.FieldCondition(key=f.key, match=models.MatchExcept(**{"except": [f.value]}))


_CONDITIONS: dict[FilterOperator, Callable[[MetadataFilter], Any]] = {
    FilterOperator.EQ: _eq,
    FilterOperator.NE: _ne,
    FilterOperator.GT: lambda f: _range(f, "gt"),
    FilterOperator.GTE: lambda f: _range(f, "gte"),
    FilterOperator.LT: lambda f: _range(f, "lt"),
    FilterOperator.LTE: lambda f: _range(f, "lte"),
    FilterOperator.IN: lambda f: models.FieldCondition(key=f.key, match=models.MatchAny(any=_values(f))),
    FilterOperator.NIN: lambda f: models.FieldCondition(key=f.key, match=models.MatchExcept(**{"except": _values(f)})),
    FilterOperator.ANY: lambda f: models.FieldCondition(key=f.key, match=models.MatchAny(any=_values(f))),
    FilterOperator.ALL: lambda f: models.Filter(
        must=[models.FieldCondition(key=f.key, match=models.MatchValue(value=v)) for v in _values(f)]
    ),
    FilterOperator.CONTAINS: lambda f: models.FieldCondition(key=f.key, match=models.MatchValue(value=f.value)),
    FilterOperator.TEXT_MATCH: lambda f: models.FieldCondition(key=f.key, match=models.MatchText(text=str(f.value))),
    FilterOperator.TEXT_MATCH_INSENSITIVE: lambda f: models.FieldCondition(
        key=f.key, match=models.MatchText(text=str(f.value))
    ),
    FilterOperator.IS_EMPTY: lambda f: models.IsEmptyCondition(is_empty=models.PayloadField(key=f.key)),
}

#: The LlamaIndex operators :func:`to_qdrant_filter` translates.
SUPPORTED_OPERATORS = tuple(op.value for op in _CONDITIONS)


def _condition(f: MetadataFilter) -> Any:
    convert = _CONDITIONS.get(f.operator)
    if convert is None:
        raise UnsupportedFilterError(
            f"filter operator {f.operator.value!r} (on {f.key!r}) is not supported; use one of {list(SUPPORTED_OPERATORS)}"
        )
    try:
        return convert(f)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UnsupportedFilterError):
            raise
        raise UnsupportedFilterError(f"filter {f.key!r} {f.operator.value} {f.value!r}: {exc}") from None


def _subfilter(filters: MetadataFilters) -> models.Filter:
    conditions = [
        _subfilter(f) if isinstance(f, MetadataFilters) else _condition(f)
        for f in filters.filters
        if not (isinstance(f, MetadataFilters) and not f.filters)
    ]
    if filters.condition == FilterCondition.OR:
        return models.Filter(should=conditions)
    if filters.condition == FilterCondition.NOT:
        return models.Filter(must_not=conditions)
    return models.Filter(must=conditions)


def to_qdrant_filter(
    filters: MetadataFilters | None = None,
    *,
    doc_ids: Sequence[str] | None = None,
    node_ids: Sequence[str] | None = None,
    extra: Sequence[Any] = (),
) -> models.Filter | None:
    """The Qdrant filter of ``filters``, restricted to ``doc_ids`` / ``node_ids`` and ``extra`` conditions.

    Args:
        filters: LlamaIndex metadata filters (``None``: none).
        doc_ids: only nodes of these documents (``ref_doc_id``, the payload's ``doc_id``).
        node_ids: only these LlamaIndex node ids (their points: :func:`qdrant_tools.ids.node_point_id`).
        extra: further Qdrant conditions, all required.

    Returns:
        ``None`` when nothing restricts the search.

    Raises:
        UnsupportedFilterError: an operator that is not in :data:`SUPPORTED_OPERATORS`, or a value it
            cannot take (names the filter and the fix).
    """
    must: list[Any] = list(extra)
    if filters is not None and filters.filters:
        top = _subfilter(filters)
        if filters.condition in (FilterCondition.AND, None):
            must.extend(top.must or [])  # an AND at the top needs no sub-filter
        else:
            must.append(top)
    if doc_ids:
        must.append(models.FieldCondition(key=P.DOC_ID, match=models.MatchAny(any=list(doc_ids))))
    if node_ids:
        must.append(models.HasIdCondition(has_id=[node_point_id(n) for n in node_ids]))
    return models.Filter(must=must) if must else None
