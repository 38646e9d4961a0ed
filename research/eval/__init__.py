"""The evaluation harness and the calibration sweep: benchmarks, the embedding memo, retrieval systems, the sweep.

* ``benchmarks`` — the in-memory benchmark (``PositionBenchmark``), the loaders
  (the shipped benchmarks: ``load_shipped``) and the needle builder;
* ``memo`` — the one embedding cache (``VectorMemo``, ``MemoEncoder``);
* ``harness`` — retrieval systems and the runner that scores them per
  position group;
* ``sweep`` — the calibration sweep behind ``python -m research.eval`` (select
  on one split, report on another; tables and plots).

The command (``cli.py``) only turns flags into a ``sweep.protocol.Protocol``. The
sweep that chose the shipped layout (``research/default_pipeline``) builds on the
same harness. The metrics are the package's (``llamaindex_posfair.eval.metrics``),
the measure ``posfair audit`` reports too.

Shipped benchmarks (``load_shipped``): ``"needle-prose"`` (planted facts in
public-domain prose), ``"needle-manuals"`` (planted facts in GNU manuals, with
near-duplicate hard negatives) and ``"natural-docs"`` (hand-written questions on
Python and Vim documentation).

Example:
    >>> from research.eval import load_shipped
    >>> bench = load_shipped("needle-prose", "dev")
    >>> len(bench.queries), bench.group_counts()
    (180, {'begin': 60, 'middle': 60, 'end': 60})
"""

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
]
