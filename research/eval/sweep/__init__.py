"""The calibration sweep behind ``python -m research.eval``: choose a calibration on one split, report on another.

``protocol.py`` runs the grid of calibration settings (``grid.py``: basket
size, strength, layers) and the named variants (``variants.py``) on the selection split, picks
there, and scores the pick and the baselines on a held-apart split
(``benchmarks.splits.check_held_apart``); ``report.py`` writes the tables and
plots. The systems and the runner are ``research.eval.harness``'s; the command only
turns flags into a ``protocol.Protocol``.
"""
