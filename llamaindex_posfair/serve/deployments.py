"""The Ray Serve deployments of ``posfair serve`` and the application that binds them.

One application, four deployments:

* ``embed`` and ``rerank``: one text encoder per replica (built from the config's
  :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`), with dynamic batching:
  ``@serve.batch`` collects requests (waiting at most ``batch_wait_timeout_s``) and a
  :class:`~llamaindex_posfair.serve.batching.Coalescer` merges everything pending when
  the model is free into one call of up to ``max_batch_size`` requests (see there why
  ``@serve.batch`` alone keeps batches small under load); the call's texts are cut
  into forward passes within the token budget by
  :class:`~llamaindex_posfair.serve.worker.EncoderWorker`;
* ``image-rerank`` (only with an image model): one multimodal model per replica, one
  forward pass per request (a pass holds all of a request's images);
* ``ingress``: the HTTP API (:mod:`.ingress`), no model.

The model work runs in a worker thread, so a replica keeps answering health checks
and collecting the next batch while a batch computes.

Example:
    >>> from ray import serve                                          # doctest: +SKIP
    >>> serve.run(build_app(ServeConfig()), name="posfair")            # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray import serve

from llamaindex_posfair.serve.batching import Coalescer
from llamaindex_posfair.serve.config import ScalingConfig, ServeConfig
from llamaindex_posfair.serve.ingress import MAX_ONGOING, Ingress
from llamaindex_posfair.serve.worker import EmbedJob, EmbedOutput, EncoderWorker, ImageJob, ImageWorker, RerankJob

#: Seconds a stopping replica waits for its requests, and the wait between its checks.
GRACEFUL_SHUTDOWN_S = 5.0


def _quiet_loading() -> None:
    """No progress bars of the model libraries in the server log (every replica loads its model at start)."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _threads(scaling: ScalingConfig) -> None:
    import torch

    if scaling.num_gpus == 0:
        torch.set_num_threads(max(1, int(scaling.num_cpus)))


#: ``@serve.batch`` hands batches to the coalescer at once: it must not hold them behind a running one.
HANDOFF_BATCHES = 1024


class _EncoderReplica:
    """One loaded text encoder (the shared part of the embed and rerank deployments)."""

    def __init__(self, config: ServeConfig) -> None:
        _quiet_loading()
        _threads(config.scaling)
        self._worker = EncoderWorker(config.encoder, config.batching.token_budget)

    def _batched(self, method: Any, fn: Any, config: ServeConfig) -> Coalescer:
        method.set_max_batch_size(config.batching.max_batch_size)
        method.set_batch_wait_timeout_s(config.batching.batch_wait_timeout_s)
        return Coalescer(fn, config.batching.max_batch_size)

    def card(self) -> Any:
        return self._worker.card()


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class EmbedDeployment(_EncoderReplica):
    """``embed``: :class:`EmbedJob` -> :class:`EmbedOutput` (``batch_size`` = requests in its model call)."""

    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config)
        self._coalescer = self._batched(self.embed, self._embed_call, config)

    def _embed_call(self, jobs: list[EmbedJob]) -> list[EmbedOutput]:
        outputs = self._worker.embed_batch(jobs)
        for out in outputs:
            out.batch_size = len(jobs)
        return outputs

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01, max_concurrent_batches=HANDOFF_BATCHES)
    async def embed(self, jobs: list[EmbedJob]) -> list[EmbedOutput]:
        return await self._coalescer.submit(jobs)


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class RerankDeployment(_EncoderReplica):
    """``rerank``: :class:`RerankJob` -> ``(cosine scores in input order, requests in its model call)``."""

    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config)
        self._coalescer = self._batched(self.rerank, self._rerank_call, config)

    def _rerank_call(self, jobs: list[RerankJob]) -> list[tuple[Any, int]]:
        return [(scores, len(jobs)) for scores in self._worker.rerank_batch(jobs)]

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01, max_concurrent_batches=HANDOFF_BATCHES)
    async def rerank(self, jobs: list[RerankJob]) -> list[tuple[Any, int]]:
        return await self._coalescer.submit(jobs)


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class ImageRerankDeployment:
    """``image-rerank``: one :class:`ImageJob` per forward pass -> slot probabilities."""

    def __init__(self, config: ServeConfig) -> None:
        _quiet_loading()
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
        "max_ongoing_requests": MAX_ONGOING,
        "num_replicas": max(1, min(config.scaling.replicas // 2, 4)),
        "graceful_shutdown_timeout_s": GRACEFUL_SHUTDOWN_S,
        "graceful_shutdown_wait_loop_s": 0.5,
    }
    return Ingress.options(**ingress_opts).bind(config, embed, rerank, image)
