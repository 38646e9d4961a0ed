"""The HTTP API of ``posfair serve``: the ingress deployment (FastAPI), no model.

It validates requests (shape errors from :mod:`.schemas`, :mod:`.cohere` and :mod:`.tei`,
limits from :class:`~llamaindex_posfair.serve.config.RequestLimits`), checks the bearer
token (repeated failures from one client are answered later and later: :class:`AuthThrottle`), forwards each
request to a model deployment, counts it in :mod:`.metrics`, and maps failures to status codes in the format of
the route's family (the table of codes is ``docs/serving.md``, "Model names, errors, tokens"; 500s are logged
without the request's text).

``/health`` (liveness), ``/ready`` (readiness), ``/metrics`` and the OpenAPI pages need no
token. Nothing here logs request text. Each answer of a batched route carries
``X-Posfair-Batch-Size``: how many requests shared its batch.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the route annotations of the
# class-based view Ray Serve builds, and string annotations would turn request bodies into query parameters.
import asyncio
import hmac
import logging
import time
from collections import OrderedDict
from typing import Any

import numpy as np
from fastapi import FastAPI, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray import serve
from starlette.exceptions import HTTPException

from llamaindex_posfair.scoring import unit_rows
from llamaindex_posfair.serve import cohere, tei
from llamaindex_posfair.serve.cohere import CohereEmbedRequest, request_id
from llamaindex_posfair.serve.config import RequestLimits, ServeConfig, token_digest
from llamaindex_posfair.serve.images import WireImageError, decode_images
from llamaindex_posfair.serve.metrics import ServeMetrics
from llamaindex_posfair.serve.network import bind_replica_grpc_locally
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
from llamaindex_posfair.serve.tei import TeiEmbedRequest, TeiError, TeiRerankRequest, package_version
from llamaindex_posfair.serve.worker import EmbedJob, EmbedOutput, ImageJob, RerankJob

logger = logging.getLogger("posfair.serve")
bind_replica_grpc_locally()  # every replica of the application imports this module

BATCH_HEADER = "X-Posfair-Batch-Size"
HEALTH_WAIT_S = 2.0
#: Requests one ingress replica takes at once (Ray Serve's ``max_ongoing_requests``).
MAX_ONGOING = 1024
DOC_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
OPEN_PATHS = frozenset({"/health", "/ready", "/metrics"}) | DOC_PATHS
#: Routes answering in Cohere's and TEI's formats (their error bodies, 422 for an invalid request).
COHERE_ROUTES = frozenset({"/v1/embed", "/v2/embed", "/v2/rerank"})
TEI_ROUTES = frozenset({"/embed", "/rerank", "/info"})
_TEI_ERROR_TYPES = {"server_unavailable": "Overloaded", "server_error": "Backend"}

api = FastAPI(
    title="posfair serve",
    version=package_version(),
    description="Position-fair embeddings and reranking: OpenAI, Cohere (v1, v2) and TEI formats.",
)


class ApiError(HTTPException):
    """An error answer: status, message, the request field it concerns, extra headers."""

    def __init__(self, status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                 headers: dict[str, str] | None = None) -> None:  # fmt: skip
        super().__init__(status_code=status, detail=message, headers=headers)
        self.param = param
        self.kind = kind


def error_response(status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                   headers: dict[str, str] | None = None, path: str = "") -> JSONResponse:  # fmt: skip
    """An error in the format of the route family of ``path`` (OpenAI's for every other route)."""
    if path in TEI_ROUTES:
        body = TeiError(error=message, error_type=_TEI_ERROR_TYPES.get(kind, "Validation")).model_dump()
    elif path in COHERE_ROUTES:
        body = {"id": request_id(), "message": message}
    else:
        body = ErrorResponse(error=ErrorDetail(message=message, type=kind, param=param)).model_dump()
    return JSONResponse(body, status_code=status, headers=headers)


def invalid_status(path: str) -> int:
    """The status of an invalid request on ``path``: 422 on the Cohere and TEI routes, else 400."""
    return 422 if path in COHERE_ROUTES or path in TEI_ROUTES else 400


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for p in (str(x) for x in loc if x != "body"):
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out


@api.exception_handler(RequestValidationError)
async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    path = request.url.path
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    where = _where(tuple(first.get("loc", ())))
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    if first.get("type") == "json_invalid":
        return error_response(invalid_status(path), f"the request body is not valid JSON ({message}); send a JSON object",
                              path=path)  # fmt: skip
    if not where and first.get("type") in _BODY_SHAPE_ERRORS:
        message = _body_problem(request, first, message)
    elif first.get("type") == "missing":
        message = f"{where} is required"
    elif not message.startswith(where):
        message = f"{where}: {message}"
    return error_response(invalid_status(path), message, param=where or None, path=path)


#: Validation errors of the body as a whole: missing, or not a JSON object.
_BODY_SHAPE_ERRORS = frozenset({"missing", "model_attributes_type", "model_type", "dict_type"})


def _body_problem(request: Request, error: dict[str, Any], message: str) -> str:
    """The message of a problem with the body as a whole (missing, or not a JSON object), naming its required fields."""
    model = getattr(
        getattr(getattr(request.scope.get("route"), "body_field", None), "field_info", None), "annotation", None
    )
    fields = [name for name, f in getattr(model, "model_fields", {}).items() if f.is_required()]
    need = f"with {', '.join(repr(f) for f in fields)}" if fields else f"as {request.url.path} expects"
    if error.get("type") == "missing":
        return f"a JSON object body is required; send one {need}"
    return f"the request body must be a JSON object {need} ({message})"


@api.exception_handler(Exception)
async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """Any other failure: a JSON 500 in the route family's format (logged without the request's text)."""
    logger.error("%s %s failed: %s", request.method, request.url.path, type(exc).__name__)
    return error_response(500, f"the server failed on this request ({type(exc).__name__}); see the server log",
                          kind="server_error", path=request.url.path)  # fmt: skip


@api.exception_handler(HTTPException)
async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    path = request.url.path
    status = invalid_status(path) if exc.status_code == 400 else exc.status_code
    return error_response(status, str(exc.detail), param=getattr(exc, "param", None), path=path,
                          kind=getattr(exc, "kind", "invalid_request_error"), headers=exc.headers)  # fmt: skip


class AuthThrottle:
    """Answers to failed token checks delayed per client: ``base_s * 2**(failures - 1)``, at most ``max_s``.

    Only the failing client's own requests wait (an ``asyncio.sleep``; no lock is shared with
    other requests); its count is cleared by a success, forgotten ``forget_s`` after its last
    failure, and at most ``max_clients`` clients are remembered (the oldest forgotten first).

    Example:
        >>> t = AuthThrottle(base_s=0.1, max_s=1.0)
        >>> [t.failed("10.0.0.9", now=0.0) for _ in range(6)]
        [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
        >>> t.succeeded("10.0.0.9"); t.failed("10.0.0.9", now=1.0)
        0.1
    """

    def __init__(self, base_s: float = 0.05, max_s: float = 2.0, forget_s: float = 300.0,
                 max_clients: int = 10_000) -> None:  # fmt: skip
        self.base_s, self.max_s, self.forget_s, self.max_clients = base_s, max_s, forget_s, max_clients
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self.sleep = asyncio.sleep

    async def wait_after_failure(self, client: str) -> None:
        """Record a failure of ``client`` and wait as long as :meth:`failed` says."""
        await self.sleep(self.failed(client))

    def failed(self, client: str, now: float | None = None) -> float:
        """Record a failure of ``client``; returns the seconds its answer waits."""
        now = time.monotonic() if now is None else now
        count, last = self._failures.pop(client, (0, now))
        count = 1 if now - last > self.forget_s else count + 1
        self._failures[client] = (count, now)
        while len(self._failures) > self.max_clients:
            self._failures.popitem(last=False)
        return min(self.max_s, self.base_s * 2 ** min(count - 1, 30))

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)


