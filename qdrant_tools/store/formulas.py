"""``models.FormulaQuery`` -> Qdrant Edge ``Formula``: score-boosting expressions over prefetch scores and payload.

Qdrant Edge 0.9.0 evaluates formulas itself (``Formula`` / ``Expression``),
so every expression of qdrant-client translates one to one: constants,
variables (``"$score"``, ``"$score[i]"`` for the i-th prefetch, payload keys),
conditions (any filter condition: 1.0 if it holds, else 0.0), sum, product,
max, min, negation, division, powers, roots, logarithms, exponent, acosh,
abs, datetimes, geo distance and the lin / exp / gauss decays. ``defaults``
(values for variables a point lacks, e.g. ``{"$score[1]": 0.0}`` for a point
only the first prefetch found) pass through unchanged.

Example:
    >>> from qdrant_client import models
    >>> f = models.FormulaQuery(formula=models.SumExpression(sum=[
    ...     models.MultExpression(mult=[0.7, "$score[0]"]), models.MultExpression(mult=[0.3, "$score[1]"])]),
    ...     defaults={"$score[1]": 0.0})
    >>> type(edge_formula(f)).__name__
    'Formula'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import qdrant_edge as E
from qdrant_client import models

from qdrant_tools.store.errors import UnsupportedCallError
from qdrant_tools.store.filters import to_edge_condition

X = E.Expression

#: Expressions with a list of operands (the attribute holding them is the key).
_NARY: dict[type, tuple[str, Callable[[list[Any]], Any]]] = {
    models.SumExpression: ("sum", X.Sum),
    models.MultExpression: ("mult", X.Mult),
    models.MaxExpression: ("max", X.Max),
    models.MinExpression: ("min", X.Min),
}
#: Expressions with one operand.
_UNARY: dict[type, tuple[str, Callable[[Any], Any]]] = {
    models.NegExpression: ("neg", X.Neg),
    models.AbsExpression: ("abs", X.Abs),
    models.SqrtExpression: ("sqrt", X.Sqrt),
    models.ExpExpression: ("exp", X.Exp),
    models.Log10Expression: ("log10", X.Log10),
    models.LnExpression: ("ln", X.Ln),
    models.AcoshExpression: ("acosh", X.Acosh),
}
#: Decays: the attribute holding their parameters and Edge's kind.
_DECAY: dict[type, tuple[str, str]] = {
    models.LinDecayExpression: ("lin_decay", "Lin"),
    models.ExpDecayExpression: ("exp_decay", "Exp"),
    models.GaussDecayExpression: ("gauss_decay", "Gauss"),
}


def edge_formula(query: models.FormulaQuery) -> E.Formula:
    """The Edge ``Formula`` of a ``FormulaQuery`` (its expression tree and ``defaults``).

    Raises:
        UnsupportedCallError: an expression or condition Qdrant Edge lacks (e.g. ``SliceCondition``).
    """
    return E.Formula(edge_expression(query.formula), defaults=dict(query.defaults) if query.defaults else None)


def edge_expression(e: Any) -> Any:
    """One expression node and its operands, recursively.

    Raises:
        UnsupportedCallError: an expression or condition Qdrant Edge lacks.
    """
    if isinstance(e, bool):
        raise UnsupportedCallError(f"formula constant {e!r}: use 1.0 or 0.0, or a condition")
    if isinstance(e, (int, float)):
        return X.Constant(float(e))
    if isinstance(e, str):
        return X.Variable(e)
    kind = type(e)
    if kind in _NARY:
        attr, make = _NARY[kind]
        return make([edge_expression(x) for x in getattr(e, attr)])
    if kind in _UNARY:
        attr, make1 = _UNARY[kind]
        return make1(edge_expression(getattr(e, attr)))
    if kind in _DECAY:
        attr, name = _DECAY[kind]
        return _decay(getattr(E.DecayKind, name), getattr(e, attr))
    return _special(e)


def _decay(kind: Any, p: models.DecayParamsExpression) -> Any:
    target = edge_expression(p.target) if p.target is not None else None
    return X.Decay(kind, edge_expression(p.x), target=target, midpoint=p.midpoint, scale=p.scale)


def _special(e: Any) -> Any:
    """Division, power, datetimes, geo distance and conditions."""
    if isinstance(e, models.DivExpression):
        d = e.div
        return X.Div(edge_expression(d.left), edge_expression(d.right), by_zero_default=d.by_zero_default)
    if isinstance(e, models.PowExpression):
        return X.Pow(edge_expression(e.pow.base), edge_expression(e.pow.exponent))
    if isinstance(e, models.DatetimeExpression):
        return X.Datetime(e.datetime)
    if isinstance(e, models.DatetimeKeyExpression):
        return X.DatetimeKey(e.datetime_key)
    if isinstance(e, models.GeoDistance):
        origin = e.geo_distance.origin
        return X.GeoDistance(E.GeoPoint(lon=origin.lon, lat=origin.lat), e.geo_distance.to)
    try:
        return X.Condition(to_edge_condition(e))
    except UnsupportedCallError:
        raise UnsupportedCallError(
            f"formula expression {type(e).__name__} is not supported by the embedded Qdrant Edge store; "
            "use a Qdrant server (url=...) or open_store(path, engine='local')"
        ) from None
