"""Position-annotated benchmarks: the in-memory form, the loaders, and the needle builder.

``data.py`` holds :class:`~research.eval.benchmarks.data.PositionBenchmark`
(what every loader returns), ``loaders.py`` reads the published formats and the
shipped benchmarks (``load_shipped``), and ``needle.py`` builds the PosQ-style
needle benchmark from public-domain prose; ``splits.py`` checks that a
selection split and a reported split share no query. Nothing here touches a model. The invented facts the needles
state are the package's (``llamaindex_posfair.eval.facts``): ``posfair audit`` plants them too.
"""