AUTH_THROTTLE = AuthThrottle()


@api.middleware("http")
async def _gate(request: Request, call_next: Any) -> Any:
    """The docs switch and the bearer token (every route but :data:`OPEN_PATHS`)."""
    path = request.url.path
    if path in DOC_PATHS and not getattr(request.app.state, "docs", True):
        return error_response(404, "the API docs are switched off on this server (--no-docs)", kind="not_found")
    digest = getattr(request.app.state, "token_sha256", None)
    if digest and path not in OPEN_PATHS:
        client = request.client.host if request.client else "unknown"
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token_digest(token.strip()), digest):
            AUTH_THROTTLE.succeeded(client)
        else:
            await AUTH_THROTTLE.wait_after_failure(client)
            return error_response(
                401,
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' with the server's "
                "$POSFAIR_SERVE_TOKEN",
                kind="authentication_error",
                headers={"WWW-Authenticate": "Bearer"},
                path=path,
            )
    return await call_next(request)


def route_label(request: Request) -> str:
    """The route template the router matched for ``request`` (``"other"``: none matched)."""
    return getattr(request.scope.get("route"), "path", None) or "other"


@api.middleware("http")
async def _measure(request: Request, call_next: Any) -> Any:
    """Count every request and its latency by route (outermost: 401s and 404s count too)."""
    metrics = getattr(request.app.state, "metrics", None)
    t0 = time.perf_counter()
    status = 500
    try:
        response = await call_next(request)
        status = response.status_code
        return response
    finally:
        if metrics is not None:
            metrics.observe_request(route_label(request), request.method, status, time.perf_counter() - t0)


