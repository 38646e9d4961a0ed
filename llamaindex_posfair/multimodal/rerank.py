"""``PosFairImageRerank``: a LlamaIndex node postprocessor for image nodes.

Takes the query and the retrieved ``ImageNode``s (e.g. from a
``MultiModalVectorStoreIndex`` on Qdrant), runs **one** forward pass of the
multimodal LLM over all of them in retrieval order, and orders them by the
calibrated score (the softmax of the corrected scores over the ``N``
candidates). The retrieval score is kept in ``metadata["retrieval_score"]``.

With ``endpoint=URL`` the forward pass runs on a ``posfair serve`` server
(``POST /v1/rerank-images``); the images are loaded here (so a missing or corrupt
file is named here) and sent losslessly as PNG.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from .calibrator import AttentionGuidedCalibrator, CalibrationState, check_fitted_size
from .images import load_node_image
from .scoring import make_calibrator, slot_probabilities
from .types import MultiImageScorer

if TYPE_CHECKING:
    from llamaindex_posfair.serve.client import ServeClient

__all__ = ["PosFairImageRerank", "make_calibrator", "slot_probabilities"]

dispatcher = get_dispatcher(__name__)


def _restore_serialised(scorer: MultiImageScorer, calibration: Any, kwargs: dict[str, Any]) -> Any:
    """Take ``model_id`` / ``calibration_path`` out of ``kwargs`` (``from_dict(to_dict())`` passes them).

    The stored model must be the scorer's; a stored path is loaded when no
    calibration is given.
    """
    model_id = kwargs.pop("model_id", None)
    stored_path = kwargs.pop("calibration_path", None)
    if model_id and model_id != scorer.model_id:
        raise ValueError(
            f"model_id={model_id!r} (from serialised settings) is not the scorer's model {scorer.model_id!r}; "
            "pass the scorer of that model, or drop model_id (it is always set from the scorer)"
        )
    return stored_path if calibration is None else calibration


class _InProcessImageModel:
    """The multimodal model runs in this process."""

    def __init__(self, scorer: MultiImageScorer, calibrator: AttentionGuidedCalibrator | None) -> None:
        self.scorer = scorer
        self.calibrator = calibrator

    def probabilities(self, query: str, images: list, settings: dict[str, Any]) -> torch.Tensor:
        return slot_probabilities(self.scorer, self.calibrator, settings["method"], query, images)


class _EndpointImageModel:
    """The multimodal model runs on a ``posfair serve`` server."""

    def __init__(self, client: ServeClient) -> None:
        self.client = client

    def probabilities(self, query: str, images: list, settings: dict[str, Any]) -> torch.Tensor:
        from llamaindex_posfair.serve.client import image_to_base64

        probs = self.client.rerank_images(query, [image_to_base64(im) for im in images], **settings)
        return torch.tensor(probs, dtype=torch.float64)

    async def aprobabilities(self, query: str, images: list, settings: dict[str, Any]) -> torch.Tensor:
        from llamaindex_posfair.serve.client import image_to_base64

        encoded = await asyncio.to_thread(lambda: [image_to_base64(im) for im in images])
        probs = await self.client.arerank_images(query, encoded, **settings)
        return torch.tensor(probs, dtype=torch.float64)


class PosFairImageRerank(BaseNodePostprocessor):
    """Rerank retrieved image nodes with an attention-calibrated multimodal LLM.

    Args:
        scorer: the multimodal model adapter (e.g.
            :class:`~llamaindex_posfair.multimodal.qwen_adapter.QwenVLAdapter`);
            ``None`` with ``endpoint``.
        calibration: a fitted :class:`CalibrationState` or the path of a saved
            one; required unless ``method="vanilla"``. With ``endpoint`` the server
            holds the state; a path given here must then be the same file (checked).
        endpoint: URL of a ``posfair serve`` server with an image model (``None``: local).
        endpoint_timeout_s: seconds per HTTP call to ``endpoint``.
        top_n: number of nodes returned.
        method: ``"ours"`` (calibrated, default), ``"vanilla"``, ``"pride"`` or ``"attention"``.
        top_k_layers, sharpen, variant: inference settings of the calibrator.
        keep_retrieval_score: keep the retriever's score in ``metadata["retrieval_score"]``.

    Raises:
        ValueError: missing calibration for a calibrated method, or neither/both of
            ``scorer`` and ``endpoint``.
        CalibrationMismatchError: the calibration was fitted for another model, or the
            server's model or calibration differs from ``model_id`` / ``calibration``.

    Example:
        >>> rerank = PosFairImageRerank(scorer=adapter, calibration="cal.safetensors", top_n=3)  # doctest: +SKIP
        >>> remote = PosFairImageRerank(endpoint="http://gpu-host:8000", top_n=3)  # doctest: +SKIP
        >>> engine = index.as_query_engine(similarity_top_k=4, node_postprocessors=[rerank])  # doctest: +SKIP

    Use ``SentenceTransformerRerank`` for text nodes instead.
    """

    top_n: int = Field(default=3, gt=0, description="Number of image nodes to return, best first.")
    method: Literal["ours", "vanilla", "pride", "attention"] = Field(
        default="ours",
        description="Scoring: 'ours' (attention-guided calibration), 'vanilla', 'pride' or 'attention' (attention only).",
    )
    top_k_layers: int = Field(default=2, gt=0, description="Layers chosen per query by visual evidence strength.")
    sharpen: float = Field(default=5.0, ge=0.0, description="Sharpening of the attention posterior over slots.")
    variant: Literal["linear", "log_mixture"] = Field(
        default="linear", description="Bias correction: 'linear' (published) or 'log_mixture'."
    )
    keep_retrieval_score: bool = Field(
        default=True, description="Keep the retriever's score in node metadata['retrieval_score']."
    )
    model_id: str = Field(default="", description="Identity of the scoring model (set from the scorer).")
    calibration_path: str | None = Field(
        default=None, description="Path of the calibration state, when it was loaded from a file."
    )
    endpoint: str | None = Field(
        default=None, description="URL of a `posfair serve` server; None runs the model in this process."
    )
    endpoint_timeout_s: float = Field(default=120.0, gt=0, description="Seconds per HTTP call to the endpoint.")

    _site: Any = PrivateAttr(default=None)
    _sizes: list[int] | None = PrivateAttr(default=None)

    def __init__(
        self,
        scorer: MultiImageScorer | None = None,
        calibration: CalibrationState | str | Path | None = None,
        *,
        endpoint: str | None = None,
        **kwargs: Any,
    ) -> None:
        if (scorer is None) == (endpoint is None):
            raise ValueError("pass either scorer= (a local multimodal model) or endpoint= (a posfair serve URL)")
        if endpoint is not None:
            self._init_remote(endpoint, calibration, kwargs)
            return
        calibration = _restore_serialised(scorer, calibration, kwargs)
        path = None
        if isinstance(calibration, (str, Path)):
            path = str(calibration)
            calibration = CalibrationState.load(calibration, model_id=scorer.model_id)
        super().__init__(model_id=scorer.model_id, calibration_path=path, **kwargs)
        self._require_calibration(calibration is not None)
        calibrator = None
        if calibration is not None:
            calibration.check_model(scorer.model_id)
            calibrator = make_calibrator(calibration, self.top_k_layers, self.sharpen, self.variant)
            self._sizes = calibration.sizes
        self._site = _InProcessImageModel(scorer, calibrator)

    def _init_remote(self, endpoint: str, calibration: Any, kwargs: dict[str, Any]) -> None:
        from llamaindex_posfair.serve.client import ServeClient

        if isinstance(calibration, CalibrationState):
            raise ValueError(
                "with endpoint= the server holds the calibration state; pass its file path to check it, or nothing"
            )
        stored_path = kwargs.pop("calibration_path", None)  # from_dict(to_dict()) passes it
        calibration = stored_path if calibration is None else calibration
        client = ServeClient(endpoint, timeout_s=kwargs.get("endpoint_timeout_s", 120.0))
        card = client.check_image_model(kwargs.pop("model_id", None) or None, calibration)
        path = str(calibration) if calibration is not None else None
        super().__init__(model_id=card.id, calibration_path=path, endpoint=endpoint, **kwargs)
        self._require_calibration(bool(card.calibrated_sizes))
        self._sizes = card.calibrated_sizes
        self._site = _EndpointImageModel(client)

    def _require_calibration(self, present: bool) -> None:
        if not present and self.method != "vanilla":
            raise ValueError(
                f"method={self.method!r} needs a calibration state; fit one with "
                "AttentionGuidedCalibrator().fit(scorer, samples) (it returns the state; .save(path) writes it), "
                "start the server with --mm-calibration, or use method='vanilla'"
            )

    def _check_count(self, n: int) -> None:
        """Fail before loading anything when the calibration has no tables for ``n`` images."""
        if self._sizes is not None:
            check_fitted_size(n, self._sizes)

    @classmethod
    def class_name(cls) -> str:
        return "PosFairImageRerank"

    def _settings(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "top_k_layers": self.top_k_layers,
            "sharpen": self.sharpen,
            "variant": self.variant,
        }

    def rerank_scores(self, query: str, images: list) -> torch.Tensor:
        """Calibrated probabilities ``[N]`` of each image being the answer (in the given order)."""
        return self._site.probabilities(query, images, self._settings())

    def _start(self, nodes: list[NodeWithScore], query_bundle: QueryBundle) -> list:
        """Start event, count check and image loading: every input error is raised before any compute."""
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n, model_name=self.model_id))
        self._check_count(len(nodes))  # N not fitted: fail before loading anything
        return [load_node_image(n.node) for n in nodes]  # raises, naming the node, before any compute

    def _event(self, nodes: list[NodeWithScore], query: str) -> Any:
        return self.callback_manager.event(
            CBEventType.RERANKING,
            payload={
                EventPayload.NODES: nodes,
                EventPayload.MODEL_NAME: self.model_id,
                EventPayload.QUERY_STR: query,
                EventPayload.TOP_K: self.top_n,
            },
        )

    def _ranked(self, nodes: list[NodeWithScore], probs: torch.Tensor) -> list[NodeWithScore]:
        out = []
        for n, p in zip(nodes, probs.tolist()):
            node = n.node
            if self.keep_retrieval_score:
                node.metadata["retrieval_score"] = n.score
            out.append(NodeWithScore(node=node, score=float(p)))
        return sorted(out, key=lambda x: -x.score)[: self.top_n]

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("query_bundle is required: the reranker scores images against the query text")
        if len(nodes) < 2:
            return list(nodes)[: self.top_n]
        images = self._start(nodes, query_bundle)
        with self._event(nodes, query_bundle.query_str) as event:
            out = self._ranked(nodes, self.rerank_scores(query_bundle.query_str, images))
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """Async: with ``endpoint`` the server call is awaited; a local forward pass runs in a worker thread."""
        if self.endpoint is None or query_bundle is None or len(nodes) < 2:
            return await asyncio.to_thread(self._postprocess_nodes, nodes, query_bundle)
        images = await asyncio.to_thread(self._start, nodes, query_bundle)
        with self._event(nodes, query_bundle.query_str) as event:
            probs = await self._site.aprobabilities(query_bundle.query_str, images, self._settings())
            out = self._ranked(nodes, probs)
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out
