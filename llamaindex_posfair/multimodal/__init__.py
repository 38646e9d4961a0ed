"""Multimodal reranking with attention-guided position-bias calibration (method C).

Layers, lowest first: pure math (:mod:`.bias`, :mod:`.posterior`,
:mod:`.pride`, :mod:`.metrics`) ← :mod:`.calibrator` /
:mod:`.evaluate` / :mod:`.scoring` ← adapters (:mod:`.attention_capture`, :mod:`.mllm_adapter`,
:mod:`.qwen_adapter`) ← LlamaIndex integration (:mod:`.rerank`). Names are
imported lazily so ``import llamaindex_posfair.multimodal`` stays cheap.
"""

from __future__ import annotations

from llamaindex_posfair._lazy import lazy_exports

_EXPORTS = {
    "ForwardResult": ".types",
    "Candidates": ".types",
    "MultiImageScorer": ".types",
    "CalibratorConfig": ".calibrator",
    "CalibrationState": ".calibrator",
    "CalibrationMismatchError": ".calibrator",
    "AttentionGuidedCalibrator": ".calibrator",
    "self_consistency_scores": ".calibrator",
    "QwenVLAdapter": ".qwen_adapter",
    "PromptTemplate": ".mllm_adapter",
    "PosFairImageRerank": ".rerank",
    "ImageLoadError": ".images",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
