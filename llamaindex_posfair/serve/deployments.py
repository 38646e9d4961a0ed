"""The Ray Serve deployments of ``posfair serve`` and the application that binds them.

One application, four deployments:

* ``embed`` and ``rerank``: one text encoder per replica (built from the config's
  :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`), with dynamic batching
  (``@serve.batch``: up to ``max_batch_size`` requests, waiting at most
  ``batch_wait_timeout_s``; the batch's texts are cut into forward passes within the
  token budget by :class:`~llamaindex_posfair.serve.worker.EncoderWorker`);
* ``image-rerank`` (only with an image model): one multimodal model per replica, one
  forward pass per request (a pass holds all of a request's images);
* ``ingress``: the HTTP API (:mod:`.ingress`), no model.

The model work runs in a worker thread, so a replica keeps answering health checks
and queueing the next batch while a batch computes.

Example:
    >>> from ray import serve                                          # doctest: +SKIP
    >>> serve.run(build_app(ServeConfig()), name="posfair")            # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray import serve

from llamaindex_posfair.serve.config import ScalingConfig, ServeConfig
from llamaindex_posfair.serve.ingress import Ingress
from llamaindex_posfair.serve.worker import EmbedJob, EmbedOutput, EncoderWorker, ImageJob, ImageWorker, RerankJob

#: Seconds a stopping replica waits for its requests, and the wait between its checks.
GRACEFUL_SHUTDOWN_S = 5.0


def _threads(scaling: ScalingConfig) -> None:
    import torch

    if scaling.num_gpus == 0:
        torch.set_num_threads(max(1, int(scaling.num_cpus)))


class _EncoderReplica:
    """One loaded text encoder (the shared part of the embed and rerank deployments)."""

    def __init__(self, config: ServeConfig) -> None:
        _threads(config.scaling)
        self._worker = EncoderWorker(config.encoder, config.batching.token_budget)

    def card(self) -> Any:
        return self._worker.card()


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class EmbedDeployment(_EncoderReplica):
    """``embed``: batches of :class:`EmbedJob` -> :class:`EmbedOutput` (``batch_size`` = requests in the batch)."""

    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config)
        self.embed.set_max_batch_size(config.batching.max_batch_size)
        self.embed.set_batch_wait_timeout_s(config.batching.batch_wait_timeout_s)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)
    async def embed(self, jobs: list[EmbedJob]) -> list[EmbedOutput]:
        outputs = await asyncio.to_thread(self._worker.embed_batch, jobs)
        for out in outputs:
            out.batch_size = len(jobs)
        return outputs


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class RerankDeployment(_EncoderReplica):
    """``rerank``: batches of :class:`RerankJob` -> ``(cosine scores in input order, requests in the batch)``."""

    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config)
        self.rerank.set_max_batch_size(config.batching.max_batch_size)
        self.rerank.set_batch_wait_timeout_s(config.batching.batch_wait_timeout_s)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)
    async def rerank(self, jobs: list[RerankJob]) -> list[tuple[Any, int]]:
        scores = await asyncio.to_thread(self._worker.rerank_batch, jobs)
        return [(s, len(jobs)) for s in scores]


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class ImageRerankDeployment:
    """``image-rerank``: one :class:`ImageJob` per forward pass -> slot probabilities."""

    def __init__(self, config: ServeConfig) -> None:
        _threads(config.image.scaling(config.scaling))
        self._worker = ImageWorker(config.image)

    def card(self) -> Any:
        return self._worker.card()

    async def rerank(self, job: ImageJob) -> list[float]:
        return await asyncio.to_thread(self._worker.rerank, job)


def build_app(config: ServeConfig) -> Any:
    """The Ray Serve application of ``config`` (deploy it with ``serve.run``)."""
    batch = config.batching.max_batch_size
    opts = config.scaling.deployment_options(batch)
    embed = EmbedDeployment.options(name="embed", **opts).bind(config)
    rerank = RerankDeployment.options(name="rerank", **opts).bind(config)
    image = None
    if config.image is not None:
        image_opts = config.image.scaling(config.scaling).deployment_options(1)
        image = ImageRerankDeployment.options(name="image-rerank", **image_opts).bind(config)
    ingress_opts: dict[str, Any] = {
        "name": "ingress",
        "ray_actor_options": {"num_cpus": 0},
        "max_ongoing_requests": 1024,
        "num_replicas": max(1, min(config.scaling.replicas // 2, 4)),
        "graceful_shutdown_timeout_s": GRACEFUL_SHUTDOWN_S,
        "graceful_shutdown_wait_loop_s": 0.5,
    }
    return Ingress.options(**ingress_opts).bind(config, embed, rerank, image)
