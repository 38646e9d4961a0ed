"""The position-fairness measures ``posfair audit`` and ``posfair train-dump`` share.

* ``metrics`` — the one implementation of the retrieval metrics (pure numpy:
  nDCG, recall, per-group harmonic mean, PSI, paired bootstrap), imported by
  everything that scores;
* ``facts`` — the invented facts (names, templates) the audit plants in your
  documents, and the needle benchmarks are built from.

The evaluation harness, the calibration sweep and the benchmark loaders are lab
code: ``research/eval`` (``python -m research.eval``), outside the package.

Example:
    >>> from llamaindex_posfair.eval import metrics
    >>> round(metrics.ndcg_at_k(["b", "a"], {"a": 1}, k=10), 3)
    0.631
"""

from . import metrics

__all__ = ["metrics"]
