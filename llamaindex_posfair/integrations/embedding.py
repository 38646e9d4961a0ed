"""``PosFairEmbedding``: a LlamaIndex embedding model with position-fair calibration."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Literal

from llama_index.core.base.embeddings.base import DEFAULT_EMBED_BATCH_SIZE, BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.callbacks import CallbackManager

from llamaindex_posfair.calibration.config import CalibrationConfig

logger = logging.getLogger(__name__)

#: The default model: all-MiniLM-L6-v2, shipped with the package (works offline).
DEFAULT_MODEL = "bundled:all-MiniLM-L6-v2"

Backend = Literal["fast", "reference"]
DType = Literal["float32", "bfloat16", "float16"]


def load_encoder(
    model_name: str,
    calibration: CalibrationConfig | None,
    *,
    backend: str = "fast",
    max_length: int | None = None,
    device: str | None = None,
    dtype: str | None = None,
    query_prompt: str | None = None,
    document_prompt: str | None = None,
    normalize: bool = True,
    batch_size: int = 32,
    trust_remote_code: bool = False,
    dump_tokens: int | None = None,
) -> Any:
    """Load a :class:`~llamaindex_posfair.PosFairEncoder` and check its DUMP prefix.

    Raises:
        OSError: the model cannot be found (the message says what to pass instead).
        ValueError: ``dump_tokens`` is given and the model has another number of
            ``[DUMP_k]`` prefix tokens.
    """
    from llamaindex_posfair.encoders.encoder import PosFairEncoder

    encoder = PosFairEncoder(
        model_name,
        calibration=calibration,
        backend=backend,
        max_length=max_length,
        device=device,
        dtype=dtype,
        query_prompt=query_prompt,
        document_prompt=document_prompt,
        normalize=normalize,
        batch_size=batch_size,
        trust_remote_code=trust_remote_code,
    )
    if dump_tokens is not None and encoder.dump_tokens != dump_tokens:
        raise ValueError(
            f"dump_tokens={dump_tokens}, but model {model_name!r} has {encoder.dump_tokens} [DUMP] prefix tokens; "
            "pass dump_tokens=None to accept the model's prefix, or the folder of a model saved with save_dump_model"
        )
    return encoder


def count_truncated(encoder: Any, texts: list[str]) -> int:
    """How many ``texts`` exceed the encoder's window (special tokens included)."""
    limit = encoder.max_length
    return sum(1 for n in encoder.count_tokens(texts) if n > limit)


