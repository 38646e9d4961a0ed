"""Query-time model workers on Ray Serve: ``posfair serve`` and its HTTP client (:class:`ServeClient`).

Its modules, one line each, are in ``docs/architecture.md`` (**serve**). Names load lazily, so importing
this package imports neither Ray nor a model.
"""

from __future__ import annotations

from llamaindex_posfair._lazy import lazy_exports

_EXPORTS = {
    "ServeConfig": "llamaindex_posfair.serve.config",
    "ApiConfig": "llamaindex_posfair.serve.config",
    "BatchingConfig": "llamaindex_posfair.serve.config",
    "RequestLimits": "llamaindex_posfair.serve.config",
    "ScalingConfig": "llamaindex_posfair.serve.config",
    "ImageModelConfig": "llamaindex_posfair.serve.config",
    "TOKEN_ENV": "llamaindex_posfair.serve.config",
    "ServeClient": "llamaindex_posfair.serve.client",
    "ServeError": "llamaindex_posfair.serve.client",
    "ServeMismatchError": "llamaindex_posfair.serve.client",
    "build_app": "llamaindex_posfair.serve.deployments",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
