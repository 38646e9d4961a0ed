"""Cohere's embed and rerank formats: ``POST /v1/embed``, ``/v2/embed``, and the ``id`` / ``meta`` of rerank.

The ``cohere`` SDK's ``Client`` sends ``/v1/embed`` and ``/v1/rerank``; its ``ClientV2``
sends ``/v2/embed`` and ``/v2/rerank``. Both parse ``id``, ``meta`` and, for embed,
``embeddings`` either as a list of float vectors (v1 without ``embedding_types``) or by
type (``{"float": [...], "int8": [...], ...}``; how each type is computed from the float vectors:
``docs/serving.md``, "Cohere"). Rerank requests share
:class:`~llamaindex_posfair.serve.schemas.RerankRequest` with ``/v1/rerank``.

Example:
    >>> import numpy as np
    >>> embeddings_by_type(np.array([[0.6, -0.8]], np.float32), ["int8", "ubinary"])
    {'int8': [[76, -102]], 'ubinary': [[128]]}
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from llamaindex_posfair.serve.schemas import MAX_DIMENSION, InputType, Wire, encode_vector, role_for, text_list

EmbeddingType = Literal["float", "int8", "uint8", "binary", "ubinary", "base64"]


class CohereEmbedRequest(Wire):
    """``POST /v1/embed`` and ``/v2/embed``: ``texts`` (or v2's text ``inputs``) and their ``input_type``."""

    texts: list[str] | None = Field(None, description="The texts to embed.")
    inputs: list[str] | None = Field(
        None, description='v2: [{"content": [{"type": "text", "text": ...}]}] (text only).'
    )
    images: list[Any] | None = Field(None, description="Not supported: this server embeds text.")
    model: str | None = Field(None, description="The served model id or its fingerprint (any with --accept-any-model).")
    input_type: InputType | None = Field(
        None,
        description="search_query / classification / clustering -> the query side; search_document -> the "
        "document side; None = document.",
    )
    embedding_types: list[EmbeddingType] | None = Field(
        None, description="float, int8, uint8, binary, ubinary, base64; None = float (v1: a plain float list)."
    )
    truncate: Literal["NONE", "END"] = Field("END", description="END: cut at the model's window; NONE: refuse.")
    output_dimension: int | None = Field(
        None, gt=0, le=MAX_DIMENSION, description="Must equal the model's dimension when given."
    )

    @field_validator("texts", mode="before")
    @classmethod
    def _check_texts(cls, value: Any) -> Any:
        return None if value is None else text_list(value, "texts")

    @field_validator("inputs", mode="before")
    @classmethod
    def _check_inputs(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, list):
            raise ValueError(f"inputs must be a list of content objects, got {type(value).__name__}")
        return None if value is None else text_list([_input_text(x, i) for i, x in enumerate(value)], "inputs")

    @field_validator("images", mode="before")
    @classmethod
    def _no_images(cls, value: Any) -> Any:
        if value:
            raise ValueError("images are not supported: this server serves a text encoder; send texts")
        return None

    @field_validator("input_type", mode="before")
    @classmethod
    def _check_input_type(cls, value: Any) -> Any:
        if value == "image":
            raise ValueError("input_type 'image' is not supported: this server serves a text encoder")
        return role_for(value, "input_type") if value is not None else None

    @field_validator("truncate", mode="before")
    @classmethod
    def _check_truncate(cls, value: Any) -> Any:
        if isinstance(value, str) and value.upper() == "START":
            raise ValueError(
                "truncate 'START' is not supported; send 'END' (cut the end) or 'NONE' (refuse long texts)"
            )
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> CohereEmbedRequest:
        if (self.texts is None) == (self.inputs is None):
            raise ValueError("send texts (a list of strings) or inputs (v2 content objects), exactly one of them")
        return self

    def text_list(self) -> list[str]:
        return list(self.texts if self.texts is not None else self.inputs or [])

    def role(self) -> InputType:
        return self.input_type or "document"


def _input_text(item: Any, i: int) -> Any:
    """The text of one v2 ``inputs`` entry (``{"content": [{"type": "text", "text": ...}, ...]}``)."""
    parts = item.get("content") if isinstance(item, dict) else None
    if not isinstance(parts, list) or not parts:
        raise ValueError(f'inputs[{i}] must be {{"content": [{{"type": "text", "text": ...}}]}}')
    if any(not isinstance(part, dict) or part.get("type") != "text" for part in parts):
        raise ValueError(f"inputs[{i}]: only content of type 'text' is supported (this server embeds text)")
    texts = [part.get("text") for part in parts]
    return texts[0] if len(texts) == 1 else " ".join(str(t) for t in texts)


def embeddings_by_type(vectors: np.ndarray, types: Sequence[str]) -> dict[str, list[Any]]:
    """Cohere's ``embeddings`` object: ``vectors [n, d]`` in each requested type (``docs/serving.md``, "Cohere")."""
    v = np.asarray(vectors, dtype=np.float32)
    int8 = np.clip(np.rint(v * 127.0), -128, 127).astype(np.int16)
    ubinary = np.packbits(v > 0, axis=-1).astype(np.int16)
    encoded = {
        "float": lambda: v.tolist(),
        "int8": lambda: int8.tolist(),
        "uint8": lambda: (int8 + 128).tolist(),
        "ubinary": lambda: ubinary.tolist(),
        "binary": lambda: (ubinary - 128).tolist(),
        "base64": lambda: [encode_vector(row, "base64") for row in v],
    }
    return {kind: encoded[kind]() for kind in dict.fromkeys(types) if kind in encoded}


def meta(version: str, *, input_tokens: int | None = None, search_units: int | None = None) -> dict[str, Any]:
    """Cohere's ``meta``: the API version and the billed units of this call."""
    units = {"input_tokens": input_tokens, "search_units": search_units}
    billed = {k: int(v) for k, v in units.items() if v is not None}
    return {"api_version": {"version": version}, "billed_units": billed}


def request_id() -> str:
    return str(uuid.uuid4())


def embed_response(
    body: CohereEmbedRequest, vectors: np.ndarray, tokens: int, version: Literal["1", "2"]
) -> dict[str, Any]:
    """The answer of ``/v{version}/embed``: v1 without ``embedding_types`` gets a plain float list."""
    answer: dict[str, Any] = {"id": request_id(), "texts": body.text_list(), "meta": meta(version, input_tokens=tokens)}
    if version == "1" and body.embedding_types is None:
        return {**answer, "response_type": "embeddings_floats", "embeddings": np.asarray(vectors, np.float32).tolist()}
    types = body.embedding_types or ["float"]
    return {**answer, "response_type": "embeddings_by_type", "embeddings": embeddings_by_type(vectors, types)}
