"""The HTTP API of ``posfair serve``: the ingress deployment (FastAPI), no model.

It validates requests (shape errors from :mod:`.schemas`, limits from
:class:`~llamaindex_posfair.serve.config.RequestLimits`), checks the bearer token,
forwards each request to a model deployment and maps failures to status codes:

* 400 — a malformed request or one over a limit (the message names the field);
* 401 — a token is required and missing or wrong; 404 — no image model;
* 503 + ``Retry-After`` — the replica serving the request stopped, or the
  deployment is overloaded: retrying is safe (every call is a pure computation);
* 500 — anything else (logged without the request's text).

Nothing here logs request text. Each answer of a batched route carries
``X-Posfair-Batch-Size``: how many requests shared its batch.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the route annotations of the
# class-based view Ray Serve builds, and string annotations would turn request bodies into query parameters.
import asyncio
import hmac
import logging
from typing import Any

import numpy as np
from fastapi import FastAPI, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray import serve
from starlette.exceptions import HTTPException

from llamaindex_posfair.serve.config import RequestLimits, ServeConfig, token_digest
from llamaindex_posfair.serve.images import WireImageError, decode_images
from llamaindex_posfair.serve.schemas import (
    EmbeddingData,
    EmbeddingRequest,
    EmbeddingResponse,
    ErrorDetail,
    ErrorResponse,
    ImageRerankRequest,
    ImageRerankResponse,
    ModelCard,
    ModelList,
    RerankDocument,
    RerankRequest,
    RerankResponse,
    RerankResult,
    Usage,
    encode_vector,
)
from llamaindex_posfair.serve.worker import EmbedJob, ImageJob, RerankJob

logger = logging.getLogger("posfair.serve")

BATCH_HEADER = "X-Posfair-Batch-Size"
HEALTH_WAIT_S = 2.0
OPEN_PATHS = frozenset({"/health"})

api = FastAPI(title="posfair serve", docs_url=None, redoc_url=None, openapi_url=None)


class ApiError(HTTPException):
    """An error answer: status, message, the request field it concerns, extra headers."""

    def __init__(self, status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                 headers: dict[str, str] | None = None) -> None:  # fmt: skip
        super().__init__(status_code=status, detail=message, headers=headers)
        self.param = param
        self.kind = kind


def error_response(status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                   headers: dict[str, str] | None = None) -> JSONResponse:  # fmt: skip
    body = ErrorResponse(error=ErrorDetail(message=message, type=kind, param=param))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def _where(loc: tuple[Any, ...]) -> str:
    parts = [str(x) for x in loc if x != "body"]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out


@api.exception_handler(RequestValidationError)
async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    where = _where(tuple(first.get("loc", ())))
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    if first.get("type") == "json_invalid":
        return error_response(400, f"the request body is not valid JSON ({message}); send a JSON object")
    if first.get("type") == "missing":
        message = f"{where} is required"
    elif where and not message.startswith(where):
        message = f"{where}: {message}"
    return error_response(400, message, param=where or None)


@api.exception_handler(HTTPException)
async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
    return error_response(exc.status_code, str(exc.detail), param=getattr(exc, "param", None),
                          kind=getattr(exc, "kind", "invalid_request_error"), headers=exc.headers)  # fmt: skip


@api.middleware("http")
async def _require_token(request: Request, call_next: Any) -> Any:
    digest = getattr(request.app.state, "token_sha256", None)
    if digest and request.url.path not in OPEN_PATHS:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token_digest(token.strip()), digest):
            return error_response(
                401,
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' with the server's "
                "$POSFAIR_SERVE_TOKEN",
                kind="authentication_error",
                headers={"WWW-Authenticate": "Bearer"},
            )
    return await call_next(request)


def check_texts(texts: list[str], name: str, limit: int, limits: RequestLimits) -> None:
    """Raise a 400 naming the limit when there are too many texts or one is too long."""
    if len(texts) > limit:
        raise ApiError(400, f"{name} holds {len(texts)} texts; this server accepts at most {limit} per request, "
                       "send them in several requests", param=name)  # fmt: skip
    for i, text in enumerate(texts):
        if len(text) > limits.max_text_chars:
            raise ApiError(400, f"{name}[{i}] has {len(text)} characters; this server accepts at most "
                           f"{limits.max_text_chars} per text, split it", param=f"{name}[{i}]")  # fmt: skip


def check_model(asked: str | None, card: ModelCard) -> None:
    if asked is not None and asked not in (card.id, card.fingerprint):
        raise ApiError(400, f"model {asked!r} is not served here; this server serves {card.id!r} "
                       f"(fingerprint {card.fingerprint}); omit model or send one of these", param="model")  # fmt: skip


async def call(response: Any, what: str) -> Any:
    """Await a deployment call, mapping its failures to answers (see the module docstring)."""
    from ray.exceptions import RayActorError
    from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError, ReplicaUnavailableError

    try:
        return await response
    except (RayActorError, ReplicaUnavailableError) as exc:
        raise ApiError(503, f"the {what} replica serving this request stopped ({type(exc).__name__}); the request "
                       "is safe to retry", kind="server_unavailable", headers={"Retry-After": "1"}) from None  # fmt: skip
    except (BackPressureError, DeploymentUnavailableError) as exc:
        raise ApiError(503, f"the {what} deployment cannot take this request now ({type(exc).__name__}); retry",
                       kind="server_unavailable", headers={"Retry-After": "1"}) from None  # fmt: skip
    except Exception as exc:
        cause = getattr(exc, "cause", exc)
        if isinstance(cause, ValueError):
            raise ApiError(400, str(cause)) from None
        logger.error("%s deployment failed: %s", what, type(cause).__name__)
        raise ApiError(500, f"the {what} deployment failed ({type(cause).__name__}); see the server log",
                       kind="server_error") from None  # fmt: skip


@serve.deployment
@serve.ingress(api)
class Ingress:
    """The HTTP routes; handles to the model deployments (``image`` may be ``None``)."""

    def __init__(self, config: ServeConfig, embed: Any, rerank: Any, image: Any = None) -> None:
        api.state.token_sha256 = config.token_sha256
        self._limits = config.limits
        self._embed, self._rerank, self._image = embed, rerank, image
        self._cards: ModelList | None = None

    async def _models(self) -> ModelList:
        if self._cards is None:
            cards = [await call(self._embed.card.remote(), "embed")]
            if self._image is not None:
                cards.append(await call(self._image.card.remote(), "image-rerank"))
            self._cards = ModelList(data=cards)
        return self._cards

    @api.get("/health")
    async def health(self) -> Any:
        """200 once every model deployment has answered (its model is loaded); 503 while they start."""
        if self._cards is None:
            try:
                await asyncio.wait_for(self._models(), timeout=HEALTH_WAIT_S)
            except (asyncio.TimeoutError, HTTPException):
                return error_response(503, "the models are still loading", kind="server_unavailable",
                                      headers={"Retry-After": "1"})  # fmt: skip
        return {"status": "ok"}

    @api.get("/v1/models")
    async def models(self) -> dict[str, Any]:
        return (await self._models()).model_dump(mode="json", exclude_none=True)

    @api.post("/v1/embeddings")
    async def embeddings(self, body: EmbeddingRequest, response: Response) -> dict[str, Any]:
        card = (await self._models()).card("embedding")
        check_model(body.model, card)
        texts = body.texts()
        check_texts(texts, "input", self._limits.max_inputs, self._limits)
        if body.dimensions is not None and body.dimensions != card.dimension:
            raise ApiError(400, f"dimensions={body.dimensions}, but this model's embeddings have {card.dimension}; "
                           "omit dimensions", param="dimensions")  # fmt: skip
        out = await call(self._embed.embed.remote(EmbedJob(tuple(texts), body.input_type)), "embed")
        response.headers[BATCH_HEADER] = str(out.batch_size)
        data = [
            EmbeddingData(index=i, embedding=encode_vector(v, body.encoding_format)) for i, v in enumerate(out.vectors)
        ]
        usage = Usage(prompt_tokens=out.tokens, total_tokens=out.tokens)
        return EmbeddingResponse(data=data, model=card.id, usage=usage, truncated=out.truncated).model_dump()

    @api.post("/v1/rerank")
    async def rerank(self, body: RerankRequest, response: Response) -> dict[str, Any]:
        card = (await self._models()).card("embedding")
        check_model(body.model, card)
        check_texts([body.query], "query", 1, self._limits)
        check_texts(body.documents, "documents", self._limits.max_documents, self._limits)
        scores, batch = await call(
            self._rerank.rerank.remote(RerankJob(body.query, tuple(body.documents), body.scoring_settings())), "rerank"
        )
        response.headers[BATCH_HEADER] = str(batch)
        order = np.argsort(-np.asarray(scores), kind="stable")[: body.top_n or len(scores)]
        results = [
            RerankResult(index=int(i), relevance_score=float(scores[i]),
                         document=RerankDocument(text=body.documents[i]) if body.return_documents else None)
            for i in order
        ]  # fmt: skip
        return jsonable_encoder(RerankResponse(results=results, model=card.id), exclude_none=True)

    @api.post("/v1/rerank-images")
    async def rerank_images(self, body: ImageRerankRequest) -> dict[str, Any]:
        if self._image is None:
            raise ApiError(404, "this server has no image model; start posfair serve with --mm-model", kind="not_found")
        card = (await self._models()).card("image-rerank")
        check_texts([body.query], "query", 1, self._limits)
        if len(body.images) > self._limits.max_images:
            raise ApiError(400, f"images holds {len(body.images)} images; this server ranks at most "
                           f"{self._limits.max_images} per request", param="images")  # fmt: skip
        try:
            images = await decode_images(body.images, self._limits)
        except WireImageError as exc:
            raise ApiError(400, str(exc), param="images") from None
        job = ImageJob(body.query, tuple(images), body.method, body.top_k_layers, body.sharpen, body.variant)
        probs = await call(self._image.rerank.remote(job), "image-rerank")
        order = np.argsort(-np.asarray(probs), kind="stable")[: body.top_n or len(probs)]
        results = [RerankResult(index=int(i), relevance_score=float(probs[i])) for i in order]
        out = ImageRerankResponse(results=results, probabilities=probs, model=card.id, method=body.method)
        return out.model_dump(exclude_none=True)
