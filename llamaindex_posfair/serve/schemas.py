"""Wire formats of ``posfair serve`` (pydantic), shared by the server and the client.

OpenAI's embeddings (plus ``input_type``), Cohere's v1/v2 rerank, image rerank, the model list and
OpenAI's error body, one class each (the fields of every route: ``docs/serving.md``, "The API");
:data:`INPUT_TYPE_ROLES` is the one table from a client's name for the kind of a text to the encoder
side. Cohere's embed formats live in :mod:`.cohere`, TEI's in :mod:`.tei`.

Shape checks live here (the message names the field and what is valid); limits
that depend on the server's configuration are checked by the ingress.

Example:
    >>> EmbeddingRequest(input="hello").texts()
    ['hello']
    >>> EmbeddingRequest(input=[]).texts()
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for EmbeddingRequest
    ...
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from llamaindex_posfair.encoders.weights import file_sha256
from llamaindex_posfair.integrations.node_scoring import ScoringSettings
from llamaindex_posfair.scoring import NODE_WEIGHT
from qdrant_tools.subchunks import NodeSource, SubchunkConfig

InputType = Literal["query", "document"]
ImageMethod = Literal["ours", "vanilla", "pride", "attention"]

#: A client's name for the kind of a text -> the encoder side it gets (prompt and calibration).
#: Cohere's symmetric tasks (classification, clustering) compare texts of one kind with each
#: other; they take the query side, as E5-style models prefix both texts of a symmetric pair
#: with their query prompt.
INPUT_TYPE_ROLES: dict[str, InputType] = {
    "query": "query",
    "search_query": "query",
    "classification": "query",
    "clustering": "query",
    "document": "document",
    "search_document": "document",
    "passage": "document",
}

#: Bounds of the numeric request fields (a value outside gets a 400/422 naming the field and the bound).
MAX_DIMENSION = 65_536
MAX_TOP_N = 100_000
MIN_SUBCHUNK_TOKENS = 8
MAX_SUBCHUNK_TOKENS = 1024
MAX_SUBCHUNK_OVERLAP = 8
MAX_LAYERS = 256
MAX_SHARPEN = 1000.0

#: The routes that answer with the text encoder (listed in its model card).
TEXT_ROUTES = ("/v1/embeddings", "/v1/rerank", "/v1/embed", "/v2/embed", "/v2/rerank", "/embed", "/rerank", "/info")


def role_for(value: Any, name: str, default: InputType = "document") -> InputType:
    """The encoder side of a client's ``input_type`` / ``prompt_name`` (``None``: ``default``).

    Raises:
        ValueError: a name not in :data:`INPUT_TYPE_ROLES`, naming ``name`` and the valid values.

    Example:
        >>> role_for("search_query", "input_type"), role_for(None, "prompt_name")
        ('query', 'document')
    """
    if value is None:
        return default
    role = INPUT_TYPE_ROLES.get(value.lower()) if isinstance(value, str) else None
    if role is None:
        valid = ", ".join(repr(k) for k in INPUT_TYPE_ROLES)
        raise ValueError(f"{name} {value!r} is not supported; send one of {valid}")
    return role


def file_digest(path: str | Path) -> str:
    """16-hex-digit SHA-256 of a file's bytes: the fingerprint of an image calibration state on the wire
    (``ModelCard.fingerprint`` of the image model; the server computes it, the client checks it)."""
    return file_sha256(Path(path))[:16]


class Wire(BaseModel):
    """A wire body: fields of other ecosystems that we do not use (user, priority, ...) are ignored."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())


def check_unicode(text: str, where: str) -> None:
    """Raise a ValueError naming ``where`` when ``text`` holds a lone surrogate (valid JSON, not valid text).

    Example:
        >>> check_unicode("ok", "input[0]")
        >>> check_unicode("bad " + chr(0xD800), "input[1]")
        Traceback (most recent call last):
        ...
        ValueError: input[1] holds a lone surrogate (\ud800) at character 4; texts must be valid Unicode: send surrogate pairs whole, or drop the stray code unit
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{where} holds a lone surrogate (\\u{ord(text[exc.start]):04x}) at character {exc.start}; texts must be "
            "valid Unicode: send surrogate pairs whole, or drop the stray code unit"
        ) from None


def text_list(value: Any, name: str) -> Any:
    """``value`` as a non-empty list of non-empty valid-Unicode strings, or a ValueError naming the first problem."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f"{name} must be a string or a list of strings, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{name} must not be empty; send at least one text")
    for i, text in enumerate(value):
        if not isinstance(text, str):
            hint = " (token-id arrays are not accepted; send text)" if isinstance(text, (int, list)) else ""
            raise ValueError(f"{name}[{i}] must be a string, got {type(text).__name__}{hint}")
        if not text.strip():
            raise ValueError(f"{name}[{i}] is empty; every text must contain non-whitespace characters")
        check_unicode(text, f"{name}[{i}]")
    return value


