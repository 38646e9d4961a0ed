"""Attention posterior over slots and bias-corrected scores (pure math).

Method C, step 4: choose the top-``K`` layers by visual evidence strength
``V_l = Σ_k e_l(k)`` inside a layer range, form the prior-corrected visual
posterior ``π = softmax(s · mean_{l∈topK} [log e_l − log ā_l])`` and correct
the answer scores with the conditional bias: ``z − Σ_g π_g Bm[g, :]``
("linear", the published form) or ``z − log Σ_g π_g softmax(Bm[g, :])``
("log_mixture", ours).
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["attention_log_ratio", "corrected_scores", "select_layers", "visual_posterior"]

EPS = 1e-12


def select_layers(evidence: torch.Tensor, layer_range: tuple[int, int], top_k: int) -> torch.Tensor:
    """Indices of the ``top_k`` layers in ``[start, end)`` with the largest ``V_l``.

    Args:
        evidence: ``[L, N]`` attention mass per layer and image.
        layer_range: half-open ``(start, end)`` range of eligible layers.
        top_k: how many layers to keep (clipped to the range's size).

    Returns:
        ``[K]`` long tensor of layer indices, strongest first (ties: lower index first).

    Raises:
        ValueError: if the range is empty or outside ``[0, L)``, or ``top_k < 1``.

    Example:
        >>> e = torch.tensor([[0.1, 0.1], [0.5, 0.2], [0.3, 0.3]])
        >>> select_layers(e, (0, 3), 2).tolist()
        [1, 2]
    """
    num_layers = evidence.shape[0]
    start, end = layer_range
    if not 0 <= start < end <= num_layers:
        raise ValueError(
            f"layer_range must satisfy 0 <= start < end <= {num_layers}, got {layer_range}; "
            "pick a range inside the model's layers (default: the upper half)"
        )
    if top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k}; the default is 2")
    strength = evidence[start:end].to(torch.float64).sum(dim=1)
    k = min(top_k, end - start)
    # stable sort so equal strengths keep the lower layer first
    order = torch.sort(strength, descending=True, stable=True).indices[:k]
    return order + start


def attention_log_ratio(
    evidence: torch.Tensor, prior: torch.Tensor, layers: torch.Tensor, eps: float = EPS
) -> torch.Tensor:
    """``mean_{l∈layers} [log e_l(k) − log ā_l(k)]`` as a ``[N]`` float64 tensor.

    Args:
        evidence: ``[L, N]`` attention mass of this pass.
        prior: ``[L, N]`` static attention prior ``ā`` from calibration.
        layers: indices of the layers to average.
        eps: floor applied before the logarithm.

    Returns:
        ``[N]`` mean log-ratio.

    Example:
        >>> e = torch.tensor([[0.2, 0.4]]); a = torch.tensor([[0.2, 0.2]])
        >>> attention_log_ratio(e, a, torch.tensor([0])).exp().tolist()
        [1.0, 2.0]
    """
    if evidence.shape != prior.shape:
        raise ValueError(
            f"evidence {tuple(evidence.shape)} and prior {tuple(prior.shape)} must have the same [L, N] shape"
        )
    e = evidence[layers].to(torch.float64).clamp_min(eps)
    a = prior[layers].to(torch.float64).clamp_min(eps)
    return (e.log() - a.log()).mean(dim=0)


def visual_posterior(
    evidence: torch.Tensor,
    prior: torch.Tensor,
    layers: torch.Tensor,
    sharpen: float = 5.0,
    eps: float = EPS,
) -> torch.Tensor:
    """Prior-corrected attention posterior ``π`` over the ``N`` slots.

    Args:
        evidence: ``[L, N]`` attention mass of this pass.
        prior: ``[L, N]`` static attention prior ``ā``.
        layers: layers to use (see :func:`select_layers`).
        sharpen: sharpening ``s >= 0`` (``0`` gives the uniform posterior).
        eps: floor applied before the logarithm.

    Returns:
        ``[N]`` float64 probabilities summing to 1.

    Raises:
        ValueError: if ``sharpen`` is negative or not finite.

    Example:
        >>> e = torch.tensor([[0.2, 0.4]]); a = torch.tensor([[0.2, 0.2]])
        >>> visual_posterior(e, a, torch.tensor([0]), sharpen=1.0).tolist()
        [0.3333333333333333, 0.6666666666666666]
    """
    if not (sharpen >= 0 and sharpen < float("inf")):
        raise ValueError(f"sharpen must be a finite number >= 0, got {sharpen}; the default is 5.0")
    return torch.softmax(sharpen * attention_log_ratio(evidence, prior, layers, eps), dim=0)


def corrected_scores(
    logits: torch.Tensor,
    posterior: torch.Tensor,
    bias: torch.Tensor,
    variant: Literal["linear", "log_mixture"] = "linear",
) -> torch.Tensor:
    """Bias-corrected answer scores.

    Args:
        logits: ``[N]`` answer scores ``z`` (converted to restricted log-probs first).
        posterior: ``[N]`` posterior ``π`` over where the right image is.
        bias: ``[N, N]`` conditional bias ``Bm``.
        variant: ``"linear"`` → ``z − πᵀ Bm``; ``"log_mixture"`` →
            ``z − log(πᵀ softmax_rows(Bm))``.

    Returns:
        ``[N]`` float64 corrected scores (higher is better).

    Raises:
        ValueError: on a shape mismatch or an unknown variant.

    Example:
        >>> z = torch.tensor([2.0, 0.0]); bm = torch.tensor([[2.0, -2.0], [2.0, -2.0]])
        >>> corrected_scores(z, torch.tensor([0.5, 0.5]), bm).argmax().item()
        1
    """
    n = logits.shape[-1]
    if posterior.shape != (n,) or bias.shape != (n, n):
        raise ValueError(
            f"shapes must be logits [N], posterior [N], bias [N, N] with N={n}; "
            f"got {tuple(posterior.shape)} and {tuple(bias.shape)}"
        )
    z = torch.log_softmax(logits.to(torch.float64), dim=-1)
    pi = posterior.to(torch.float64)
    bm = bias.to(torch.float64)
    if variant == "linear":
        return z - pi @ bm
    if variant == "log_mixture":
        return z - torch.log((pi @ torch.softmax(bm, dim=1)).clamp_min(EPS))
    raise ValueError(f"variant must be 'linear' or 'log_mixture', got {variant!r}")
