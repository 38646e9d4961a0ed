"""The model side of a ``posfair serve`` replica, without Ray (so it is testable on its own):
:class:`EncoderWorker` (a text encoder answering batches of embed and rerank jobs) and :class:`ImageWorker`
(a multimodal model answering one image rerank job per forward pass). The Ray Serve deployments
(:mod:`.deployments`) feed these through a :class:`~.batching.Coalescer`.

Example:
    >>> worker = EncoderWorker(EncoderSpec(), token_budget=4096)           # doctest: +SKIP
    >>> [out] = worker.embed_batch([EmbedJob(("a query",), "query")])      # doctest: +SKIP
    >>> out.vectors.shape                                                  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llamaindex_posfair.encoders.spec import EncoderSpec
from llamaindex_posfair.integrations.node_scoring import (
    NODE_SCORING,
    ScoringSettings,
    combine_scores,
    scoring_texts,
    truncated_texts,
)
from llamaindex_posfair.serve.config import ImageModelConfig
from llamaindex_posfair.serve.schemas import TEXT_ROUTES, InputType, ModelCard, file_digest


@dataclass(frozen=True)
class EmbedJob:
    """The texts of one request, all of one kind."""

    texts: tuple[str, ...]
    role: InputType


@dataclass
class EmbedOutput:
    """Vectors ``[n, d]`` of one job, its token count, how many of its texts were truncated,
    and how many requests shared its batch (set by the deployment)."""

    vectors: np.ndarray
    tokens: int = 0
    truncated: int = 0
    batch_size: int = 1


@dataclass(frozen=True)
class RerankJob:
    query: str
    documents: tuple[str, ...]
    scoring: ScoringSettings = NODE_SCORING


@dataclass(frozen=True)
class ImageJob:
    """One image rerank request (decoded RGB images, in slot order) and its calibrator settings."""

    query: str
    images: tuple[Any, ...]
    method: str = "ours"
    top_k_layers: int = 2
    sharpen: float = 5.0
    variant: str = "linear"


def job_cost(job: EmbedJob | RerankJob) -> int:
    """What a job costs the model, in characters: its texts; a rerank document cut into sub-chunks counts
    ``2 + 64 // subchunk_tokens`` times (it is read whole and again in rows that are short and many)."""
    if isinstance(job, EmbedJob):
        return sum(len(t) for t in job.texts)
    factor = 1 if job.scoring.scoring == "node" else 2 + 64 // max(1, job.scoring.subchunks.max_tokens)
    return len(job.query) + factor * sum(len(d) for d in job.documents)


def split_job(job: EmbedJob | RerankJob, max_cost: int) -> list[Any]:
    """``job`` cut into consecutive parts of at most ``max_cost`` (:func:`job_cost`; one text at least each).

    Example:
        >>> [p.texts for p in split_job(EmbedJob(("aaa", "bb", "c"), "query"), 4)]
        [('aaa',), ('bb', 'c')]
    """
    items = job.texts if isinstance(job, EmbedJob) else job.documents
    parts: list[tuple[str, ...]] = []
    current: list[str] = []
    for text in items:
        if current and job_cost(_part(job, (*current, text))) > max_cost:
            parts.append(tuple(current))
            current = []
        current.append(text)
    parts.append(tuple(current))
    return [_part(job, part) for part in parts]


def _part(job: EmbedJob | RerankJob, items: tuple[str, ...]) -> Any:
    if isinstance(job, EmbedJob):
        return EmbedJob(items, job.role)
    return RerankJob(job.query, items, job.scoring)


def merge_embed_outputs(parts: Sequence[EmbedOutput]) -> EmbedOutput:
    """One job's output from the outputs of its parts (in order); ``batch_size``: the largest call's."""
    return EmbedOutput(
        np.concatenate([p.vectors for p in parts]),
        tokens=sum(p.tokens for p in parts),
        truncated=sum(p.truncated for p in parts),
        batch_size=max(p.batch_size for p in parts),
    )


