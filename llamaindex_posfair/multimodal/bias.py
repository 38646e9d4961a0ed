"""Conditional position bias of a multi-image selector (pure math).

Method C, step 2 (as the published LAD code does it): from calibration
passes in which the right image sits at every slot ``g``, average the
restricted log-probabilities into ``Lg[g, :]``, build the "ideal" matrix
(a constant ``b`` off the diagonal, ``b + k*`` on it) and call the rest the
bias: ``Bm = Lg - ideal``.

What the construction can and cannot see: adding a per-row constant to
``Lg`` (every restricted log-softmax row carries one) or a multiple of the
identity changes ``Bm`` only by ``r 1ᵀ + c I``. Row constants cancel in any
softmax over the corrected scores; the ``c I`` part is the construction's
choice of the diagonal margin ``k*``. A planted bias is therefore recovered
*up to* ``r 1ᵀ + c I`` (see ``tests/multimodal/test_bias.py``).
"""

from __future__ import annotations

import torch

__all__ = [
    "conditional_bias",
    "conditional_log_prob_matrix",
    "ideal_matrix",
    "restricted_log_probs",
]


def restricted_log_probs(logits: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the last dimension (the ``N`` index choices), in float64.

    Args:
        logits: ``[..., N]`` answer scores.

    Returns:
        ``[..., N]`` log-probabilities restricted to the ``N`` choices.

    Example:
        >>> restricted_log_probs(torch.zeros(2)).exp().tolist()
        [0.5, 0.5]
    """
    return torch.log_softmax(logits.to(torch.float64), dim=-1)


def conditional_log_prob_matrix(log_probs: torch.Tensor, gold_slots: torch.Tensor) -> torch.Tensor:
    """``Lg[g, :]`` = mean restricted log-probs over passes whose right image is at ``g``.

    Args:
        log_probs: ``[P, N]`` restricted log-probabilities of ``P`` passes.
        gold_slots: ``[P]`` slot of the right image in each pass.

    Returns:
        ``[N, N]`` float64 matrix.

    Raises:
        ValueError: if shapes disagree or some slot never holds the right image
            (use cyclic shifts so every slot is visited).

    Example:
        >>> lp = torch.log(torch.tensor([[0.9, 0.1], [0.6, 0.4]]))
        >>> conditional_log_prob_matrix(lp, torch.tensor([0, 1])).exp()[1, 1].item()
        0.4
    """
    if log_probs.ndim != 2:
        raise ValueError(f"log_probs must be [P, N], got shape {tuple(log_probs.shape)}")
    p, n = log_probs.shape
    gold = torch.as_tensor(gold_slots, dtype=torch.long)
    if gold.shape != (p,):
        raise ValueError(f"gold_slots must have shape ({p},), got {tuple(gold.shape)}")
    if bool((gold < 0).any()) or bool((gold >= n).any()):
        raise ValueError(f"gold_slots must lie in [0, {n}), got {gold.tolist()}")
    counts = torch.bincount(gold, minlength=n)
    if bool((counts == 0).any()):
        missing = torch.nonzero(counts == 0).flatten().tolist()
        raise ValueError(
            f"no calibration pass has the right image at slot(s) {missing}; "
            "calibrate with all N cyclic shifts of each sample"
        )
    sums = torch.zeros(n, n, dtype=torch.float64).index_add_(0, gold, log_probs.to(torch.float64))
    return sums / counts.unsqueeze(1).to(torch.float64)


def ideal_matrix(lg: torch.Tensor) -> tuple[torch.Tensor, float, float]:
    """The "ideal" matrix of the LAD construction and its two constants.

    ``k* = max_{g≠k} (Lg[g,g] − Lg[g,k])``, ``b = mean(Lg) − k*/N``;
    the ideal has ``b + k*`` on the diagonal and ``b`` elsewhere, so its mean
    equals ``mean(Lg)``.

    Args:
        lg: ``[N, N]`` conditional log-prob matrix (``N >= 2``).

    Returns:
        ``(ideal, b, k_star)``.

    Raises:
        ValueError: if ``lg`` is not square with ``N >= 2``.

    Example:
        >>> ideal, b, k = ideal_matrix(torch.tensor([[0.0, -2.0], [-1.0, 0.0]]))
        >>> k
        2.0
    """
    if lg.ndim != 2 or lg.shape[0] != lg.shape[1] or lg.shape[0] < 2:
        raise ValueError(f"Lg must be a square [N, N] matrix with N >= 2, got shape {tuple(lg.shape)}")
    lg = lg.to(torch.float64)
    n = lg.shape[0]
    margins = lg.diagonal().unsqueeze(1) - lg  # [g, k] = Lg[g,g] - Lg[g,k]
    off = ~torch.eye(n, dtype=torch.bool)
    k_star = float(margins[off].max())
    b = float(lg.mean()) - k_star / n
    ideal = torch.full((n, n), b, dtype=torch.float64) + k_star * torch.eye(n, dtype=torch.float64)
    return ideal, b, k_star


def conditional_bias(lg: torch.Tensor) -> torch.Tensor:
    """Conditional bias matrix ``Bm = Lg − ideal(Lg)`` (mean zero by construction).

    Args:
        lg: ``[N, N]`` conditional log-prob matrix.

    Returns:
        ``[N, N]`` float64 bias; row ``g`` is the bias when the right image is at ``g``.

    Example:
        >>> bm = conditional_bias(torch.tensor([[0.0, -2.0], [-1.0, 0.0]]))
        >>> round(float(bm.mean()), 12)
        0.0
    """
    ideal, _, _ = ideal_matrix(lg)
    return lg.to(torch.float64) - ideal
