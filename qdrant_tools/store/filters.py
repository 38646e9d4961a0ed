"""``qdrant_client.models.Filter`` -> ``qdrant_edge.Filter``, condition by condition.

Every condition qdrant-client offers is translated, with one refusal: a
``MatchValue`` on a bool matches nothing in Qdrant Edge 0.9.0 (a Python bool
reaches it as an integer), so it raises :class:`UnsupportedCallError` instead
of silently returning no points. posfair's own filters use keyword and
integer fields only.

Example:
    >>> from qdrant_client import models
    >>> flt = models.Filter(must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value="a.md"))])
    >>> type(to_edge_filter(flt)).__name__
    'Filter'
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import qdrant_edge as E
from qdrant_client import models

from qdrant_tools.store.errors import UnsupportedCallError
from qdrant_tools.store.ids import to_edge_id


def _as_list(value: Any) -> list[Any] | None:
    if value is None:
        return None
    return list(value) if isinstance(value, list) else [value]


def to_edge_filter(flt: models.Filter | None) -> E.Filter | None:
    """The Edge filter of ``flt`` (None stays None).

    Raises:
        UnsupportedCallError: a bool ``MatchValue`` or a condition Edge lacks.
    """
    if flt is None:
        return None
    if not isinstance(flt, models.Filter):
        raise UnsupportedCallError(
            f"filters must be qdrant_client.models.Filter, got {type(flt).__name__}; gRPC filters are server-only"
        )

    def conditions(value: Any) -> list[Any] | None:
        items = _as_list(value)
        return None if items is None else [to_edge_condition(c) for c in items]

    min_should = None
    if flt.min_should is not None:
        min_should = E.MinShould(
            conditions=[to_edge_condition(c) for c in flt.min_should.conditions],
            min_count=flt.min_should.min_count,
        )
    return E.Filter(
        must=conditions(flt.must),
        should=conditions(flt.should),
        must_not=conditions(flt.must_not),
        min_should=min_should,
    )


def to_edge_condition(cond: Any) -> Any:
    """One condition (field, id, vector, emptiness, nested, or a whole sub-filter)."""
    if isinstance(cond, models.Filter):
        return to_edge_filter(cond)
    if isinstance(cond, models.FieldCondition):
        return _field_condition(cond)
    if isinstance(cond, models.HasIdCondition):
        return E.HasIdCondition({to_edge_id(i) for i in cond.has_id})
    if isinstance(cond, models.HasVectorCondition):
        return E.HasVectorCondition(cond.has_vector)
    if isinstance(cond, models.IsEmptyCondition):
        return E.IsEmptyCondition(cond.is_empty.key)
    if isinstance(cond, models.IsNullCondition):
        return E.IsNullCondition(cond.is_null.key)
    if isinstance(cond, models.NestedCondition):
        return E.NestedCondition(cond.nested.key, to_edge_filter(cond.nested.filter))
    raise UnsupportedCallError(f"filter condition {type(cond).__name__} is not supported by the embedded store")


def _field_condition(cond: models.FieldCondition) -> E.FieldCondition:
    return E.FieldCondition(
        key=cond.key,
        match=_match(cond.key, cond.match),
        range=_range(cond.range),
        geo_bounding_box=_geo_box(cond.geo_bounding_box),
        geo_radius=_geo_radius(cond.geo_radius),
        geo_polygon=_geo_polygon(cond.geo_polygon),
        values_count=_values_count(cond.values_count),
        is_empty=cond.is_empty,
        is_null=cond.is_null,
    )


def _match_value(key: str, m: models.MatchValue) -> Any:
    if isinstance(m.value, bool):
        raise UnsupportedCallError(
            f"filter on bool value {m.value!r} of field {key!r}: Qdrant Edge 0.9.0 matches no point for a bool "
            "MatchValue; store the flag as a keyword ('true'/'false') or an integer (0/1) and match that, or use "
            "open_store(path, engine='local') / a Qdrant server"
        )
    return E.MatchValue(m.value)


_MATCHES: dict[type, Callable[[str, Any], Any]] = {
    models.MatchValue: _match_value,
    models.MatchAny: lambda key, m: E.MatchAny(list(m.any)),
    models.MatchExcept: lambda key, m: E.MatchExcept(list(m.except_)),
    models.MatchText: lambda key, m: E.MatchText(m.text),
    models.MatchTextAny: lambda key, m: E.MatchTextAny(m.text_any),
    models.MatchPhrase: lambda key, m: E.MatchPhrase(m.phrase),
}


def _match(key: str, m: Any) -> Any:
    if m is None:
        return None
    convert = _MATCHES.get(type(m))
    if convert is None:
        raise UnsupportedCallError(f"match {type(m).__name__} on field {key!r} is not supported by the embedded store")
    return convert(key, m)


def _iso(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.isoformat()


def _range(r: Any) -> Any:
    if r is None:
        return None
    if isinstance(r, models.DatetimeRange):
        return E.RangeDateTime(gte=_iso(r.gte), gt=_iso(r.gt), lte=_iso(r.lte), lt=_iso(r.lt))
    return E.RangeFloat(gte=r.gte, gt=r.gt, lte=r.lte, lt=r.lt)


def _values_count(v: models.ValuesCount | None) -> Any:
    return None if v is None else E.ValuesCount(lt=v.lt, gt=v.gt, lte=v.lte, gte=v.gte)


def _geo_point(p: models.GeoPoint) -> E.GeoPoint:
    return E.GeoPoint(lon=p.lon, lat=p.lat)


def _geo_box(b: models.GeoBoundingBox | None) -> Any:
    return None if b is None else E.GeoBoundingBox(_geo_point(b.top_left), _geo_point(b.bottom_right))


def _geo_radius(r: models.GeoRadius | None) -> Any:
    return None if r is None else E.GeoRadius(_geo_point(r.center), r.radius)


def _geo_polygon(p: models.GeoPolygon | None) -> Any:
    if p is None:
        return None
    interiors = [[_geo_point(x) for x in ring.points] for ring in p.interiors] if p.interiors else None
    return E.GeoPolygon([_geo_point(x) for x in p.exterior.points], interiors)
