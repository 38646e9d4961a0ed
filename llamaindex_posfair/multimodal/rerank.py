"""``AttentionGuidedImageRerank``: a LlamaIndex node postprocessor for image nodes.

Takes the query and the retrieved ``ImageNode``s (e.g. from a
``MultiModalVectorStoreIndex`` on Qdrant), runs **one** forward pass of the
multimodal LLM over all of them in retrieval order, and orders them by the
calibrated score (the softmax of the corrected scores over the ``N``
candidates). The retrieval score is kept in ``metadata["retrieval_score"]``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import torch
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from .calibrator import AttentionGuidedCalibrator, CalibrationState, CalibratorConfig
from .images import load_node_image
from .types import MultiImageScorer

__all__ = ["AttentionGuidedImageRerank"]

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


class AttentionGuidedImageRerank(BaseNodePostprocessor):
    """Rerank retrieved image nodes with an attention-calibrated multimodal LLM.

    Args:
        scorer: the multimodal model adapter (e.g.
            :class:`~llamaindex_posfair.multimodal.qwen_adapter.QwenVLAdapter`).
        calibration: a fitted :class:`CalibrationState` or the path of a saved
            one; required unless ``method="vanilla"``.
        top_n: number of nodes returned.
        method: ``"ours"`` (calibrated, default), ``"vanilla"``, ``"pride"`` or ``"attention"``.
        top_k_layers, sharpen, variant: inference settings of the calibrator.
        keep_retrieval_score: keep the retriever's score in ``metadata["retrieval_score"]``.

    Raises:
        ValueError: missing calibration for a calibrated method.
        CalibrationMismatchError: the calibration was fitted for another model.

    Example:
        >>> rerank = AttentionGuidedImageRerank(scorer=adapter, calibration="cal.safetensors", top_n=3)  # doctest: +SKIP
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

    _scorer: Any = PrivateAttr()
    _calibrator: AttentionGuidedCalibrator | None = PrivateAttr(default=None)

    def __init__(
        self,
        scorer: MultiImageScorer,
        calibration: CalibrationState | str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        calibration = _restore_serialised(scorer, calibration, kwargs)
        path = None
        if isinstance(calibration, (str, Path)):
            path = str(calibration)
            calibration = CalibrationState.load(calibration, model_id=scorer.model_id)
        super().__init__(model_id=scorer.model_id, calibration_path=path, **kwargs)
        if calibration is None and self.method != "vanilla":
            raise ValueError(
                f"method={self.method!r} needs a calibration state; fit one with "
                "AttentionGuidedCalibrator().fit(scorer, samples) (it returns the state; .save(path) writes it) "
                "or use method='vanilla'"
            )
        self._scorer = scorer
        if calibration is not None:
            calibration.check_model(scorer.model_id)
            cfg = CalibratorConfig(
                top_k=self.top_k_layers, sharpen=self.sharpen, layer_range=calibration.layer_range, variant=self.variant
            )
            self._calibrator = AttentionGuidedCalibrator(cfg, calibration)

    @classmethod
    def class_name(cls) -> str:
        return "AttentionGuidedImageRerank"

    def rerank_scores(self, query: str, images: list) -> torch.Tensor:
        """Calibrated probabilities ``[N]`` of each image being the answer (in the given order)."""
        result = self._scorer.score(query, images)
        if self.method == "vanilla":
            raw = result.logits.double()
        else:
            raw = self._calibrator.scores(result, self.method)
        return torch.softmax(raw, dim=0)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("query_bundle is required: the reranker scores images against the query text")
        if len(nodes) < 2:
            return list(nodes)[: self.top_n]
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n, model_name=self.model_id))
        if self._calibrator is not None:
            self._calibrator.state.table(len(nodes))  # N not fitted: fail before loading anything
        images = [load_node_image(n.node) for n in nodes]  # raises, naming the node, before any compute
        with self.callback_manager.event(
            CBEventType.RERANKING,
            payload={
                EventPayload.NODES: nodes,
                EventPayload.MODEL_NAME: self.model_id,
                EventPayload.QUERY_STR: query_bundle.query_str,
                EventPayload.TOP_K: self.top_n,
            },
        ) as event:
            probs = self.rerank_scores(query_bundle.query_str, images)
            out = []
            for n, p in zip(nodes, probs.tolist()):
                node = n.node
                if self.keep_retrieval_score:
                    node.metadata["retrieval_score"] = n.score
                out.append(NodeWithScore(node=node, score=float(p)))
            out = sorted(out, key=lambda x: -x.score)[: self.top_n]
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        # the forward pass is CPU/GPU-bound: keep it off the event loop
        return await asyncio.to_thread(self._postprocess_nodes, nodes, query_bundle)
