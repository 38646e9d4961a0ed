"""The Ray Serve deployments of ``posfair serve`` and the application that binds them.

One application, four deployments:

* ``embed`` and ``rerank``: one text encoder per replica (built from the config's
  :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`), its requests batched by a
  :class:`~llamaindex_posfair.serve.batching.Coalescer` (``docs/serving.md``, "Batching"), the
  call's texts cut into forward passes by :class:`~llamaindex_posfair.serve.worker.EncoderWorker`;
  after a large request the replica hands its freed memory back to the system (:func:`release_memory`);
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
import ctypes
import ctypes.util
import gc
from typing import Any

import numpy as np
from ray import serve

from llamaindex_posfair.serve.batching import Coalescer
from llamaindex_posfair.serve.config import ScalingConfig, ServeConfig
from llamaindex_posfair.serve.ingress import MAX_ONGOING, Ingress
from llamaindex_posfair.serve.worker import (
    EmbedJob,
    EmbedOutput,
    EncoderWorker,
    ImageJob,
    ImageWorker,
    RerankJob,
    job_cost,
    merge_embed_outputs,
    split_job,
)

#: Seconds a stopping replica waits for its requests, and the wait between its checks.
GRACEFUL_SHUTDOWN_S = 5.0


def _prepare_replica(scaling: ScalingConfig) -> None:
    """No progress bars of the model libraries in the server log (every replica loads its model at start), and
    torch's threads on a CPU replica: its CPUs."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if scaling.num_gpus == 0:
        torch.set_num_threads(max(1, int(scaling.num_cpus)))


#: Characters of text after which a replica hands freed memory back to the system.
RELEASE_AFTER_CHARS = 200_000


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the system (glibc ``malloc_trim``; the CUDA cache)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name:
        try:
            trim = ctypes.CDLL(name).malloc_trim
        except (OSError, AttributeError):  # not glibc
            trim = None
        if trim is not None:
            trim(0)
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class _EncoderReplica:
    """One loaded text encoder (the shared part of the embed and rerank deployments)."""

    def __init__(self, config: ServeConfig) -> None:
        _prepare_replica(config.scaling)
        self._worker = EncoderWorker(config.encoder, config.batching.token_budget)

    def _batched(self, fn: Any, config: ServeConfig) -> Coalescer:
        batching = config.batching
        self._call_chars = batching.call_chars
        self._read_chars = 0
        return Coalescer(fn, batching.max_batch_size, cost=job_cost, max_cost=batching.call_chars,
                         wait_s=batching.batch_wait_timeout_s)  # fmt: skip

    async def _submit(self, coalescer: Coalescer, job: Any, merge: Any) -> Any:
        """The job's result, ``merge``d from its parts' (a job longer than ``call_chars`` is cut into parts that
        take turns with other requests)."""
        try:
            [parts] = await coalescer.submit_groups([split_job(job, self._call_chars)])
            return merge(parts)
        finally:
            self._read_chars += job_cost(job)
            if self._read_chars >= RELEASE_AFTER_CHARS:
                self._read_chars = 0
                await asyncio.to_thread(release_memory)

    def card(self) -> Any:
        return self._worker.card()


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class EmbedDeployment(_EncoderReplica):
    """``embed``: :class:`EmbedJob` -> :class:`EmbedOutput` (``batch_size`` = requests in its model call)."""

    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config)
        self._coalescer = self._batched(self._embed_call, config)

    def _embed_call(self, jobs: list[EmbedJob]) -> list[EmbedOutput]:
        outputs = self._worker.embed_batch(jobs)
        for out in outputs:
            out.batch_size = len(jobs)
        return outputs

    async def embed(self, job: EmbedJob) -> EmbedOutput:
        return await self._submit(self._coalescer, job, merge_embed_outputs)


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class RerankDeployment(_EncoderReplica):
    """``rerank``: :class:`RerankJob` -> ``(cosine scores in input order, requests in its model call)``."""

    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config)
        self._coalescer = self._batched(self._rerank_call, config)

    def _rerank_call(self, jobs: list[RerankJob]) -> list[tuple[Any, int]]:
        return [(scores, len(jobs)) for scores in self._worker.rerank_batch(jobs)]

    async def rerank(self, job: RerankJob) -> tuple[Any, int]:
        return await self._submit(self._coalescer, job, _merge_scores)


def _merge_scores(parts: list[tuple[Any, int]]) -> tuple[Any, int]:
    return np.concatenate([scores for scores, _ in parts]), max(batch for _, batch in parts)


@serve.deployment(graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S, graceful_shutdown_wait_loop_s=0.5)
class ImageRerankDeployment:
    """``image-rerank``: one :class:`ImageJob` per forward pass -> slot probabilities."""

    def __init__(self, config: ServeConfig) -> None:
        _prepare_replica(config.image.scaling(config.scaling))
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
