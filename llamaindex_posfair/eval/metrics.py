"""Position-fairness retrieval metrics (pure: numpy only, no model, no I/O).

nDCG@k with linear gain (trec_eval's ``ndcg_cut``; queries without a relevant document are skipped), recall,
MRR, per-group means, their harmonic and arithmetic means, PSI ``1 - min/max`` (0 when every group scores 0) and
PSI inside length buckets: docs/evaluation.md, "Metrics". Ties in :func:`rank_scores` are broken pessimistically
(the less relevant document first, then corpus order), the package's one tie rule (``dump.metrics`` uses it too):
a tie never earns credit and the metric does not depend on the corpus order.

Example:
    >>> ranked = {"q1": ["d2", "d1"], "q2": ["d3"]}
    >>> qrels = {"q1": {"d1": 1}, "q2": {"d3": 1}}
    >>> round(ndcg_at_k(ranked["q1"], qrels["q1"], 10), 4)
    0.6309
    >>> s = group_scores({"q1": 0.5, "q2": 1.0}, {"q1": "begin", "q2": "end"})
    >>> s
    {'begin': 0.5, 'end': 1.0}
    >>> psi(s), round(harmonic_mean(s), 4), arithmetic_mean(s)
    (0.5, 0.6667, 0.75)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "GroupSummary",
    "arithmetic_mean",
    "bootstrap_harmonic_diff",
    "bucketed_psi",
    "group_scores",
    "harmonic_mean",
    "mrr_at_k",
    "ndcg_at_k",
    "per_query",
    "psi",
    "rank_scores",
    "recall_at_k",
    "summarize",
]


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}; nDCG@10 uses k=10")


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 10) -> float:
    """nDCG@k of one ranking with linear gain (trec_eval's ``ndcg_cut``); the package's only nDCG.

    Rank a score matrix with ``rank_scores(..., qrels)`` first so that ties follow
    the package's tie rule (pessimistic; see the module docstring).

    Args:
        ranked: Document ids, best first (only the first ``k`` count).
        relevant: Judged documents and their gains; gains ``<= 0`` are not relevant.
        k: Cut-off.

    Returns:
        A value in ``[0, 1]``; ``nan`` when ``relevant`` has no positive gain.

    Example:
        >>> ndcg_at_k(["a", "b"], {"a": 1}, 10)
        1.0
    """
    _check_k(k)
    gains = sorted((float(g) for g in relevant.values() if g > 0), reverse=True)
    if not gains:
        return float("nan")
    dcg = 0.0
    for i, doc in enumerate(ranked[:k]):
        g = relevant.get(doc, 0.0)
        if g > 0:
            dcg += g / math.log2(i + 2)
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))
    return dcg / idcg


def recall_at_k(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 100) -> float:
    """Share of the relevant documents found in the top ``k``.

    Returns:
        A value in ``[0, 1]``; ``nan`` when ``relevant`` has no positive gain.

    Example:
        >>> recall_at_k(["a", "b", "c"], {"c": 1, "z": 1}, 3)
        0.5
    """
    _check_k(k)
    rel = {d for d, g in relevant.items() if g > 0}
    return len(rel.intersection(ranked[:k])) / len(rel) if rel else float("nan")


def mrr_at_k(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document in the top ``k`` (0 if none).

    Returns:
        A value in ``[0, 1]``; ``nan`` when ``relevant`` has no positive gain.

    Example:
        >>> mrr_at_k(["a", "b", "c"], {"b": 1}, 10)
        0.5
    """
    _check_k(k)
    rel = {d for d, g in relevant.items() if g > 0}
    if not rel:
        return float("nan")
    return next((1.0 / (i + 1) for i, doc in enumerate(ranked[:k]) if doc in rel), 0.0)


def rank_scores(
    scores: np.ndarray,
    doc_ids: Sequence[str],
    k: int,
    qrels: Sequence[Mapping[str, float]] | None = None,
) -> list[list[str]]:
    """Top-``k`` document ids per row of a ``[n_queries, n_docs]`` score matrix.

    Exact, with the package's tie rule (module docstring): among documents with
    equal scores the less relevant one ranks first (gains from ``qrels``,
    unjudged = 0), remaining ties by document order. Metrics computed from the
    result are the lowest the tied scores allow and do not depend on the order
    of ``doc_ids``.

    Args:
        scores: ``[n_queries, n_docs]``, higher is better.
        doc_ids: The column ids.
        k: Ranks kept per row.
        qrels: One ``{doc id: gain}`` per row, for the tie rule. ``None`` breaks
            ties by document order only (rank for display, not for metrics).

    Returns:
        One list of at most ``k`` document ids per row.

    Raises:
        ValueError: ``scores`` does not have one column per doc id, ``qrels``
            does not have one entry per row, or ``k`` is not a positive integer.

    Example:
        >>> rank_scores(np.array([[0.1, 0.9, 0.9]]), ["a", "b", "c"], 2)
        [['b', 'c']]
        >>> rank_scores(np.array([[0.1, 0.9, 0.9]]), ["a", "b", "c"], 2, [{"b": 1}])
        [['c', 'b']]
    """
    _check_k(k)
    scores = np.asarray(scores)
    if scores.ndim != 2 or scores.shape[1] != len(doc_ids):
        raise ValueError(
            f"scores must have shape [n_queries, {len(doc_ids)}] (one column per doc id), got {scores.shape}"
        )
    gains = np.zeros(scores.shape, dtype=np.float64)
    if qrels is not None:
        if len(qrels) != scores.shape[0]:
            raise ValueError(f"qrels must hold one mapping per score row ({scores.shape[0]}), got {len(qrels)}")
        column = {d: j for j, d in enumerate(doc_ids)}
        for i, rel in enumerate(qrels):
            for d, g in rel.items():
                if d in column and g > 0:
                    gains[i, column[d]] = float(g)
    k = min(k, scores.shape[1])
    # lexsort is stable and sorts by the last key first: score descending, then gain ascending, then column
    order = np.lexsort((gains, -scores), axis=1)[:, :k]
    return [[doc_ids[j] for j in row] for row in order]


def per_query(
    ranked: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, float]],
    metric: str = "ndcg",
    k: int = 10,
) -> dict[str, float]:
    """Score every judged query that has a ranking.

    Args:
        ranked: Query id -> ranked document ids.
        qrels: Query id -> {document id: gain}.
        metric: ``"ndcg"``, ``"recall"`` or ``"mrr"``.
        k: Cut-off.

    Returns:
        Query id -> value; queries without a positive judgement are left out.
    """
    fn = {"ndcg": ndcg_at_k, "recall": recall_at_k, "mrr": mrr_at_k}.get(metric)
    if fn is None:
        raise ValueError(f'metric must be "ndcg", "recall" or "mrr", got {metric!r}')
    out: dict[str, float] = {}
    for qid, docs in ranked.items():
        value = fn(docs, qrels.get(qid, {}), k)
        if not math.isnan(value):
            out[qid] = value
    return out


