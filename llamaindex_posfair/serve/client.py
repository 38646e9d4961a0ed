"""HTTP client of ``posfair serve`` (sync and async), used by the LlamaIndex classes' remote mode.

Every call is retried by :mod:`qdrant_tools.retry` (:data:`DEFAULT_POLICY`) on transient failures only
(refused or dropped connections, timeouts, 408/429/5xx, honouring ``Retry-After``); a 4xx is raised at
once as a :class:`ServeError` carrying the server's message. The bearer token is read from
``$POSFAIR_SERVE_TOKEN`` unless given.

:meth:`ServeClient.check_encoder` compares the server's spec fingerprint with the
spec the caller expects, so vectors from a server never silently differ from
the ones the same spec gives in process.

Example:
    >>> client = ServeClient("http://127.0.0.1:8000")                    # doctest: +SKIP
    >>> spec, card = client.check_encoder(EncoderSpec())                 # doctest: +SKIP
    >>> vectors, truncated = client.embed(["where is it?"], "query")     # doctest: +SKIP
    >>> client.rerank("where is it?", ["here", "there"])                 # doctest: +SKIP
    array([0.61, 0.42])
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import os
import weakref
from typing import Any

import numpy as np

from llamaindex_posfair.encoders.precision import AUTO
from llamaindex_posfair.encoders.spec import VECTOR_FIELDS, EncoderSpec
from llamaindex_posfair.serve.config import TOKEN_ENV
from llamaindex_posfair.serve.schemas import (
    EmbeddingResponse,
    ImageRerankResponse,
    ModelCard,
    ModelList,
    RerankResponse,
    file_digest,
)
from qdrant_tools.retry import RetryPolicy, acall_with_retry, call_with_retry, is_retryable

logger = logging.getLogger(__name__)

#: Retries of the client: 4 attempts within 60 s, backoff bound 0.2 s doubling up to 5 s.
DEFAULT_POLICY = RetryPolicy(max_attempts=4, base_delay=0.2, max_delay=5.0, deadline=60.0)


class ServeError(RuntimeError):
    """A ``posfair serve`` call failed: the server's message, its HTTP status (``None``: unreachable).

    ``retryable`` says whether repeating the call may succeed (the client already retried).
    """

    def __init__(self, message: str, status_code: int | None = None, headers: Any = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers or {}

    @property
    def retryable(self) -> bool:
        return is_retryable(self) if self.status_code is not None else True


class ServeMismatchError(ValueError):
    """The server serves another model, spec or calibration than the caller expects."""


def image_to_base64(image: Any) -> str:
    """A PIL image as base64 PNG (lossless: the server sees the same pixels)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _message(response: Any) -> str:
    try:
        body = response.json()
        return str(body["error"]["message"])
    except Exception:
        return response.text[:500] or response.reason_phrase