class PosFairEmbedding(BaseEmbedding):
    """LlamaIndex embedding model that encodes with position-fair attention calibration.

    Every setting is a pydantic field, so LlamaIndex's ``IngestionPipeline``
    cache key changes whenever any of them does (the calibration settings are
    one nested :class:`~llamaindex_posfair.CalibrationConfig` field). Queries go
    through ``encode_queries`` (``query_prompt``), texts through
    ``encode_documents`` (``document_prompt``); async calls run the model in a
    worker thread, so they never block the event loop. LlamaIndex's embedding
    instrumentation events (``EmbeddingStartEvent``/``EmbeddingEndEvent`` and
    callback events) are emitted by the base class around every call.

    Texts longer than ``max_length`` tokens are truncated by the model; each call
    logs how many were (``warn_on_truncation``). Empty queries raise.

    To rerank results of an index built with another embedding, use
    :class:`~llamaindex_posfair.PositionFairRerank` instead (no re-indexing).

    Args:
        model_name: sentence-transformers model name or local path; default the
            bundled all-MiniLM-L6-v2 (works offline). A model saved with
            ``save_dump_model`` loads with its ``[DUMP]`` prefix applied.
        calibration: calibration settings, or ``None`` for the plain model.
        backend: ``"fast"`` or ``"reference"`` (slow; for checks).
        dump_tokens: expected number of ``[DUMP]`` prefix tokens (``None`` accepts
            the model's; set after loading to the model's actual count).
        query_prompt / document_prompt: text prepended to queries / documents.
        embed_batch_size: texts per model forward pass.
        max_length: tokens per text including special tokens; ``None`` = model's.
        normalize: L2-normalise embeddings.
        device: ``"cpu"``, ``"cuda"``, ...; ``None`` picks CUDA when available.
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"``; ``None`` = model's.
        trust_remote_code: run code shipped with a hub model.
        warn_on_truncation: log how many texts of each call were truncated.
        encoder: an already loaded ``PosFairEncoder`` to reuse (e.g. shared with a
            reranker); the fields are then read from it.

    Raises:
        OSError: the model cannot be found locally or on the hub.
        pydantic.ValidationError / ValueError: a setting is invalid (message names it).

    Example:
        >>> from llama_index.core import Document, VectorStoreIndex
        >>> from llamaindex_posfair import CalibrationConfig, PosFairEmbedding
        >>> embed = PosFairEmbedding(calibration=CalibrationConfig(strength=0.5))
        >>> len(embed.get_query_embedding("where is the evidence?"))
        384
        >>> index = VectorStoreIndex.from_documents([Document(text="...")], embed_model=embed)  # doctest: +SKIP
    """

    model_name: str = Field(
        default=DEFAULT_MODEL,
        description="sentence-transformers model name or local path; 'bundled:all-MiniLM-L6-v2' is shipped.",
    )
    calibration: CalibrationConfig | None = Field(
        default_factory=CalibrationConfig,
        description="Position-fair calibration settings (basket size, strength, layers, ...); None = plain model.",
    )
    backend: Backend = Field(default="fast", description='Calibration backend: "fast" or "reference" (slow).')
    dump_tokens: int | None = Field(
        default=None, ge=0, description="Number of [DUMP] prefix tokens of the model; None accepts the model's."
    )
    query_prompt: str | None = Field(default=None, description="Text prepended to every query.")
    document_prompt: str | None = Field(default=None, description="Text prepended to every document/text.")
    max_length: int | None = Field(
        default=None, ge=2, description="Maximum tokens per text, special tokens included; None = model's limit."
    )
    normalize: bool = Field(default=True, description="L2-normalise embeddings.")
    device: str | None = Field(default=None, description='Torch device ("cpu", "cuda", ...); None = auto.')
    dtype: DType | None = Field(default=None, description='"float32", "bfloat16" or "float16"; None = model\'s.')
    trust_remote_code: bool = Field(default=False, description="Allow code shipped with a hub model to run.")
    warn_on_truncation: bool = Field(default=True, description="Log how many texts per call were truncated.")

    _encoder: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default=None)

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        calibration: CalibrationConfig | None = CalibrationConfig(),
        *,
        encoder: Any = None,
        embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        if encoder is not None:
            kwargs.setdefault("query_prompt", encoder.query_prompt)
            kwargs.setdefault("document_prompt", encoder.document_prompt)
            kwargs.setdefault("normalize", encoder.normalize)
            kwargs.setdefault("max_length", encoder.max_length)
            kwargs.setdefault("backend", getattr(encoder, "backend_name", "fast"))
            model_name, calibration = encoder.model_id, encoder.calibration
        super().__init__(
            model_name=model_name,
            calibration=calibration,
            embed_batch_size=embed_batch_size,
            callback_manager=callback_manager,
            **kwargs,
        )
        if encoder is None:
            encoder = load_encoder(
                self.model_name,
                self.calibration,
                backend=self.backend,
                max_length=self.max_length,
                device=self.device,
                dtype=self.dtype,
                query_prompt=self.query_prompt,
                document_prompt=self.document_prompt,
                normalize=self.normalize,
                batch_size=self.embed_batch_size,
                trust_remote_code=self.trust_remote_code,
                dump_tokens=self.dump_tokens,
            )
        elif self.dump_tokens is not None and encoder.dump_tokens != self.dump_tokens:
            raise ValueError(f"dump_tokens={self.dump_tokens}, but the given encoder has {encoder.dump_tokens}")
        self._encoder = encoder
        self._lock = threading.Lock()
        # record what was actually loaded, so the cache key reflects it
        self.dump_tokens = encoder.dump_tokens
        self.max_length = encoder.max_length

    @field_validator("model_name")
    @classmethod
    def _check_model_name(cls, value: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"model_name must be a model name or path, got {value!r}; e.g. 'bundled:all-MiniLM-L6-v2'")
        return value

    @classmethod
    def class_name(cls) -> str:
        return "PosFairEmbedding"

    @property
    def encoder(self) -> Any:
        """The underlying :class:`~llamaindex_posfair.PosFairEncoder` (also satisfies
        ``qdrant_tools.ingest.Encoder``)."""
        return self._encoder

    def fingerprint(self) -> str:
        """Stable hash of everything that changes the embeddings (stored in Qdrant payloads)."""
        return self._encoder.fingerprint()

    # ------------------------------------------------------------------ sync
    def _encode(self, texts: list[str], role: str) -> list[Embedding]:
        if self.warn_on_truncation:
            n = count_truncated(self._encoder, texts)
            if n:
                logger.warning(
                    "%d of %d %ss exceed max_length=%d tokens and were truncated by the model; "
                    "chunk them shorter (e.g. a SentenceSplitter with chunk_size <= %d)",
                    n,
                    len(texts),
                    role,
                    self._encoder.max_length,
                    self._encoder.max_length,
                )
        empty = sum(1 for t in texts if not t.strip())
        if empty:
            logger.warning("%d of %d %ss are empty; their embeddings carry no content", empty, len(texts), role)
        fn = self._encoder.encode_queries if role == "query" else self._encoder.encode_documents
        with self._lock:
            arr = fn(texts, batch_size=self.embed_batch_size)
        return arr.tolist()

    @staticmethod
    def _check_query(query: str) -> None:
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r}")

    def _get_query_embedding(self, query: str) -> Embedding:
        self._check_query(query)
        return self._encode([query], "query")[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._encode([text], "text")[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._encode(list(texts), "text")

    # ------------------------------------------------------------------ async (worker thread)
    async def _aget_query_embedding(self, query: str) -> Embedding:
        self._check_query(query)
        return (await asyncio.to_thread(self._encode, [query], "query"))[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await asyncio.to_thread(self._encode, [text], "text"))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._encode, list(texts), "text")