def check_query(value: Any) -> Any:
    """``value`` if it is a non-empty string, else a ValueError naming ``query``."""
    if not isinstance(value, str):
        raise ValueError(f"query must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError("query is empty; send a non-empty query")
    check_unicode(value, "query")
    return value


def _field_texts(value: Any, info: ValidationInfo) -> Any:
    return text_list(value, str(info.field_name))


#: A request field of texts (one string or a list), checked by :func:`text_list` under the field's name.
TEXTS = BeforeValidator(_field_texts)
#: A request's query, checked by :func:`check_query`.
Query = Annotated[str, BeforeValidator(check_query)]


# --------------------------------------------------------------------------- embeddings
class EmbeddingRequest(Wire):
    """``POST /v1/embeddings``: OpenAI's request plus ``input_type``."""

    input: Annotated[str | list[str], TEXTS] = Field(description="One text or a list of texts.")
    model: str | None = Field(None, description="The served model id or its fingerprint; None = the served model.")
    input_type: InputType = Field("document", description='"query" or "document" (prompt and calibration).')
    encoding_format: Literal["float", "base64"] = Field("float", description="Vectors as floats or base64 float32.")
    dimensions: int | None = Field(
        None, gt=0, le=MAX_DIMENSION, description="Must equal the model's dimension when given."
    )

    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


class EmbeddingData(Wire):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(Wire):
    prompt_tokens: int = 0
    total_tokens: int = 0


class EmbeddingResponse(Wire):
    """OpenAI's response; ``truncated`` counts the inputs cut at the model's window."""

    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: Usage
    truncated: int = 0

    def matrix(self) -> np.ndarray:
        """The embeddings as a float32 ``[n, d]`` array, in input order (either encoding)."""
        rows = sorted(self.data, key=lambda d: d.index)
        return np.stack([decode_vector(r.embedding) for r in rows]) if rows else np.zeros((0, 0), np.float32)


def encode_vector(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    """One embedding in OpenAI's ``"float"`` (list) or ``"base64"`` (little-endian float32) encoding."""
    v = np.asarray(vector, dtype="<f4")
    return base64.b64encode(v.tobytes()).decode() if encoding_format == "base64" else v.tolist()


def decode_vector(value: list[float] | str) -> np.ndarray:
    """Inverse of :func:`encode_vector`."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


# --------------------------------------------------------------------------- rerank
class RerankDocument(Wire):
    text: str


class RerankRequest(Wire):
    """``POST /v1/rerank``: Cohere's / TEI's request (documents as strings or ``{"text": ...}``)."""

    query: Query
    documents: list[str] = Field(description='Texts, or Cohere\'s {"text": ...} objects.')
    top_n: int | None = Field(None, gt=0, le=MAX_TOP_N, description="Results returned, best first; None = all.")
    return_documents: bool = Field(False, description="Echo each result's document.")
    model: str | None = Field(None, description="The served model id or its fingerprint; None = the served model.")
    scoring: Literal["node", "subchunks", "weighted"] = Field(
        "node",
        description="'node': cosine of the whole document; 'subchunks': of its best sentence-aligned "
        "sub-chunk; 'weighted': node_weight * node + (1 - node_weight) * best sub-chunk (as PosFairRerank).",
    )
    subchunk_tokens: int = Field(
        SubchunkConfig().max_tokens,
        ge=MIN_SUBCHUNK_TOKENS,
        le=MAX_SUBCHUNK_TOKENS,
        description="Token budget of a sub-chunk.",
    )
    subchunk_overlap: int = Field(
        SubchunkConfig().overlap_sentences,
        ge=0,
        le=MAX_SUBCHUNK_OVERLAP,
        description="Sentences shared by neighbouring sub-chunks.",
    )
    node_weight: float = Field(NODE_WEIGHT, ge=0.0, le=1.0, description="Weight of the node cosine in 'weighted'.")
    node_source: NodeSource = Field(
        "encoded",
        description="'encoded': the node vector encodes the text; 'subchunk-mean': the normalised mean "
        "of its sub-chunk vectors (as a collection ingested with --node-source subchunk-mean stores it).",
    )

    def scoring_settings(self) -> ScoringSettings:
        """The request's scoring as the settings ``PosFairRerank`` uses."""
        return ScoringSettings(
            self.scoring,
            SubchunkConfig(self.subchunk_tokens, self.subchunk_overlap),
            self.node_weight,
            self.node_source,
        )

    @model_validator(mode="before")
    @classmethod
    def _tei_texts(cls, value: Any) -> Any:
        """TEI's field name ``texts`` is accepted for ``documents``."""
        if isinstance(value, dict) and "documents" not in value and "texts" in value:
            return {**value, "documents": value["texts"]}
        return value

    @field_validator("documents", mode="before")
    @classmethod
    def _check_documents(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError(f"documents must be a list of strings, got {type(value).__name__}")
        return text_list([d.get("text", d) if isinstance(d, dict) else d for d in value], "documents")


class RerankResult(Wire):
    index: int
    relevance_score: float
    document: RerankDocument | None = None


class RerankResponse(Wire):
    """Results best first (``top_n`` of them); ``relevance_score`` is the cosine.

    ``id`` and ``meta`` are Cohere's (a request id; the API version and billed units).
    """

    results: list[RerankResult]
    model: str
    id: str | None = None
    meta: dict[str, Any] | None = None

    def scores(self, n: int) -> np.ndarray:
        """Scores in input order (all ``n`` documents must be in the response)."""
        out = np.full(n, np.nan)
        for r in self.results:
            out[r.index] = r.relevance_score
        if np.isnan(out).any():
            raise ValueError(f"the server returned {len(self.results)} scores for {n} documents; request top_n={n}")
        return out


# --------------------------------------------------------------------------- image rerank
class ImageRerankRequest(Wire):
    """``POST /v1/rerank-images``: a query and 2..N images (base64, data URIs, or URLs where allowed)."""

    query: Query
    images: list[str] = Field(description="Base64 images or data URIs; http(s) URLs only where the server allows.")
    top_n: int | None = Field(None, gt=0, le=MAX_TOP_N, description="Results returned, best first; None = all.")
    method: ImageMethod = Field("ours", description="'ours' (calibrated), 'vanilla', 'pride' or 'attention'.")
    top_k_layers: int = Field(
        2, gt=0, le=MAX_LAYERS, description="Layers chosen per query by visual evidence strength."
    )
    sharpen: float = Field(5.0, ge=0, le=MAX_SHARPEN, description="Sharpening of the attention posterior.")
    variant: Literal["linear", "log_mixture"] = Field("linear", description="Bias correction.")

    @field_validator("images", mode="before")
    @classmethod
    def _check_images(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError(f"images must be a list of base64 strings, got {type(value).__name__}")
        if len(value) < 2:
            raise ValueError(f"images must hold at least 2 images to rank, got {len(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item:
                raise ValueError(f"images[{i}] must be a non-empty base64 string, got {type(item).__name__}")
        return value


class ImageRerankResponse(Wire):
    """``results`` best first; ``probabilities`` per input slot (they sum to 1)."""

    results: list[RerankResult]
    probabilities: list[float]
    model: str
    method: ImageMethod


# --------------------------------------------------------------------------- models, health, errors
class ModelCard(Wire):
    """One served model: its id, kind and (text encoder) spec fingerprint and spec."""

    id: str
    object: Literal["model"] = "model"
    owned_by: str = "posfair"
    kind: Literal["embedding", "image-rerank"]
    fingerprint: str | None = None
    spec: dict[str, Any] | None = None
    dimension: int | None = None
    max_length: int | None = None
    calibrated_sizes: list[int] | None = None
    routes: list[str] = Field(default_factory=list)


class ModelList(Wire):
    object: Literal["list"] = "list"
    data: list[ModelCard]

    def card(self, kind: str) -> ModelCard | None:
        return next((c for c in self.data if c.kind == kind), None)


class ErrorDetail(Wire):
    message: str
    type: str = "invalid_request_error"
    param: str | None = None


class ErrorResponse(Wire):
    error: ErrorDetail
