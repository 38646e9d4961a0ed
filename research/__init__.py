"""The lab: the sweeps, probes and decision scripts that chose the package's defaults, and their results.

Not part of the wheel. Everything here imports ``llamaindex_posfair`` and
``qdrant_tools``; nothing in them imports this. See ``research/README.md``.
"""
