"""One forward pass of a multimodal model -> the probability of each image slot (local or served alike).

Shared by the LlamaIndex postprocessor (:mod:`.rerank`) and the image worker of
``posfair serve`` (:mod:`llamaindex_posfair.serve.worker`), so both score alike;
it imports no LlamaIndex and no serving code.

Example:
    >>> calibrator = make_calibrator(state, top_k_layers=2, sharpen=5.0, variant="linear")  # doctest: +SKIP
    >>> slot_probabilities(adapter, calibrator, "ours", "a red bus", images)                 # doctest: +SKIP
    tensor([0.71, 0.12, 0.09, 0.08], dtype=torch.float64)
"""

from __future__ import annotations

import torch

from .calibrator import AttentionGuidedCalibrator, CalibrationState, CalibratorConfig
from .types import MultiImageScorer

__all__ = ["make_calibrator", "slot_probabilities"]


def make_calibrator(
    state: CalibrationState, top_k_layers: int, sharpen: float, variant: str
) -> AttentionGuidedCalibrator:
    """The calibrator of a fitted state with these inference settings (cheap: no model call)."""
    cfg = CalibratorConfig(top_k=top_k_layers, sharpen=sharpen, layer_range=state.layer_range, variant=variant)
    return AttentionGuidedCalibrator(cfg, state)


def slot_probabilities(
    scorer: MultiImageScorer, calibrator: AttentionGuidedCalibrator | None, method: str, query: str, images: list
) -> torch.Tensor:
    """One forward pass; the probability ``[N]`` of each image being the answer (in the given order).

    ``method="vanilla"`` is the softmax of the model's answer scores; the other methods
    correct them with ``calibrator`` (required for them).
    """
    result = scorer.score(query, images)
    raw = result.logits.double() if method == "vanilla" else calibrator.scores(result, method)
    return torch.softmax(raw, dim=0)
