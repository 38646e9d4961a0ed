"""``query_points_groups`` on a store without a native one: group a ranked list by a payload field.

The best ``limit`` groups are the first ``limit`` distinct values met going
down the ranking, and each group's hits are its first ``group_size`` points
there; so a prefix of the exact ranking gives the exact answer as soon as
those groups are full (:func:`group_hits` says when). The store re-queries
with a longer prefix until then, or until the ranking runs out.

Example:
    >>> from qdrant_client import models
    >>> hits = [models.ScoredPoint(id=i, version=0, score=1 - i / 10, payload={"doc": d})
    ...         for i, d in enumerate(["a", "b", "a", "c"])]
    >>> groups, complete = group_hits(hits, "doc", limit=2, group_size=2)
    >>> [(g.id, [h.id for h in g.hits]) for g in groups], complete
    ([('a', [0, 2]), ('b', [1])], False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qdrant_client import models


def group_values(payload: dict[str, Any] | None, key: str) -> list[str | int]:
    """The group ids of one point: the keyword or integer value(s) at ``key`` (dotted paths allowed)."""
    value: Any = payload or {}
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, (str, int)) and not isinstance(v, bool)]


def group_hits(
    hits: Sequence[models.ScoredPoint], group_by: str, limit: int, group_size: int
) -> tuple[list[models.PointGroup], bool]:
    """Group ranked ``hits``; return the best ``limit`` groups and whether each of them is full."""
    groups: dict[str | int, list[models.ScoredPoint]] = {}
    for hit in hits:
        for value in group_values(hit.payload, group_by):
            if value not in groups and len(groups) == limit:
                continue
            members = groups.setdefault(value, [])
            if len(members) < group_size:
                members.append(hit)
    complete = len(groups) == limit and all(len(m) == group_size for m in groups.values())
    return [models.PointGroup(id=k, hits=v) for k, v in groups.items()], complete


def payload_request(with_payload: Any, group_by: str) -> tuple[Any, Any]:
    """(selector to query with, so every hit carries ``group_by``; function trimming a payload back)."""
    top = group_by.split(".")[0]
    if with_payload is True:
        return True, lambda p: p
    if with_payload is False or with_payload is None:
        return models.PayloadSelectorInclude(include=[group_by]), lambda p: None
    if isinstance(with_payload, models.PayloadSelectorExclude):
        excluded = top in with_payload.exclude
        rest = [k for k in with_payload.exclude if k != top]
        return models.PayloadSelectorExclude(exclude=rest), (lambda p: _drop(p, top) if excluded else p)
    include = list(with_payload.include if isinstance(with_payload, models.PayloadSelectorInclude) else with_payload)
    wanted = top in include or group_by in include
    return models.PayloadSelectorInclude(include=[*include, group_by]), (lambda p: p if wanted else _drop(p, top))


def _drop(payload: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    return None if payload is None else {k: v for k, v in payload.items() if k != key}