def group_scores(
    values: Mapping[str, float],
    groups: Mapping[str, str],
    order: Sequence[str] | None = None,
) -> dict[str, float]:
    """Mean of per-query values inside each position group.

    Args:
        values: Query id -> metric value.
        groups: Query id -> group label; queries without a label are ignored.
        order: Group labels in display order; groups with no query are left out.
            ``None`` keeps first-seen order.

    Returns:
        Group label -> mean value.
    """
    buckets: dict[str, list[float]] = defaultdict(list)
    for qid, value in values.items():
        g = groups.get(qid)
        if g is not None:
            buckets[g].append(float(value))
    labels = list(order) if order is not None else list(buckets)
    return {g: float(np.mean(buckets[g])) for g in labels if buckets.get(g)}


def _values(scores: Mapping[str, float] | Iterable[float]) -> list[float]:
    vals = list(scores.values()) if isinstance(scores, Mapping) else list(scores)
    if not vals:
        raise ValueError("need at least one group score; no query fell into any position group")
    for v in vals:
        if not (v >= 0.0) or math.isnan(v):
            raise ValueError(f"group scores must be non-negative numbers, got {v!r}")
    return [float(v) for v in vals]


def harmonic_mean(scores: Mapping[str, float] | Iterable[float]) -> float:
    """Harmonic mean of group scores; ``0.0`` as soon as one group scores 0."""
    vals = _values(scores)
    return 0.0 if any(v == 0.0 for v in vals) else len(vals) / sum(1.0 / v for v in vals)


def arithmetic_mean(scores: Mapping[str, float] | Iterable[float]) -> float:
    """Arithmetic mean of group scores."""
    vals = _values(scores)
    return sum(vals) / len(vals)


def psi(scores: Mapping[str, float] | Iterable[float]) -> float:
    """Position Sensitivity Index ``1 - min/max`` (Zeng et al. 2025); lower is fairer.

    Returns ``0.0`` when every group scores 0 (ours: nothing to compare).
    """
    vals = _values(scores)
    hi = max(vals)
    return 0.0 if hi == 0.0 else 1.0 - min(vals) / hi


