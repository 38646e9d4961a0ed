"""The default-pipeline harness behind ``python -m research.default_pipeline``: what ships, measured through the store.

``system.py`` is the default pipeline as a system of the harness (ingest into the
embedded store, answer through ``qdrant_tools.search``, aggregate nodes to
passages, record costs); ``encoders.py`` builds the sweep's encoders from one
``EncoderSpec`` over the shared ``research.eval.memo`` cache; ``protocol.py`` sweeps
layouts on a held-apart split, chooses there and reports on another;
``report.py`` writes the tables and plots. ``peers.py`` holds what LlamaIndex
users run today as systems of the same harness; it imports LlamaIndex, so it is
imported only where asked for.
"""