class ServeClient:
    """Sync and async client of one ``posfair serve`` endpoint.

    Args:
        endpoint: the server's base URL, e.g. ``http://gpu-host:8000``.
        token: bearer token; default ``$POSFAIR_SERVE_TOKEN`` (none if unset).
        timeout_s: seconds per HTTP attempt (connect at most 10 s).
        policy: retry policy (default :data:`DEFAULT_POLICY`).
        transport: an ``httpx`` transport for both the sync and async clients (tests: ``httpx.MockTransport``).

    Raises:
        ValueError: ``endpoint`` is not an http(s) URL.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        token: str | None = None,
        timeout_s: float = 60.0,
        policy: RetryPolicy | None = None,
        transport: Any = None,
    ) -> None:
        if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"endpoint must be an http(s) URL such as 'http://127.0.0.1:8000', got {endpoint!r}")
        self.endpoint = endpoint.rstrip("/")
        self._token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
        self.timeout_s = float(timeout_s)
        self.policy = policy or DEFAULT_POLICY
        self._transport = transport
        self._sync: Any = None
        self._async: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ transport
    def _options(self) -> dict[str, Any]:
        import httpx

        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        timeout = httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s))
        opts = {"base_url": self.endpoint, "headers": headers, "timeout": timeout}
        return opts if self._transport is None else {**opts, "transport": self._transport}

    def _sync_client(self) -> Any:
        import httpx

        if self._sync is None:
            self._sync = httpx.Client(**self._options())
        return self._sync

    def _async_client(self) -> Any:
        import httpx

        loop = asyncio.get_running_loop()
        client = self._async.get(loop)
        if client is None:  # one pool per event loop: a client cannot outlive the loop it was made in
            client = self._async[loop] = httpx.AsyncClient(**self._options())
        return client

    def _check(self, response: Any) -> dict[str, Any]:
        if response.status_code >= 400:
            raise ServeError(
                f"posfair serve at {self.endpoint} answered {response.status_code} to "
                f"{response.request.method} {response.request.url.path}: {_message(response)}",
                response.status_code,
                response.headers,
            )
        return response.json()

    def _unreachable(self, exc: Exception) -> ServeError:
        return ServeError(
            f"cannot reach posfair serve at {self.endpoint} ({type(exc).__name__}: {exc}); start it with "
            "`posfair serve`, or check the endpoint URL"
        )

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call with retries; the JSON answer.

        Raises:
            ServeError: a 4xx, or a transient failure that outlived the retries.
        """
        import httpx

        def once() -> dict[str, Any]:
            return self._check(self._sync_client().request(method, path, json=body))

        try:
            return call_with_retry(once, policy=self.policy, description=f"{method} {path}")
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc

    async def arequest(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Async :meth:`request`."""
        import httpx

        async def once() -> dict[str, Any]:
            return self._check(await self._async_client().request(method, path, json=body))

        try:
            return await acall_with_retry(once, policy=self.policy, description=f"{method} {path}")
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc

    def close(self) -> None:
        """Close the sync connection pool (async pools close with their event loop)."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    # ------------------------------------------------------------------ models and checks
    def models(self) -> ModelList:
        return ModelList.model_validate(self.request("GET", "/v1/models"))

    def check_encoder(self, expected: EncoderSpec) -> tuple[EncoderSpec, ModelCard]:
        """The server's text encoder, checked against ``expected``.

        ``expected`` is pinned from local model files when they are here; otherwise every
        vector-shaping setting but the weights is compared, and the server's weights hash
        is adopted. An ``"auto"`` dtype adopts the server's (its hardware chose it).

        Returns:
            ``(expected pinned to the served weights, the server's model card)``.

        Raises:
            ServeMismatchError: the server serves no text encoder, or another fingerprint.
        """
        card = self.models().card("embedding")
        if card is None or card.spec is None:
            raise ServeMismatchError(f"posfair serve at {self.endpoint} serves no text encoder")
        served = EncoderSpec.model_validate(card.spec)
        if expected.dtype == AUTO:
            expected = expected.model_copy(update={"dtype": served.dtype})
        try:
            pinned = expected.pinned()
        except ValueError:  # the model files are not on this machine
            pinned = expected.model_copy(update={"weights": served.weights})
        if pinned.fingerprint() != card.fingerprint:
            raise ServeMismatchError(_mismatch(self.endpoint, pinned, served, card.fingerprint))
        return pinned, card

    def check_image_model(self, model_id: str | None, calibration_path: Any = None) -> ModelCard:
        """The server's image model, checked against an expected model id and calibration state file.

        Raises:
            ServeMismatchError: no image model, another model id, or another calibration state.
        """
        card = self.models().card("image-rerank")
        if card is None:
            raise ServeMismatchError(
                f"posfair serve at {self.endpoint} has no image model; start it with --mm-model (and --mm-calibration)"
            )
        if model_id and model_id != card.id:
            raise ServeMismatchError(
                f"posfair serve at {self.endpoint} serves image model {card.id!r}, expected {model_id!r}; "
                "drop model_id= to accept the server's, or serve the expected model"
            )
        if calibration_path is not None and file_digest(calibration_path) != card.fingerprint:
            raise ServeMismatchError(
                f"posfair serve at {self.endpoint} holds calibration {card.fingerprint}, but {str(calibration_path)!r} "
                f"is {file_digest(calibration_path)}; start the server with this --mm-calibration, or drop calibration="
            )
        return card

    # ------------------------------------------------------------------ calls
    def embed(self, texts: list[str], input_type: str) -> tuple[np.ndarray, int]:
        """``(vectors [n, d] float32, texts truncated by the model)``."""
        out = EmbeddingResponse.model_validate(self.request("POST", "/v1/embeddings", _embed_body(texts, input_type)))
        return out.matrix(), out.truncated

    async def aembed(self, texts: list[str], input_type: str) -> tuple[np.ndarray, int]:
        body = _embed_body(texts, input_type)
        out = EmbeddingResponse.model_validate(await self.arequest("POST", "/v1/embeddings", body))
        return out.matrix(), out.truncated

    def rerank(self, query: str, documents: list[str], **scoring: Any) -> np.ndarray:
        """Score of each document for the query, in input order; ``scoring``: the scoring fields of
        ``/v1/rerank`` (``scoring``, ``subchunk_tokens``, ``subchunk_overlap``, ``node_weight``, ``node_source``)."""
        body = {"query": query, "documents": list(documents), "top_n": len(documents), **scoring}
        return RerankResponse.model_validate(self.request("POST", "/v1/rerank", body)).scores(len(documents))

    async def arerank(self, query: str, documents: list[str], **scoring: Any) -> np.ndarray:
        body = {"query": query, "documents": list(documents), "top_n": len(documents), **scoring}
        return RerankResponse.model_validate(await self.arequest("POST", "/v1/rerank", body)).scores(len(documents))

    def rerank_images(self, query: str, images: list[str], **settings: Any) -> list[float]:
        """Probability of each image slot (input order); ``settings``: method, top_k_layers, sharpen, variant."""
        body = {"query": query, "images": images, **settings}
        return ImageRerankResponse.model_validate(self.request("POST", "/v1/rerank-images", body)).probabilities

    async def arerank_images(self, query: str, images: list[str], **settings: Any) -> list[float]:
        body = {"query": query, "images": images, **settings}
        out = await self.arequest("POST", "/v1/rerank-images", body)
        return ImageRerankResponse.model_validate(out).probabilities


def _embed_body(texts: list[str], input_type: str) -> dict[str, Any]:
    return {"input": list(texts), "input_type": input_type, "encoding_format": "base64"}


def _mismatch(endpoint: str, expected: EncoderSpec, served: EncoderSpec, fingerprint: str | None) -> str:
    fields = [f for f in VECTOR_FIELDS if f != "model" and getattr(expected, f) != getattr(served, f)]
    if expected.model_key() != served.model_key():
        fields.insert(0, "model")
    shown = ", ".join(f"{f}: expected {getattr(expected, f)!r}, served {getattr(served, f)!r}" for f in fields)
    return (
        f"posfair serve at {endpoint} serves other vectors (fingerprint {fingerprint}) than expected "
        f"({expected.fingerprint()}): {shown or 'the model files differ'}; pass the server's spec "
        f"(GET {endpoint}/v1/models) or restart the server with the expected one"
    )
