"""``PosFairEmbedding``: a LlamaIndex embedding model with position-fair calibration."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from llama_index.core.base.embeddings.base import DEFAULT_EMBED_BATCH_SIZE, BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager

from llamaindex_posfair.encoders.models import BUNDLED_MINILM
from llamaindex_posfair.encoders.spec import UNSET, EncoderSpec, resolve_spec

logger = logging.getLogger(__name__)

#: The default model: all-MiniLM-L6-v2, shipped with the package (works offline).
DEFAULT_MODEL = BUNDLED_MINILM


def count_truncated(encoder: Any, texts: list[str]) -> int:
    """How many ``texts`` exceed the encoder's window (special tokens included)."""
    limit = encoder.max_length
    return sum(1 for n in encoder.count_tokens(texts) if n > limit)


def spec_and_encoder(spec: Any, model_name: Any, calibration: Any, encoder: Any, settings: dict) -> tuple[Any, Any]:
    """The pinned spec and the loaded encoder of a LlamaIndex class's arguments (loads unless ``encoder`` is given).

    Raises:
        ValueError: settings that disagree with ``spec`` or with the ``encoder``'s spec.
    """
    if encoder is not None:
        if spec is not None and resolve_spec(spec) != encoder.spec:
            raise ValueError(
                "spec= differs from the spec of the encoder= passed beside it; pass one of them "
                "(encoder= already fixes every encoder setting)"
            )
        resolve_spec(encoder.spec, model=model_name, calibration=calibration, **settings)  # raises if they disagree
        return encoder.spec, encoder
    spec = resolve_spec(spec, model=model_name, calibration=calibration, **settings)
    encoder = spec.load()
    return encoder.spec, encoder


class PosFairEmbedding(BaseEmbedding):
    """LlamaIndex embedding model that encodes with position-fair attention calibration.

    Every encoder setting lives in one field, ``spec`` (an
    :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`, pinned to the content hash
    of the loaded weights), so LlamaIndex's ``IngestionPipeline`` cache key changes
    whenever any setting does — or when the model is retrained into the same folder —
    also when the class wraps an already loaded ``encoder=``. Queries go through
    ``encode_queries`` (``query_prompt``), texts through ``encode_documents``
    (``document_prompt``); async calls run the model in a worker thread, so they
    never block the event loop. LlamaIndex's embedding instrumentation events are
    emitted by the base class around every call.

    Texts longer than ``max_length`` tokens are truncated by the model; each call
    logs how many were (``warn_on_truncation``). Empty queries raise.

    To rerank results of an index built with another embedding, use
    :class:`~llamaindex_posfair.PositionFairRerank` instead (no re-indexing).

    Args:
        model_name: model folder, hub name or ``"bundled:all-MiniLM-L6-v2"`` (default).
        calibration: calibration settings, or ``None`` for the plain model.
        spec: a whole :class:`EncoderSpec` instead of ``model_name``/``calibration``/settings.
        encoder: an already loaded ``PosFairEncoder`` (or view) to reuse, e.g. shared with a
            reranker; the spec is then the encoder's.
        embed_batch_size: texts per model call (LlamaIndex's batching).
        warn_on_truncation: log how many texts of each call were truncated.
        **settings: any other :class:`EncoderSpec` field (``query_prompt``, ``max_length``,
            ``dtype``, ``device``, ``dump_tokens``, ``normalize``, ``trust_remote_code``, ...).

    Raises:
        OSError: the model cannot be found locally or on the hub.
        ValueError: a setting is invalid, or disagrees with ``spec`` (the message names it).

    Example:
        >>> from llama_index.core import Document, VectorStoreIndex
        >>> from llamaindex_posfair import CalibrationConfig, PosFairEmbedding
        >>> embed = PosFairEmbedding(calibration=CalibrationConfig(strength=0.5))
        >>> len(embed.get_query_embedding("where is the evidence?"))
        384
        >>> index = VectorStoreIndex.from_documents([Document(text="...")], embed_model=embed)  # doctest: +SKIP
    """

    spec: EncoderSpec = Field(
        default_factory=EncoderSpec,
        description="Every encoder setting (model and weights hash, calibration, prompts, max length, dtype, ...).",
    )
    warn_on_truncation: bool = Field(default=True, description="Log how many texts per call were truncated.")

    _encoder: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default=None)

    def __init__(
        self,
        model_name: str | None = None,
        calibration: Any = UNSET,
        *,
        spec: Any = None,
        encoder: Any = None,
        embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        callback_manager: CallbackManager | None = None,
        warn_on_truncation: bool = True,
        **settings: Any,
    ) -> None:
        base = {k: settings.pop(k) for k in list(settings) if k in BaseEmbedding.model_fields}
        spec, encoder = spec_and_encoder(spec, model_name, calibration, encoder, settings)
        super().__init__(
            spec=spec,
            model_name=spec.model,
            embed_batch_size=embed_batch_size,
            callback_manager=callback_manager,
            warn_on_truncation=warn_on_truncation,
            **base,
        )
        self._encoder = encoder
        self._lock = threading.Lock()

    @classmethod
    def class_name(cls) -> str:
        return "PosFairEmbedding"

    @property
    def encoder(self) -> Any:
        """The underlying :class:`~llamaindex_posfair.PosFairEncoder` (also satisfies
        ``qdrant_tools.ingest.Encoder``)."""
        return self._encoder

    @property
    def calibration(self) -> Any:
        """The spec's calibration (read-only; build a new instance to change it)."""
        return self.spec.calibration

    def fingerprint(self) -> str:
        """Stable hash of everything that shapes the embeddings (stored in Qdrant payloads)."""
        return self.spec.fingerprint()

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