@dataclass(frozen=True)
class GroupSummary:
    """Per-group scores of one system and their summaries.

    Attributes:
        groups: Group label -> mean metric (e.g. nDCG@10).
        counts: Group label -> number of scored queries.
        harmonic: Harmonic mean over groups.
        arithmetic: Arithmetic mean over groups.
        psi: ``1 - min/max`` over groups.
        overall: Mean over all scored queries (micro average).
    """

    groups: dict[str, float]
    counts: dict[str, int]
    harmonic: float
    arithmetic: float
    psi: float
    overall: float
    extra: dict[str, float] = field(default_factory=dict)


def summarize(
    values: Mapping[str, float],
    groups: Mapping[str, str],
    order: Sequence[str] | None = None,
) -> GroupSummary:
    """Per-group means plus harmonic/arithmetic mean and PSI.

    Example:
        >>> s = summarize({"a": 1.0, "b": 0.5, "c": 0.0}, {"a": "x", "b": "x", "c": "y"})
        >>> s.groups, s.counts, s.psi, s.harmonic
        ({'x': 0.75, 'y': 0.0}, {'x': 2, 'y': 1}, 1.0, 0.0)
    """
    g = group_scores(values, groups, order)
    counts: dict[str, int] = defaultdict(int)
    for qid in values:
        if qid in groups:
            counts[groups[qid]] += 1
    scored = [v for q, v in values.items() if q in groups]
    return GroupSummary(
        groups=g,
        counts={k: counts[k] for k in g},
        harmonic=harmonic_mean(g),
        arithmetic=arithmetic_mean(g),
        psi=psi(g),
        overall=float(np.mean(scored)) if scored else float("nan"),
    )


def bucketed_psi(
    values: Mapping[str, float],
    position_bins: Mapping[str, str],
    length_buckets: Mapping[str, str],
    min_queries: int = 1,
) -> dict[str, float]:
    """PSI over position bins computed separately inside each length bucket (PosIR).

    Args:
        values: Query id -> metric value.
        position_bins: Query id -> relative-position bin label.
        length_buckets: Query id -> document-length bucket label.
        min_queries: Bins with fewer scored queries are left out of that bucket's PSI.

    Returns:
        Length bucket -> PSI (buckets whose bins are all too small are left out).

    Example:
        >>> bucketed_psi({"a": 1.0, "b": 0.5, "c": 0.2},
        ...              {"a": "0", "b": "1", "c": "0"}, {"a": "s", "b": "s", "c": "l"})
        {'s': 0.5, 'l': 0.0}
    """
    per_bucket: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for qid, v in values.items():
        if qid in position_bins and qid in length_buckets:
            per_bucket[length_buckets[qid]][position_bins[qid]].append(float(v))
    out: dict[str, float] = {}
    for bucket, bins in per_bucket.items():
        means = [float(np.mean(vs)) for vs in bins.values() if len(vs) >= min_queries]
        if means:
            out[bucket] = psi(means)
    return out


def bootstrap_harmonic_diff(
    values_a: Mapping[str, float],
    values_b: Mapping[str, float],
    groups: Mapping[str, str],
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Paired bootstrap of ``harmonic(a) - harmonic(b)`` over queries, resampled within groups.

    Args:
        values_a: Query id -> metric of system A.
        values_b: Query id -> metric of system B (same queries).
        groups: Query id -> position group.
        n_resamples: Bootstrap resamples.
        seed: RNG seed.
        confidence: Width of the percentile interval.

    Returns:
        ``(difference, low, high)`` of the harmonic-mean difference.

    Example:
        >>> a = {"q1": 1.0, "q2": 0.5}; b = {"q1": 1.0, "q2": 0.5}
        >>> bootstrap_harmonic_diff(a, b, {"q1": "x", "q2": "y"}, n_resamples=10)
        (0.0, 0.0, 0.0)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples}")
    by_group: dict[str, list[str]] = defaultdict(list)
    for q in values_a:
        if q in values_b and q in groups:
            by_group[groups[q]].append(q)
    if not by_group:
        raise ValueError("the two systems share no grouped query; score them on the same benchmark")
    labels = list(by_group)
    a = {g: np.array([values_a[q] for q in by_group[g]]) for g in labels}
    b = {g: np.array([values_b[q] for q in by_group[g]]) for g in labels}
    point = harmonic_mean([a[g].mean() for g in labels]) - harmonic_mean([b[g].mean() for g in labels])
    rng = np.random.default_rng(seed)
    diffs = np.empty(n_resamples)
    for i in range(n_resamples):
        ma, mb = [], []
        for g in labels:
            idx = rng.integers(0, len(a[g]), len(a[g]))
            ma.append(a[g][idx].mean())
            mb.append(b[g][idx].mean())
        diffs[i] = harmonic_mean(ma) - harmonic_mean(mb)
    tail = (1.0 - confidence) / 2 * 100
    lo, hi = np.percentile(diffs, [tail, 100 - tail])
    return float(point), float(lo), float(hi)
