"""Text Embeddings Inference (TEI) formats: ``POST /embed``, ``POST /rerank``, ``GET /info``.

What TEI's clients (``huggingface_hub``'s feature extraction, LlamaIndex's
``TextEmbeddingsInference`` and ``TextEmbeddingInference`` reranker) send and parse; the fields each
route reads, ignores and refuses are in ``docs/serving.md`` ("TEI"). ``prompt_name`` picks the encoder side
(:data:`~llamaindex_posfair.serve.schemas.INPUT_TYPE_ROLES`; none = document); a rerank ``score`` is the
cosine whether or not ``raw_scores`` is asked; errors are ``{"error", "error_type"}``.

Example:
    >>> TeiEmbedRequest(inputs="hello", prompt_name="query").role()
    'query'
    >>> ranks([0.1, 0.7], ["a", "b"], return_text=True)
    [{'index': 1, 'score': 0.7, 'text': 'b'}, {'index': 0, 'score': 0.1, 'text': 'a'}]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, Field, field_validator

from llamaindex_posfair.serve.schemas import TEXTS, InputType, ModelCard, Query, Wire, role_for, text_list


def _right_only(value: Any) -> Any:
    if isinstance(value, str) and value.lower() == "left":
        raise ValueError("truncation_direction 'left' is not supported; texts are cut at the right ('right')")
    return value


#: ``truncation_direction``: only ``"right"``.
Direction = Annotated[str, BeforeValidator(_right_only)]


class TeiEmbedRequest(Wire):
    """``POST /embed``."""

    inputs: Annotated[list[str], TEXTS] = Field(description="One text or a list of texts.")
    normalize: bool = Field(True, description="L2-normalise (the served vectors already are when the spec normalises).")
    truncate: bool | None = Field(None, description="Cut texts at the model's window; false: refuse longer texts.")
    truncation_direction: Direction = Field("right", description="Only 'right'.")
    prompt_name: str | None = Field(None, description="query / search_query -> the query side; None = document.")

    @field_validator("prompt_name", mode="before")
    @classmethod
    def _check_prompt(cls, value: Any) -> Any:
        if value is not None:
            role_for(value, "prompt_name")
        return value

    def role(self) -> InputType:
        return role_for(self.prompt_name, "prompt_name")


class TeiRerankRequest(Wire):
    """``POST /rerank``."""

    query: Query
    texts: list[str] = Field(description="The texts to rank.")
    raw_scores: bool = Field(False, description="Accepted; scores are cosines either way.")
    return_text: bool = Field(False, description="Echo each text.")
    truncate: bool | None = Field(None, description="Accepted; texts are cut at the model's window.")
    truncation_direction: Direction = Field("right", description="Only 'right'.")

    @field_validator("texts", mode="before")
    @classmethod
    def _check_texts(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError(f"texts must be a list of strings, got {type(value).__name__}")
        return text_list(value, "texts")


class TeiError(Wire):
    """TEI's error body."""

    error: str
    error_type: str = "Validation"


class TeiInfo(Wire):
    """``GET /info``: TEI's ``Info`` (model and router limits)."""

    model_id: str
    model_sha: str | None = None
    model_dtype: str
    model_type: dict[str, Any]
    max_concurrent_requests: int
    max_input_length: int
    max_batch_tokens: int
    max_batch_requests: int | None = None
    max_client_batch_size: int
    auto_truncate: bool = True
    tokenization_workers: int = 1
    version: str
    sha: str | None = None
    docker_label: str | None = None


def ranks(scores: Sequence[float], texts: Sequence[str] | None = None, *, return_text: bool = False) -> list[dict]:
    """TEI's rerank answer: ``[{"index", "score", "text"?}]`` best first (ties keep input order)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    echo = return_text and texts is not None
    return [{"index": int(i), "score": float(scores[i]), **({"text": texts[i]} if echo else {})} for i in order]


def package_version() -> str:
    """This package's installed version ("0+unknown" when it runs from a source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llamaindex-posfair")
    except PackageNotFoundError:
        return "0+unknown"


def info(card: ModelCard, *, token_budget: int, max_batch_size: int, max_inputs: int, max_ongoing: int) -> TeiInfo:
    """``/info`` for the served text encoder (its card and the server's batching limits)."""
    spec = card.spec or {}
    return TeiInfo(
        model_id=card.id,
        model_sha=spec.get("weights"),
        model_dtype=spec.get("dtype") or "float32",
        model_type={"embedding": {"pooling": spec.get("pooling") or "sentence-transformers"}},
        max_concurrent_requests=max_ongoing,
        max_input_length=int(card.max_length or 0),
        max_batch_tokens=token_budget,
        max_batch_requests=max_batch_size,
        max_client_batch_size=max_inputs,
        version=package_version(),
        sha=card.fingerprint,
    )