class BodyLimit:
    """ASGI middleware: a request body over ``app.state.max_body_bytes`` gets a 413 before it is parsed.

    A declared ``Content-Length`` over the limit is refused at once; a body sent without one
    is counted as it arrives and refused when it passes the limit.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        limit = getattr(getattr(scope.get("app"), "state", None), "max_body_bytes", None)
        if scope["type"] != "http" or not limit:
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            return await self._refuse(scope, receive, send, limit)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, _replay([message], receive), send)
            size += len(message.get("body", b""))
            if size > limit:
                return await self._refuse(scope, receive, send, limit)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    @staticmethod
    async def _refuse(scope: dict[str, Any], receive: Any, send: Any, limit: int) -> None:
        message = (f"the request body is larger than this server's limit of {limit} bytes (max_body_bytes, "
                   "--max-body-bytes); send fewer or shorter texts per request")  # fmt: skip
        await error_response(413, message, param="body", path=scope.get("path", ""))(scope, receive, send)


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    """A ``receive`` that returns ``messages`` first, then what ``receive`` returns."""
    pending = list(messages)

    async def replayed() -> dict[str, Any]:
        return pending.pop(0) if pending else await receive()

    return replayed


api.add_middleware(BodyLimit)


def check_texts(texts: list[str], name: str, limit: int, limits: RequestLimits) -> None:
    """Raise a 400 naming the limit when there are too many texts or one is too long."""
    if len(texts) > limit:
        raise ApiError(400, f"{name} holds {len(texts)} texts; this server accepts at most {limit} per request, "
                       "send them in several requests", param=name)  # fmt: skip
    for i, text in enumerate(texts):
        check_length(text, f"{name}[{i}]", limits)


def check_length(text: str, where: str, limits: RequestLimits) -> None:
    """Raise a 400 naming ``where`` and the limit when ``text`` is over ``max_text_chars``."""
    if len(text) > limits.max_text_chars:
        raise ApiError(400, f"{where} has {len(text)} characters; this server accepts at most "
                       f"{limits.max_text_chars} per text (max_text_chars, --max-text-chars), split it",
                       param=where)  # fmt: skip


def check_budget(texts: list[str], limits: RequestLimits) -> None:
    """Raise a 413 naming the limit when a request's texts together are over ``max_request_chars``."""
    total = sum(len(t) for t in texts)
    if total > limits.max_request_chars:
        raise ApiError(413, f"the request holds {total} characters of text; this server accepts at most "
                       f"{limits.max_request_chars} per request (max_request_chars, --max-request-chars), "
                       "send the texts in several requests", param="body")  # fmt: skip