class EncoderWorker:
    """One loaded text encoder answering batches of embed and rerank jobs.

    Args:
        spec: the encoder (pinned: a replica with other model files refuses to start).
        token_budget: padded tokens per forward pass.
        encoder: an already loaded encoder to use instead of loading ``spec`` (tests).

    Raises:
        ValueError / OSError: as :meth:`EncoderSpec.load`.
    """

    def __init__(self, spec: EncoderSpec, token_budget: int, encoder: Any = None) -> None:
        self.encoder = encoder if encoder is not None else spec.load()
        self.token_budget = int(token_budget)

    def card(self) -> ModelCard:
        """What ``GET /v1/models`` says about this encoder."""
        spec = self.encoder.spec
        return ModelCard(
            id=spec.model,
            kind="embedding",
            fingerprint=spec.fingerprint(),
            spec=spec.model_dump(mode="json"),
            dimension=int(self.encoder.dimension),
            max_length=int(self.encoder.max_length),
            routes=list(TEXT_ROUTES),
        )

    def embed_batch(self, jobs: Sequence[EmbedJob]) -> list[EmbedOutput]:
        """Embed every job's texts; each kind's texts share token-budgeted forward passes."""
        dim = int(self.encoder.dimension)
        outputs = [EmbedOutput(np.zeros((len(job.texts), dim), dtype=np.float32)) for job in jobs]
        for role in ("query", "document"):
            refs = [(j, t) for j, job in enumerate(jobs) if job.role == role for t in range(len(job.texts))]
            if refs:
                self._encode_kind(refs, [jobs[j].texts[t] for j, t in refs], role, outputs)
        return outputs

    def _encode_kind(
        self, refs: list[tuple[int, int]], texts: list[str], role: str, outputs: list[EmbedOutput]
    ) -> None:
        """Encode ``texts`` of one kind (``refs``: the job and position of each) into ``outputs``."""
        from qdrant_tools.encoding import token_budget_batches

        window = int(self.encoder.max_length)
        counts = self.encoder.count_tokens(texts)
        for (j, _), n in zip(refs, counts):
            outputs[j].tokens += min(n, window)
            outputs[j].truncated += int(n > window)
        encode = self.encoder.encode_queries if role == "query" else self.encoder.encode_documents
        for group in token_budget_batches([min(n, window) for n in counts], self.token_budget):
            vectors = encode([texts[i] for i in group])  # rows per pass: at most the spec's batch_size
            for row, i in zip(vectors, group):
                j, t = refs[i]
                outputs[j].vectors[t] = row

    def rerank_batch(self, jobs: Sequence[RerankJob]) -> list[np.ndarray]:
        """Each job's score of each of its documents (input order), as ``PosFairRerank`` scores them.

        Sub-chunks of every job (``scoring`` other than ``"node"``) share the batch's forward passes.
        """
        from qdrant_tools.encoding import spans_for

        n = len(jobs)
        spans_fn = spans_for(self.encoder)[0]
        to_embed = [
            scoring_texts(
                j.documents, j.scoring.scoring, j.scoring.subchunks, spans_fn, j.scoring.node_source,
                truncated=truncated_texts(self.encoder, j.documents) if j.scoring.scoring == "weighted" else (),
            )
            for j in jobs
        ]  # fmt: skip
        embedded = self.embed_batch(
            [EmbedJob((job.query,), "query") for job in jobs] + [EmbedJob(tuple(t.texts), "document") for t in to_embed]
        )
        return [
            combine_scores(
                embedded[i].vectors[0], embedded[n + i].vectors, to_embed[i], len(job.documents),
                job.scoring.scoring, job.scoring.node_weight,
            )
            for i, job in enumerate(jobs)
        ]  # fmt: skip


def load_image_scorer(spec: ImageModelConfig) -> Any:
    """The multimodal adapter an :class:`ImageModelConfig` names (``"tiny"``: a tiny random Qwen2-VL)."""
    import torch

    if spec.model == "tiny":
        from llamaindex_posfair.multimodal.tiny import build_tiny_adapter

        return build_tiny_adapter("qwen2_vl")
    from llamaindex_posfair.multimodal.qwen_adapter import QwenVLAdapter

    device = spec.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return QwenVLAdapter.from_pretrained(
        spec.model, dtype=getattr(torch, spec.dtype), device=device, max_pixels=spec.max_pixels
    )


class ImageWorker:
    """One multimodal model and its calibration state, answering image rerank jobs.

    Args:
        spec: the model and the calibration state file.
        scorer: an already loaded adapter to use instead of loading ``spec.model`` (tests).

    Raises:
        CalibrationMismatchError: the state was fitted for another model.
    """

    def __init__(self, spec: ImageModelConfig, scorer: Any = None) -> None:
        from llamaindex_posfair.multimodal.calibrator import CalibrationState

        self.scorer = scorer if scorer is not None else load_image_scorer(spec)
        self.state = None
        self.digest = None
        if spec.calibration is not None:
            self.state = CalibrationState.load(spec.calibration, model_id=self.scorer.model_id)
            self.digest = file_digest(spec.calibration)

    def card(self) -> ModelCard:
        return ModelCard(
            id=self.scorer.model_id,
            kind="image-rerank",
            fingerprint=self.digest,
            calibrated_sizes=self.state.sizes if self.state is not None else None,
            routes=["/v1/rerank-images"],
        )

    def rerank(self, job: ImageJob) -> list[float]:
        """The probability of each slot (input order), as ``PosFairImageRerank`` computes it.

        Raises:
            ValueError: a calibrated method without a calibration state, or an image count the
                state or the model does not cover.
        """
        from llamaindex_posfair.multimodal.scoring import make_calibrator, slot_probabilities

        if job.method != "vanilla" and self.state is None:
            raise ValueError(
                f"method={job.method!r} needs a calibration state, and this server has none; "
                "use method='vanilla' or start the server with --mm-calibration"
            )
        calibrator = None
        if self.state is not None:
            calibrator = make_calibrator(self.state, job.top_k_layers, job.sharpen, job.variant)
            self.state.table(len(job.images))
        probs = slot_probabilities(self.scorer, calibrator, job.method, job.query, list(job.images))
        return [float(p) for p in probs.tolist()]
