"""Query-time model workers on Ray Serve: ``posfair serve`` and its HTTP client.

* :mod:`.config` — :class:`ServeConfig` (one ``EncoderSpec`` plus batching, limits, scaling);
* :mod:`.schemas` — the wire formats (OpenAI embeddings, Cohere v1 rerank, image rerank, models);
* :mod:`.cohere` / :mod:`.tei` — Cohere's embed formats, TEI's embed, rerank and info;
* :mod:`.metrics` — the Prometheus metrics of ``GET /metrics``;
* :mod:`.worker` — the model side of a replica, without Ray;
* :mod:`.batching` — ``Coalescer``: one model call at a time, each taking what queued meanwhile;
* :mod:`.images` — the images of a ``/v1/rerank-images`` request (base64, data URIs, allowed URLs);
* :mod:`.deployments` / :mod:`.ingress` — the Ray Serve application;
* :mod:`.network` — where the processes listen (loopback checks, replica gRPC kept local);
* :mod:`.client` — :class:`ServeClient`, used by the LlamaIndex classes' ``endpoint=`` mode;
* :mod:`.runner` — start and stop (CLI, tests, bench).

Names load lazily, so importing this package imports neither Ray nor a model.
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
