"""Fixtures of the encoder tests: a fresh export cache for the exported runtimes."""

from __future__ import annotations

import pytest


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A fresh cache folder (``POSFAIR_CACHE_DIR``), and a list of the ONNX exports made into it."""
    from llamaindex_posfair.encoders import runtime

    monkeypatch.setenv("POSFAIR_CACHE_DIR", str(tmp_path))
    exports = []
    real = runtime._export_model

    def counted(st, names, path):
        exports.append(path)
        real(st, names, path)

    monkeypatch.setattr(runtime, "_export_model", counted)
    return exports