def check_model(asked: str | None, card: ModelCard, accept_any: bool = False) -> bool:
    """Whether ``asked`` names another model than ``card``'s (accepted only with ``accept_any``).

    Raises:
        ApiError: 400 naming the served model, for another model without ``accept_any``.
    """
    if asked is None or asked in (card.id, card.fingerprint):
        return False
    if not accept_any:
        raise ApiError(400, f"model {asked!r} is not served here; this server serves {card.id!r} "
                       f"(fingerprint {card.fingerprint}); omit model or send one of these, or start the server "
                       "with --accept-any-model", param="model")  # fmt: skip
    return True


def check_dimension(asked: int | None, card: ModelCard, name: str) -> None:
    if asked is not None and asked != card.dimension:
        raise ApiError(400, f"{name}={asked}, but this model's embeddings have {card.dimension}; omit {name}",
                       param=name)  # fmt: skip


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


def ranked_results(scores: np.ndarray, documents: list[str], top_n: int | None, echo: bool) -> list[RerankResult]:
    """Cohere's results: the best ``top_n`` (all: ``None``) first, ties in input order."""
    order = np.argsort(-np.asarray(scores), kind="stable")[: top_n or len(scores)]
    return [
        RerankResult(index=int(i), relevance_score=float(scores[i]),
                     document=RerankDocument(text=documents[i]) if echo else None)
        for i in order
    ]  # fmt: skip


