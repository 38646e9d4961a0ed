"""Position-fairness evaluation harness: loaders, needle builder, metrics, systems, reports.

Math (``metrics``) is pure; ``systems`` and ``runner`` touch models;
``protocol`` selects settings on a held-apart split and reports on another;
``report`` writes tables and plots. The ``posfair eval`` command only turns
flags into a ``protocol.Protocol``. ``peers`` holds what LlamaIndex users run
today (splitters, sentence window, dense + BM25 fusion) as systems of the same
harness; it imports LlamaIndex, so it is not imported here.

Shipped benchmarks (``load_shipped``): ``"needle-prose"`` (planted facts) and
``"natural-docs"`` (hand-written questions on Python and Vim documentation).

Example:
    >>> from llamaindex_posfair.eval import load_shipped, metrics
    >>> bench = load_shipped("needle-prose", "dev")
    >>> len(bench.queries), bench.group_counts()
    (180, {'begin': 60, 'middle': 60, 'end': 60})
"""

from . import metrics
from .benchmarks.data import PositionBenchmark
from .benchmarks.loaders import (
    load_beir,
    load_benchmark,
    load_fineweb_posq,
    load_needle,
    load_posir,
    load_shipped,
    load_squad_posq,
)

__all__ = [
    "PositionBenchmark",
    "load_beir",
    "load_benchmark",
    "load_fineweb_posq",
    "load_needle",
    "load_posir",
    "load_shipped",
    "load_squad_posq",
    "metrics",
]
