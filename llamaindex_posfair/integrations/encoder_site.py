"""Where the LlamaIndex classes' encoder runs: in this process, or on a ``posfair serve`` server.

:class:`PosFairEmbedding` and :class:`PosFairRerank` keep every LlamaIndex
concern (fields, events, blending, sorting, logging) and delegate the model work
to one small site object with the same calls (``embed``, ``scores`` and their async twins):

* :class:`InProcessEncoder`: a loaded :class:`~llamaindex_posfair.PosFairEncoder`;
* :class:`EndpointEncoder`: a :class:`~llamaindex_posfair.serve.client.ServeClient`
  whose server was checked to serve the expected spec (same fingerprint).

Both return the same vectors and scores (the server runs the same encoder and the
same :mod:`~llamaindex_posfair.integrations.node_scoring`), so the rest of the code
does not know which one it has.

Example:
    >>> spec, site = encoder_site(None, None, UNSET, None, {}, endpoint=None)  # doctest: +SKIP
    >>> vectors, truncated = site.embed(["a passage"], "document")             # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from llamaindex_posfair.encoders.spec import resolve_spec
from llamaindex_posfair.integrations.node_scoring import NODE_SCORING, NodeScorer, ScoringSettings

if TYPE_CHECKING:
    from llamaindex_posfair.serve.client import ServeClient

Role = Literal["query", "document"]


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
        if spec is not None and resolve_spec(spec).resolved() != encoder.spec:
            raise ValueError(
                "spec= differs from the spec of the encoder= passed beside it; pass one of them "
                "(encoder= already fixes every encoder setting)"
            )
        resolve_spec(encoder.spec, model=model_name, calibration=calibration, **settings)  # raises if they disagree
        return encoder.spec, encoder
    spec = resolve_spec(spec, model=model_name, calibration=calibration, **settings)
    encoder = spec.load()
    return encoder.spec, encoder


class InProcessEncoder:
    """The encoder runs in this process (calls are serialised by a lock; async calls use a worker thread).

    Args:
        encoder: a loaded ``PosFairEncoder`` or ``CalibrationView`` (or a stand-in with the same calls).
    """

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self._lock = threading.Lock()

    @property
    def spec(self) -> Any:
        return self.encoder.spec

    @property
    def max_length(self) -> int:
        return int(self.encoder.max_length)

    def embed(self, texts: list[str], role: Role, *, count: bool = True) -> tuple[np.ndarray, int]:
        """``(vectors [n, d], how many texts were truncated)``, in the encoder's own forward batches;
        ``count=False`` skips the count (returns 0)."""
        truncated = count_truncated(self.encoder, texts) if count else 0
        fn = self.encoder.encode_queries if role == "query" else self.encoder.encode_documents
        with self._lock:
            return fn(texts), truncated

    async def aembed(self, texts: list[str], role: Role, **kwargs: Any) -> tuple[np.ndarray, int]:
        return await asyncio.to_thread(self.embed, texts, role, **kwargs)

    def scores(self, query: str, texts: list[str], scoring: ScoringSettings = NODE_SCORING) -> np.ndarray:
        """Score of each text for the query, in the given order (node cosine, best sub-chunk or node-weighted)."""
        scorer = NodeScorer(self.encoder, scoring.scoring, scoring.subchunks, scoring.node_weight, scoring.node_source)
        with self._lock:
            return scorer.scores(query, texts)

    async def ascores(self, query: str, texts: list[str], scoring: ScoringSettings = NODE_SCORING) -> np.ndarray:
        return await asyncio.to_thread(self.scores, query, texts, scoring)


class EndpointEncoder:
    """The encoder runs on a ``posfair serve`` server (see :mod:`llamaindex_posfair.serve`).

    Args:
        client: a :class:`~llamaindex_posfair.serve.client.ServeClient`.
        spec: the spec the server was checked to serve (pinned with its weights hash).
        max_length: the served model's window, in tokens.
    """

    def __init__(self, client: ServeClient, spec: Any, max_length: int) -> None:
        self.client = client
        self.spec = spec
        self.max_length = int(max_length)

    @classmethod
    def connect(cls, endpoint: str, spec: Any, timeout_s: float) -> EndpointEncoder:
        """Open a client and check that the server serves ``spec``.

        Raises:
            llamaindex_posfair.serve.client.ServeMismatchError: the server serves other vectors.
            llamaindex_posfair.serve.client.ServeError: the server cannot be reached or refuses the token.
        """
        from llamaindex_posfair.serve.client import ServeClient

        client = ServeClient(endpoint, timeout_s=timeout_s)
        pinned, card = client.check_encoder(spec)
        return cls(client, pinned, card.max_length or 0)

    def embed(self, texts: list[str], role: Role, **_: Any) -> tuple[np.ndarray, int]:
        return self.client.embed(texts, role)

    async def aembed(self, texts: list[str], role: Role, **_: Any) -> tuple[np.ndarray, int]:
        return await self.client.aembed(texts, role)

    def scores(self, query: str, texts: list[str], scoring: ScoringSettings = NODE_SCORING) -> np.ndarray:
        return self.client.rerank(query, texts, **scoring.wire())

    async def ascores(self, query: str, texts: list[str], scoring: ScoringSettings = NODE_SCORING) -> np.ndarray:
        return await self.client.arerank(query, texts, **scoring.wire())


def encoder_site(
    spec: Any,
    model_name: Any,
    calibration: Any,
    encoder: Any,
    settings: dict,
    *,
    endpoint: str | None,
    timeout_s: float = 60.0,
) -> tuple[Any, Any]:
    """The pinned spec and the encoder site of a LlamaIndex class's arguments.

    Without ``endpoint`` the model is loaded here (unless ``encoder`` is given); with
    ``endpoint`` nothing is loaded: the spec describes what the server must serve.

    Raises:
        ValueError: ``encoder`` together with spec settings or with ``endpoint``, or settings
            that disagree with ``spec``.
    """
    if endpoint is None:
        spec, encoder = spec_and_encoder(spec, model_name, calibration, encoder, settings)
        return spec, InProcessEncoder(encoder)
    if encoder is not None:
        raise ValueError(
            f"encoder= runs the model in this process and endpoint={endpoint!r} runs it on a server; pass one of them"
        )
    site = EndpointEncoder.connect(
        endpoint, resolve_spec(spec, model=model_name, calibration=calibration, **settings), timeout_s
    )
    return site.spec, site


__all__ = [
    "EndpointEncoder",
    "InProcessEncoder",
    "count_truncated",
    "encoder_site",
    "spec_and_encoder",
]
