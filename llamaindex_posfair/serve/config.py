"""``ServeConfig``: everything a ``posfair serve`` application is built from (frozen, validated, picklable).

The text encoder is one :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`
(pinned by the driver, so every replica refuses model files that differ); the
rest groups what is specific to serving: dynamic batching, request limits,
replicas and resources, and the optional multimodal image reranker.

Example:
    >>> from llamaindex_posfair.encoders.spec import EncoderSpec
    >>> cfg = ServeConfig(encoder=EncoderSpec(), scaling=ScalingConfig(replicas=2))
    >>> cfg.scaling.deployment_options()["num_replicas"]
    2
    >>> cfg.batching.max_batch_size
    32
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llamaindex_posfair.encoders.spec import EncoderSpec

#: Environment variable holding the bearer token (server: required token; client: token sent).
TOKEN_ENV = "POSFAIR_SERVE_TOKEN"


def token_digest(token: str) -> str:
    """SHA-256 hex digest of a bearer token (the server keeps only this)."""
    return hashlib.sha256(token.encode()).hexdigest()


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())


class BatchingConfig(_Frozen):
    """Dynamic batching of the text deployments (their :class:`~llamaindex_posfair.serve.batching.Coalescer`).

    Args:
        max_batch_size: requests merged into one batch (1 = no batching).
        batch_wait_timeout_s: how long a batch waits to fill after its first request.
        token_budget: padded tokens per forward pass (rows x longest row): a batch is cut into
            passes within this budget, so one long text does not blow the memory of a whole batch.
        call_chars: characters of text per model call: a longer request is cut into parts that
            take turns with other requests' parts, so a short request waits for one call at most
            rather than for a whole long request.
    """

    max_batch_size: int = Field(32, gt=0, description="Requests merged into one batch (1 = no batching).")
    batch_wait_timeout_s: float = Field(0.01, ge=0, description="Seconds a batch waits to fill.")
    token_budget: int = Field(16384, gt=0, description="Padded tokens per forward pass.")
    call_chars: int = Field(4096, ge=1000, description="Characters of text per model call (long requests take turns).")


class RequestLimits(_Frozen):
    """What one request may carry; larger requests get a 400 (413: body or text budget) naming the limit.

    Args:
        max_body_bytes: bytes of a request body (413 above; checked before the body is parsed).
        max_request_chars: characters of text per request, all texts together (query, inputs,
            documents; 413 above).
        max_inputs: texts per ``/v1/embeddings`` request.
        max_documents: documents per ``/v1/rerank`` request.
        max_text_chars: characters per text (query, input or document).
        max_images: images per ``/v1/rerank-images`` request (the model's own limit may be lower).
        max_image_bytes: bytes per image file.
        max_image_pixels: pixels an image may declare (width x height), checked in its header before
            it is decoded.
        allow_image_urls: let ``/v1/rerank-images`` fetch ``http(s)://`` images (off: base64 only).
        image_url_timeout_s: seconds per image fetch.
    """

    max_body_bytes: int = Field(32 * 2**20, ge=1024, description="Bytes of a request body.")
    max_request_chars: int = Field(1_000_000, gt=0, description="Characters of text per request, all texts together.")
    max_inputs: int = Field(512, gt=0, description="Texts per /v1/embeddings request.")
    max_documents: int = Field(1000, gt=0, description="Documents per /v1/rerank request.")
    max_text_chars: int = Field(100_000, gt=0, description="Characters per text.")
    max_images: int = Field(12, ge=2, description="Images per /v1/rerank-images request.")
    max_image_bytes: int = Field(20_000_000, gt=0, description="Bytes per image file.")
    max_image_pixels: int = Field(
        40_000_000, gt=0, description="Pixels an image may declare (checked before decoding)."
    )
    allow_image_urls: bool = Field(False, description="Fetch http(s) image URLs (opt-in; base64 only otherwise).")
    image_url_timeout_s: float = Field(10.0, gt=0, description="Seconds per image fetch.")


class ScalingConfig(_Frozen):
    """Replicas and resources of each model deployment (embed, rerank, image rerank).

    Args:
        replicas: fixed replica count (ignored when ``min_replicas``/``max_replicas`` are set).
        min_replicas / max_replicas: autoscaling range (both or neither).
        num_gpus: GPUs per replica (fractions pack replicas on one GPU; 0 = CPU).
        num_cpus: CPUs per replica (also its torch threads on CPU).
        target_ongoing_requests: autoscaling target per replica; ``None`` = the max batch size.

    Raises:
        pydantic.ValidationError: only one of min/max given, or min > max.
    """

    replicas: int = Field(1, gt=0, description="Fixed replicas per model deployment.")
    min_replicas: int | None = Field(None, ge=0, description="Autoscaling: fewest replicas.")
    max_replicas: int | None = Field(None, gt=0, description="Autoscaling: most replicas.")
    num_gpus: float = Field(0.0, ge=0, description="GPUs per replica (0 = CPU).")
    num_cpus: float = Field(1.0, ge=0, description="CPUs per replica.")
    target_ongoing_requests: float | None = Field(None, gt=0, description="Autoscaling target per replica.")

    @model_validator(mode="after")
    def _check_range(self) -> ScalingConfig:
        lo, hi = self.min_replicas, self.max_replicas
        if (lo is None) != (hi is None):
            raise ValueError(
                f"min_replicas and max_replicas go together, got min_replicas={lo}, max_replicas={hi}; "
                "pass both for autoscaling, or neither (fixed replicas)"
            )
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_replicas={lo} must not exceed max_replicas={hi}")
        return self

    @property
    def autoscaling(self) -> bool:
        return self.min_replicas is not None

    def deployment_options(self, max_batch_size: int = 1) -> dict[str, Any]:
        """Ray Serve ``.options(...)`` of a model deployment."""
        actor: dict[str, Any] = {"num_cpus": self.num_cpus}
        if self.num_gpus > 0:
            actor["num_gpus"] = self.num_gpus
        opts: dict[str, Any] = {"ray_actor_options": actor, "max_ongoing_requests": max(8, 2 * max_batch_size)}
        if self.autoscaling:
            opts["autoscaling_config"] = {
                "min_replicas": self.min_replicas,
                "max_replicas": self.max_replicas,
                "target_ongoing_requests": self.target_ongoing_requests or max_batch_size,
            }
        else:
            opts["num_replicas"] = self.replicas
        return opts


class ApiConfig(_Frozen):
    """What the HTTP API accepts and shows beyond the models.

    Args:
        accept_any_model: answer requests whose ``model`` names another model (clients that insist
            on their own names, e.g. ``text-embedding-3-small``) with the served one; the ingress
            logs the first such name once. Off: such a request gets a 400 naming the served model.
        docs: serve the OpenAPI schema (``/openapi.json``) and its pages (``/docs``, ``/redoc``).
    """

    accept_any_model: bool = Field(False, description="Serve requests naming any model with the served one.")
    docs: bool = Field(True, description="Serve /openapi.json, /docs and /redoc.")


class ImageModelConfig(_Frozen):
    """The multimodal model of the ``/v1/rerank-images`` deployment.

    Args:
        model: a Qwen2-VL / Qwen2.5-VL folder or hub id, or ``"tiny"`` (random, offline; tests).
        calibration: path of a fitted calibration state (``.safetensors``), readable on every
            replica's node; ``None`` allows only ``method="vanilla"``.
        device: torch device; ``None`` = CUDA when the replica has a GPU, else CPU.
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        max_pixels: image resolution cap of the image processor.
    """

    model: str = Field(description="Qwen2-VL / Qwen2.5-VL folder or hub id, or 'tiny'.")
    calibration: str | None = Field(None, description="Fitted calibration state file; None = vanilla only.")
    device: str | None = Field(None, description="Torch device; None = CUDA if available.")
    dtype: str = Field("float32", pattern="^(float32|bfloat16|float16)$", description="Model dtype.")
    max_pixels: int = Field(448 * 448, gt=0, description="Resolution cap per image.")
    replicas: int = Field(1, gt=0, description="Replicas of the image deployment.")
    num_gpus: float | None = Field(None, ge=0, description="GPUs per image replica; None = as the text replicas.")

    def scaling(self, text: ScalingConfig) -> ScalingConfig:
        """The image deployment's scaling: fixed ``replicas``, own GPUs, the text replicas' CPUs."""
        gpus = text.num_gpus if self.num_gpus is None else self.num_gpus
        return ScalingConfig(replicas=self.replicas, num_gpus=gpus, num_cpus=text.num_cpus)


class ServeConfig(_Frozen):
    """A whole ``posfair serve`` application.

    Args:
        encoder: the text encoder of the embed and rerank deployments.
        image: the image reranker (``None``: no ``/v1/rerank-images``).
        batching / limits / scaling / api: see :class:`BatchingConfig`, :class:`RequestLimits`,
            :class:`ScalingConfig`, :class:`ApiConfig`.
        token_sha256: digest of the required bearer token (:func:`token_digest`); ``None`` = open.
        app_name: the Ray Serve application name.
    """

    encoder: EncoderSpec = Field(default_factory=EncoderSpec, description="The text encoder.")
    image: ImageModelConfig | None = Field(None, description="The image reranker; None = no /v1/rerank-images.")
    batching: BatchingConfig = Field(default_factory=BatchingConfig)
    limits: RequestLimits = Field(default_factory=RequestLimits)
    scaling: ScalingConfig = Field(default_factory=ScalingConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    token_sha256: str | None = Field(None, description="SHA-256 of the bearer token; None = no token required.")
    app_name: str = Field("posfair", min_length=1, description="Ray Serve application name.")
