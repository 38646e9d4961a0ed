"""``PosFairEmbedding``: a LlamaIndex embedding model of a position-fair encoder (plain or calibrated)."""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager

from llamaindex_posfair.encoders.models import BUNDLED_MINILM
from llamaindex_posfair.encoders.spec import UNSET, EncoderSpec
from llamaindex_posfair.integrations.encoder_site import encoder_site, spec_and_encoder

__all__ = ["DEFAULT_MODEL", "PosFairEmbedding", "spec_and_encoder"]

logger = logging.getLogger(__name__)

#: Texts per call from LlamaIndex: the encoder sorts them by length and pads within its own forward batches.
EMBED_BATCH_SIZE = 128

#: The default model: all-MiniLM-L6-v2, shipped with the package (works offline).
DEFAULT_MODEL = BUNDLED_MINILM


class PosFairEmbedding(BaseEmbedding):
    """LlamaIndex embedding model of a position-fair encoder: by default the plain model, the encoder of the
    sub-chunk layout ``posfair ingest`` writes; ``calibration=CalibrationConfig()`` (or a preset) switches
    position-fair attention calibration on.

    Every encoder setting lives in one field, ``spec`` (an :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`,
    pinned to the content hash of the loaded weights), so LlamaIndex's ``IngestionPipeline`` cache key changes
    whenever any setting or the model's files do. Queries use ``query_prompt``, texts ``document_prompt``; async
    calls never block the event loop; each call logs how many texts the model truncated (``warn_on_truncation``);
    empty queries raise. With ``endpoint=URL`` the model runs on a ``posfair serve`` server whose spec fingerprint
    the constructor checks (docs/serving.md). To rerank an index built with another embedding, use
    :class:`~llamaindex_posfair.PosFairRerank` (no re-indexing).

    Args:
        model_name: model folder, hub name or ``"bundled:all-MiniLM-L6-v2"`` (default).
        calibration: calibration settings (e.g. ``CalibrationConfig()``), or ``None`` (default) for the plain model.
        spec: a whole :class:`EncoderSpec` instead of ``model_name``/``calibration``/settings.
        encoder: an already loaded ``PosFairEncoder`` (or view) to reuse, e.g. shared with a
            reranker; the spec is then the encoder's.
        endpoint: URL of a ``posfair serve`` server (``None``: run the model in this process).
        endpoint_timeout_s: seconds per HTTP call to ``endpoint`` (each retry included).
        embed_batch_size: texts per call from LlamaIndex (per request with ``endpoint``). The encoder
            sorts each call's texts by length and runs them in forward passes of its own
            ``batch_size`` (the spec's, 32 by default), so a larger call pads less; default 128.
        warn_on_truncation: log how many texts of each call were truncated.
        **settings: any other :class:`EncoderSpec` field (``query_prompt``, ``max_length``,
            ``dtype``, ``device``, ``dump_tokens``, ``normalize``, ``trust_remote_code``, ...).

    Raises:
        OSError: the model cannot be found locally or on the hub.
        ValueError: a setting is invalid, or disagrees with ``spec`` (the message names it).
        llamaindex_posfair.serve.client.ServeMismatchError: ``endpoint`` serves another encoder.
        llamaindex_posfair.serve.client.ServeError: ``endpoint`` cannot be reached or refuses the token.

    Example:
        >>> from llama_index.core import Document, VectorStoreIndex
        >>> from llamaindex_posfair import CalibrationConfig, PosFairEmbedding
        >>> embed = PosFairEmbedding(calibration=CalibrationConfig(strength=0.5))
        >>> len(embed.get_query_embedding("where is the evidence?"))
        384
        >>> index = VectorStoreIndex.from_documents([Document(text="...")], embed_model=embed)  # doctest: +SKIP
        >>> remote = PosFairEmbedding(endpoint="http://gpu-host:8000")  # doctest: +SKIP
    """

    spec: EncoderSpec = Field(
        default_factory=EncoderSpec,
        description="Every encoder setting (model and weights hash, calibration, prompts, max length, dtype, ...).",
    )
    warn_on_truncation: bool = Field(default=True, description="Log how many texts per call were truncated.")
    endpoint: str | None = Field(
        default=None, description="URL of a `posfair serve` server; None runs the model in this process."
    )
    endpoint_timeout_s: float = Field(default=60.0, gt=0, description="Seconds per HTTP call to the endpoint.")

    _site: Any = PrivateAttr(default=None)

    def __init__(
        self,
        model_name: str | None = None,
        calibration: Any = UNSET,
        *,
        spec: Any = None,
        encoder: Any = None,
        embed_batch_size: int = EMBED_BATCH_SIZE,
        callback_manager: CallbackManager | None = None,
        warn_on_truncation: bool = True,
        endpoint: str | None = None,
        endpoint_timeout_s: float = 60.0,
        **settings: Any,
    ) -> None:
        base = {k: settings.pop(k) for k in list(settings) if k in BaseEmbedding.model_fields}
        spec, site = encoder_site(
            spec, model_name, calibration, encoder, settings, endpoint=endpoint, timeout_s=endpoint_timeout_s
        )
        super().__init__(
            spec=spec,
            model_name=spec.model,
            embed_batch_size=embed_batch_size,
            callback_manager=callback_manager,
            warn_on_truncation=warn_on_truncation,
            endpoint=endpoint,
            endpoint_timeout_s=endpoint_timeout_s,
            **base,
        )
        self._site = site

    @classmethod
    def class_name(cls) -> str:
        return "PosFairEmbedding"

    @property
    def encoder(self) -> Any:
        """The underlying :class:`~llamaindex_posfair.PosFairEncoder` (also satisfies
        ``qdrant_tools.ingest.Encoder``).

        Raises:
            RuntimeError: with ``endpoint`` (no model is loaded in this process).
        """
        return local_encoder(self._site, self.endpoint)

    @property
    def calibration(self) -> Any:
        """The spec's calibration (read-only; build a new instance to change it)."""
        return self.spec.calibration

    def fingerprint(self) -> str:
        """Stable hash of everything that shapes the embeddings (stored in Qdrant payloads)."""
        return self.spec.fingerprint()

    # ------------------------------------------------------------------ sync
    def _warn(self, texts: list[str], role: str, truncated: int) -> None:
        if truncated:
            limit = self._site.max_length
            logger.warning(
                "%d of %d %ss exceed max_length=%d tokens and were truncated by the model; "
                "chunk them shorter (e.g. a SentenceSplitter with chunk_size <= %d)",
                truncated,
                len(texts),
                role,
                limit,
                limit,
            )
        empty = sum(1 for t in texts if not t.strip())
        if empty:
            logger.warning("%d of %d %ss are empty; their embeddings carry no content", empty, len(texts), role)

    def _encode(self, texts: list[str], role: str) -> list[Embedding]:
        arr, truncated = self._site.embed(texts, _kind(role), count=self.warn_on_truncation)
        self._warn(texts, role, truncated if self.warn_on_truncation else 0)
        return arr.tolist()

    async def _aencode(self, texts: list[str], role: str) -> list[Embedding]:
        arr, truncated = await self._site.aembed(texts, _kind(role), count=self.warn_on_truncation)
        self._warn(texts, role, truncated if self.warn_on_truncation else 0)
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

    # ------------------------------------------------------------------ async (worker thread or async HTTP)
    async def _aget_query_embedding(self, query: str) -> Embedding:
        self._check_query(query)
        return (await self._aencode([query], "query"))[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aencode([text], "text"))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await self._aencode(list(texts), "text")


def _kind(role: str) -> str:
    """``"query"`` or ``"document"`` (LlamaIndex's texts are documents)."""
    return "query" if role == "query" else "document"


def local_encoder(site: Any, endpoint: str | None) -> Any:
    """The loaded encoder of an in-process site.

    Raises:
        RuntimeError: the class runs its model on ``endpoint``.
    """
    encoder = getattr(site, "encoder", None)
    if encoder is None:
        raise RuntimeError(
            f"no encoder is loaded in this process: the model runs on {endpoint}; build the class without "
            "endpoint= to use the encoder directly"
        )
    return encoder