@serve.deployment
@serve.ingress(api)
class Ingress:
    """The HTTP routes; handles to the model deployments (``image`` may be ``None``)."""

    def __init__(self, config: ServeConfig, embed: Any, rerank: Any, image: Any = None) -> None:
        api.state.token_sha256 = config.token_sha256
        api.state.docs = config.api.docs
        api.state.max_body_bytes = config.limits.max_body_bytes
        api.state.metrics = self._metrics = ServeMetrics()
        self._config = config
        self._limits = config.limits
        self._embed, self._rerank, self._image = embed, rerank, image
        self._cards: ModelList | None = None
        self._foreign_model_logged = False

    # ------------------------------------------------------------------ shared steps
    async def _models(self) -> ModelList:
        if self._cards is None:
            cards = [await call(self._embed.card.remote(), "embed")]
            if self._image is not None:
                cards.append(await call(self._image.card.remote(), "image-rerank"))
            self._cards = ModelList(data=cards)
        return self._cards

    async def _text_card(self, asked: str | None) -> ModelCard:
        """The text encoder's card, ``asked`` checked against it (logged once when another name is accepted)."""
        card = (await self._models()).card("embedding")
        if check_model(asked, card, self._config.api.accept_any_model) and not self._foreign_model_logged:
            self._foreign_model_logged = True
            logger.warning("a request names model %r; serving %r for it and every other name (--accept-any-model; "
                           "logged once)", asked, card.id)  # fmt: skip
        return card

    async def _embed_texts(self, texts: list[str], role: str, name: str, response: Response) -> EmbedOutput:
        """Embed ``texts`` (the request field ``name``) on the ``embed`` deployment, within the limits."""
        check_texts(texts, name, self._limits.max_inputs, self._limits)
        check_budget(texts, self._limits)
        with self._metrics.in_flight("embed"):
            out = await call(self._embed.embed.remote(EmbedJob(tuple(texts), role)), "embed")
        response.headers[BATCH_HEADER] = str(out.batch_size)
        self._metrics.observe_batch("embed", out.batch_size)
        self._metrics.observe_embedded(role, len(texts), out.tokens)
        return out

    async def _rerank_scores(self, body: RerankRequest, name: str, response: Response) -> np.ndarray:
        """Each document's score (input order) from the ``rerank`` deployment, within the limits."""
        check_length(body.query, "query", self._limits)
        check_texts(body.documents, name, self._limits.max_documents, self._limits)
        check_budget([body.query, *body.documents], self._limits)
        job = RerankJob(body.query, tuple(body.documents), body.scoring_settings())
        with self._metrics.in_flight("rerank"):
            scores, batch = await call(self._rerank.rerank.remote(job), "rerank")
        response.headers[BATCH_HEADER] = str(batch)
        self._metrics.observe_batch("rerank", batch)
        self._metrics.observe_embedded("rerank", len(body.documents) + 1, 0)
        return np.asarray(scores)

    def _check_window(self, out: EmbedOutput, card: ModelCard, refused: bool, status: int, fix: str) -> None:
        if refused and out.truncated:
            raise ApiError(status, f"{out.truncated} text(s) exceed the model's window of {card.max_length} tokens; "
                           f"{fix}", param="truncate")  # fmt: skip

    # ------------------------------------------------------------------ operations
    @api.get("/health")
    async def health(self) -> dict[str, str]:
        """Liveness: 200 while the HTTP ingress runs (see ``/ready`` for the models)."""
        return {"status": "ok"}

    @api.get("/ready")
    async def ready(self) -> Any:
        """Readiness: 200 once every model deployment has answered (its model is loaded); 503 while they start."""
        if self._cards is None:
            try:
                await asyncio.wait_for(self._models(), timeout=HEALTH_WAIT_S)
            except (asyncio.TimeoutError, HTTPException):
                return error_response(503, "the models are still loading", kind="server_unavailable",
                                      headers={"Retry-After": "1"})  # fmt: skip
        return {"status": "ready"}

    @api.get("/metrics")
    async def metrics(self) -> Response:
        """Prometheus metrics of this ingress replica (text exposition format)."""
        content, media_type = self._metrics.render()
        return Response(content=content, media_type=media_type)

    @api.get("/v1/models")
    async def models(self) -> dict[str, Any]:
        return (await self._models()).model_dump(mode="json", exclude_none=True)

    # ------------------------------------------------------------------ OpenAI
    @api.post("/v1/embeddings")
    async def embeddings(self, body: EmbeddingRequest, response: Response) -> dict[str, Any]:
        """OpenAI's embeddings (plus ``input_type``: ``"query"`` or ``"document"``)."""
        card = await self._text_card(body.model)
        check_dimension(body.dimensions, card, "dimensions")
        out = await self._embed_texts(body.texts(), body.input_type, "input", response)
        data = [
            EmbeddingData(index=i, embedding=encode_vector(v, body.encoding_format)) for i, v in enumerate(out.vectors)
        ]
        usage = Usage(prompt_tokens=out.tokens, total_tokens=out.tokens)
        return EmbeddingResponse(data=data, model=card.id, usage=usage, truncated=out.truncated).model_dump()

    # ------------------------------------------------------------------ Cohere
    async def _cohere_rerank(self, body: RerankRequest, response: Response, version: str) -> dict[str, Any]:
        card = await self._text_card(body.model)
        scores = await self._rerank_scores(body, "documents", response)
        results = ranked_results(scores, body.documents, body.top_n, body.return_documents)
        out = RerankResponse(results=results, model=card.id, id=request_id(), meta=cohere.meta(version, search_units=1))
        return jsonable_encoder(out, exclude_none=True)

    @api.post("/v1/rerank")
    async def rerank(self, body: RerankRequest, response: Response) -> dict[str, Any]:
        """Cohere's v1 rerank (posfair's scoring settings optional)."""
        return await self._cohere_rerank(body, response, "1")

    @api.post("/v2/rerank")
    async def rerank_v2(self, body: RerankRequest, response: Response) -> dict[str, Any]:
        """Cohere's v2 rerank (``ClientV2.rerank``)."""
        return await self._cohere_rerank(body, response, "2")

    async def _cohere_embed(self, body: CohereEmbedRequest, response: Response, version: str) -> dict[str, Any]:
        card = await self._text_card(body.model)
        check_dimension(body.output_dimension, card, "output_dimension")
        out = await self._embed_texts(body.text_list(), body.role(), "texts", response)
        self._check_window(out, card, body.truncate == "NONE", 400, "send truncate='END' or shorter texts")
        return cohere.embed_response(body, out.vectors, out.tokens, version)

    @api.post("/v1/embed")
    async def embed_v1(self, body: CohereEmbedRequest, response: Response) -> dict[str, Any]:
        """Cohere's v1 embed (``Client.embed``)."""
        return await self._cohere_embed(body, response, "1")

    @api.post("/v2/embed")
    async def embed_v2(self, body: CohereEmbedRequest, response: Response) -> dict[str, Any]:
        """Cohere's v2 embed (``ClientV2.embed``)."""
        return await self._cohere_embed(body, response, "2")

    # ------------------------------------------------------------------ TEI
    @api.post("/embed")
    async def tei_embed(self, body: TeiEmbedRequest, response: Response) -> list[list[float]]:
        """TEI's embed: one vector per input."""
        card = await self._text_card(None)
        out = await self._embed_texts(body.inputs, body.role(), "inputs", response)
        self._check_window(out, card, body.truncate is False, 413, "send truncate=true or shorter texts")
        vectors = out.vectors
        if body.normalize and not (card.spec or {}).get("normalize", True):
            vectors = unit_rows(vectors)
        return np.asarray(vectors, dtype=np.float32).tolist()

    @api.post("/rerank")
    async def tei_rerank(self, body: TeiRerankRequest, response: Response) -> list[dict[str, Any]]:
        """TEI's rerank: ``[{"index", "score", "text"?}]``, best first."""
        await self._text_card(None)
        request = RerankRequest(query=body.query, documents=body.texts)
        scores = await self._rerank_scores(request, "texts", response)
        return tei.ranks(scores.tolist(), body.texts, return_text=body.return_text)

    @api.get("/info")
    async def tei_info(self) -> dict[str, Any]:
        """TEI's info: the served model and the server's limits."""
        card = await self._text_card(None)
        batching = self._config.batching
        return tei.info(card, token_budget=batching.token_budget, max_batch_size=batching.max_batch_size,
                        max_inputs=self._limits.max_inputs, max_ongoing=MAX_ONGOING).model_dump()  # fmt: skip

    # ------------------------------------------------------------------ images
    @api.post("/v1/rerank-images")
    async def rerank_images(self, body: ImageRerankRequest) -> dict[str, Any]:
        """Calibrated image reranking (with ``--mm-model``)."""
        if self._image is None:
            raise ApiError(404, "this server has no image model; start posfair serve with --mm-model", kind="not_found")
        card = (await self._models()).card("image-rerank")
        check_length(body.query, "query", self._limits)
        if len(body.images) > self._limits.max_images:
            raise ApiError(400, f"images holds {len(body.images)} images; this server ranks at most "
                           f"{self._limits.max_images} per request", param="images")  # fmt: skip
        try:
            images = await decode_images(body.images, self._limits)
        except WireImageError as exc:
            raise ApiError(400, str(exc), param="images") from None
        job = ImageJob(body.query, tuple(images), body.method, body.top_k_layers, body.sharpen, body.variant)
        with self._metrics.in_flight("image-rerank"):
            probs = await call(self._image.rerank.remote(job), "image-rerank")
        results = ranked_results(np.asarray(probs), [], body.top_n, echo=False)
        out = ImageRerankResponse(results=results, probabilities=probs, model=card.id, method=body.method)
        return out.model_dump(exclude_none=True)
