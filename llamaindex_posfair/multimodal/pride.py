"""PriDe baseline: a static prior over option IDs, divided out (pure math).

PriDe (Zheng et al., 2024; ``chujiezheng/LLM-MCQ-Bias``) models the observed
choice distribution as ``P_obs(slot k) ∝ P_prior(k) · P_debiased(content at k)``.
Averaging ``log P_obs`` over the cyclic permutations of a few samples cancels
the content term (every image visits every slot), leaving the prior: its
normalised **geometric mean** over passes. Inference divides it out:
``log P_obs − log P_prior``. Unlike :mod:`.bias` it cannot see a bias that
depends on where the right image is.
"""

from __future__ import annotations

import torch

__all__ = ["pride_log_prior", "pride_scores"]


def pride_log_prior(log_probs: torch.Tensor) -> torch.Tensor:
    """Log of the PriDe prior over slots from ``[P, N]`` restricted log-probs.

    Args:
        log_probs: restricted log-probabilities of ``P`` calibration passes
            (use all ``N`` cyclic shifts of each sample).

    Returns:
        ``[N]`` float64 log-prior, normalised (``logsumexp == 0``).

    Raises:
        ValueError: if ``log_probs`` is not ``[P, N]`` with ``P >= 1``.

    Example:
        >>> lp = torch.log(torch.tensor([[0.8, 0.2], [0.5, 0.5]]))
        >>> pride_log_prior(lp).exp().tolist()  # ∝ [sqrt(.4), sqrt(.1)]
        [0.6666666666666666, 0.3333333333333333]
    """
    if log_probs.ndim != 2 or log_probs.shape[0] < 1:
        raise ValueError(f"log_probs must be [P, N] with P >= 1, got shape {tuple(log_probs.shape)}")
    return torch.log_softmax(log_probs.to(torch.float64).mean(dim=0), dim=0)


def pride_scores(logits: torch.Tensor, log_prior: torch.Tensor) -> torch.Tensor:
    """Debiased scores ``log_softmax(z) − log P_prior`` (float64).

    Example:
        >>> pride_scores(torch.log(torch.tensor([0.6, 0.4])), torch.log(torch.tensor([0.75, 0.25]))).argmax().item()
        1
    """
    if logits.shape != log_prior.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and log_prior {tuple(log_prior.shape)} must both be [N]; "
            "the prior was fitted for a different N"
        )
    return torch.log_softmax(logits.to(torch.float64), dim=-1) - log_prior.to(torch.float64)
