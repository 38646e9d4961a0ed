"""Prometheus metrics of one ingress replica (``GET /metrics``, text exposition format).

The metrics and their labels are listed in ``docs/serving.md`` ("Operations"); requests count by route
template (paths that match no route count as ``"other"``, so scanners add no series). Each ingress replica counts its own requests, in its own registry (so a test or a second
application in one process never collides with Ray's metrics).

Example:
    >>> m = ServeMetrics()
    >>> m.observe_request("/v1/embeddings", "POST", 200, 0.01)
    >>> b'posfair_requests_total{method="POST",route="/v1/embeddings",status="200"} 1.0' in m.render()[0]
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: Seconds: latency buckets from a cached query on a GPU to a long document batch on a CPU.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServeMetrics:
    """The ingress replica's counters, histograms and gauges, in a registry of their own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("posfair_requests", "HTTP requests.", ["route", "method", "status"], registry=r)
        self.latency = Histogram(
            "posfair_request_duration_seconds", "HTTP request latency.", ["route"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.batch = Histogram(
            "posfair_batch_size", "Requests sharing a model call.", ["deployment"], buckets=BATCH_BUCKETS, registry=r
        )
        self.queue = Gauge("posfair_queue_depth", "Requests sent to a deployment, not yet answered.", ["deployment"],
                           registry=r)  # fmt: skip
        self.texts = Counter("posfair_texts_embedded", "Texts embedded.", ["kind"], registry=r)
        self.tokens = Counter("posfair_tokens_embedded", "Tokens embedded (after truncation).", ["kind"], registry=r)

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route=route, method=method, status=str(status)).inc()
        self.latency.labels(route=route).observe(seconds)

    def observe_batch(self, deployment: str, batch_size: int) -> None:
        self.batch.labels(deployment=deployment).observe(batch_size)

    def observe_embedded(self, kind: str, texts: int, tokens: int) -> None:
        self.texts.labels(kind=kind).inc(texts)
        if tokens:
            self.tokens.labels(kind=kind).inc(tokens)

    @contextlib.contextmanager
    def in_flight(self, deployment: str) -> Iterator[None]:
        """Count a call to ``deployment`` in ``posfair_queue_depth`` while it runs."""
        gauge = self.queue.labels(deployment=deployment)
        gauge.inc()
        try:
            yield
        finally:
            gauge.dec()

    def render(self) -> tuple[bytes, str]:
        """``(the exposition text, its content type)``."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
