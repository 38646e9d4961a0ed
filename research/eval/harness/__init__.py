"""The harness both evaluations run on: retrieval systems and the runner that scores them.

A system (``systems.py``: dense, segment average, rerank; ``chunking_systems.py``:
best chunk; ``multivector.py``: MaxSim over per-segment vectors in Qdrant;
``mix.py``: a score mix of two systems) turns a benchmark into a score
matrix through one ``EncodeCache``; ``runner.py`` runs systems on a benchmark
and scores them per position group with ``llamaindex_posfair.eval.metrics``; ``plots.py`` draws
nDCG@10 by position group. The calibration sweep (``research.eval.sweep``) builds on it, and so
does the layout sweep in ``research/default_pipeline`` (outside the package).
"""
