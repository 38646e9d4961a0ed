"""Held-apart splits: settings chosen on one split are judged on another that shares no query.

Both evaluations (``python -m research.eval`` and ``python -m research.default_pipeline``) select on one
benchmark split and report on another; :func:`check_held_apart` refuses a
selection benchmark that shares a query with the reported one.

Example:
    >>> from research.eval.benchmarks.loaders import load_shipped
    >>> from research.eval.benchmarks.splits import check_held_apart
    >>> check_held_apart(load_shipped(split="dev"), load_shipped(split="test"))  # disjoint: no error
"""

from __future__ import annotations

from .data import PositionBenchmark

__all__ = ["HeldApartError", "check_held_apart"]


class HeldApartError(ValueError):
    """The selection benchmark shares queries with the reported one (selection would be in-sample)."""


def _examples(bench: PositionBenchmark) -> set[tuple[str, frozenset[str]]]:
    """Each query as (question text, texts of its relevant passages): ids may be renumbered per file."""
    out = set()
    for qid, text in bench.queries.items():
        relevant = frozenset(bench.corpus[d] for d, g in bench.qrels.get(qid, {}).items() if g > 0)
        out.add((text, relevant))
    return out


def check_held_apart(select: PositionBenchmark, report: PositionBenchmark) -> None:
    """Refuse a selection benchmark that shares any query with the reported one.

    A query is shared when the same question text has the same relevant
    passages in both (ids are not compared: loaders may number rows per file).

    Raises:
        HeldApartError: with the number of shared queries and the fix.

    Example:
        >>> from research.eval.benchmarks.loaders import load_shipped
        >>> check_held_apart(load_shipped(split="dev"), load_shipped(split="test"))  # disjoint: no error
    """
    shared = _examples(select) & _examples(report)
    if shared:
        raise HeldApartError(
            f"the selection data {select.name!r} shares {len(shared)} of the {len(report.queries)} reported "
            f"queries of {report.name!r}, so settings chosen there would be judged on the data they were chosen "
            f"on. Fix: select on a held-apart split (python -m research.eval: --select-split dev --split test) or skip "
            f"selection (--no-grid)"
        )
