"""Basket calibration of attention rows: pure tensor math, no model.

Two equivalent forms (METHODS.md, part A):

* :func:`calibrate_weights` edits post-softmax rows ``a`` (what the eager
  reference backend sees);
* :func:`merge_basket_states` produces the calibrated *output* of a row from
  per-basket attention states ``(lse_b, o_b)`` without forming the row (what the
  fast backend computes).
"""

from __future__ import annotations

import torch

from llamaindex_posfair.calibration.baskets import (
    ISOLATED,
    POLICY_EQUAL,
    POLICY_FIXED,
    POLICY_ORIGINAL,
    BasketPlan,
)


def _isolated_targets(
    original: torch.Tensor, iso_mode: torch.Tensor, iso_value: torch.Tensor, n_total: torch.Tensor
) -> torch.Tensor:
    """Target weight of each isolated position (zero elsewhere).

    ``original``: ``[..., J]`` original weights; ``iso_mode``/``iso_value`` broadcast to it;
    ``n_total``: ``[..., 1]`` baskets in the row (content + isolated).
    """
    equal = torch.ones_like(original) / n_total.clamp(min=1)
    fixed = iso_value.to(original.dtype).expand_as(original)
    out = torch.zeros_like(original)
    out = torch.where(iso_mode == POLICY_EQUAL, equal, out)
    out = torch.where(iso_mode == POLICY_ORIGINAL, original, out)
    out = torch.where(iso_mode == POLICY_FIXED, fixed, out)
    return out


def _strength_tensor(strength, batch: int, device) -> torch.Tensor:
    """``lambda`` as a ``[B, 1, 1, 1]`` tensor (a float or a per-sequence ``[B]`` tensor)."""
    value = torch.as_tensor(strength, dtype=torch.float32, device=device)
    if torch.any(value < 0) or torch.any(value > 1):
        raise ValueError(f"strength must lie in [0, 1], got {strength}")
    return value.expand(batch).reshape(batch, 1, 1, 1) if value.ndim == 0 else value.reshape(batch, 1, 1, 1)


def _basket_shares(size: torch.Tensor, present: torch.Tensor, weighting: str) -> torch.Tensor:
    """Fraction of the content mass each basket gets (sums to 1 over present baskets)."""
    if weighting == "equal":
        weights = present.float()
    elif weighting == "length":
        weights = torch.where(present, size.float(), torch.zeros_like(size, dtype=torch.float32))
    else:
        raise ValueError(f'basket_weighting must be "equal" or "length", got {weighting!r}')
    return weights / weights.sum(-1, keepdim=True).clamp(min=1e-30)


def calibrate_weights(
    attn: torch.Tensor,
    plan: BasketPlan,
    strength: float | torch.Tensor,
    key_allowed: torch.Tensor | None = None,
    basket_weighting: str = "equal",
) -> torch.Tensor:
    """Calibrate post-softmax attention rows.

    Args:
        attn: ``[B, H, R, L]`` attention rows (each sums to 1 over allowed keys).
        plan: the batch's :class:`~llamaindex_posfair.calibration.baskets.BasketPlan`.
        strength: ``lambda`` in ``[0, 1]``, a float or a per-sequence ``[B]`` tensor.
        key_allowed: optional ``[B, 1|H, R, L]`` bool: keys each row may attend to
            (e.g. causal masks); baskets with no allowed key are dropped for that row.
        basket_weighting: ``"equal"`` (published: every content basket gets the same
            share) or ``"length"`` (a basket's share is proportional to its length).

    Returns:
        ``[B, H, R, L]``: ``lambda * a_cal + (1 - lambda) * a``; rows of inactive
        sequences are returned unchanged. Rows still sum to 1.

    Example:
        >>> import torch
        >>> from llamaindex_posfair.calibration.baskets import build_plan
        >>> valid = torch.ones(1, 4, dtype=torch.bool)
        >>> zeros = torch.zeros(1, 4, dtype=torch.long)
        >>> plan = build_plan(valid, zeros, zeros.float(), valid, basket_size=2)
        >>> a = torch.tensor([[[[0.7, 0.1, 0.1, 0.1]]]])
        >>> calibrate_weights(a, plan, strength=1.0)
        tensor([[[[0.4375, 0.0625, 0.2500, 0.2500]]]])
    """
    dtype = attn.dtype
    a = attn.float()
    batch, _, _, length = a.shape
    ids = plan.basket_ids.view(batch, 1, 1, length)
    k_max = max(plan.max_baskets, 1)
    content = ids >= 0
    slot = torch.where(content, ids, torch.full_like(ids, k_max)).expand_as(a)  # dummy slot K
    allowed = content.expand_as(a) if key_allowed is None else (content & key_allowed.bool()).expand_as(a)
    zeros = a.new_zeros(*a.shape[:-1], k_max + 1)
    mass = zeros.scatter_add(-1, slot, torch.where(allowed, a, torch.zeros_like(a)))[..., :k_max]
    size = zeros.scatter_add(-1, slot, allowed.float())[..., :k_max]
    present = size > 0
    n_content = present.sum(-1, keepdim=True).float()

    iso = (ids == ISOLATED).expand_as(a)
    if key_allowed is not None:
        iso = iso & key_allowed.bool().expand_as(a)
    n_iso = iso.sum(-1, keepdim=True).float()
    n_total = n_content + n_iso
    targets = _isolated_targets(
        a, plan.iso_mode.view(batch, 1, 1, length), plan.iso_value.view(batch, 1, 1, length), n_total
    )
    targets = torch.where(iso, targets, torch.zeros_like(targets))
    remainder = (1.0 - targets.sum(-1, keepdim=True)).clamp(min=0.0)
    share = remainder * _basket_shares(size, present, basket_weighting)  # [B,H,R,K]

    basket_mass = torch.gather(torch.cat([mass, mass.new_ones(*mass.shape[:-1], 1)], -1), -1, slot)
    basket_size = torch.gather(torch.cat([size, size.new_ones(*size.shape[:-1], 1)], -1), -1, slot)
    basket_share = torch.gather(torch.cat([share, share.new_zeros(*share.shape[:-1], 1)], -1), -1, slot)
    within = torch.where(basket_mass > 0, a / basket_mass.clamp(min=torch.finfo(a.dtype).tiny), 1.0 / basket_size)
    calibrated = torch.where(allowed, within * basket_share, torch.zeros_like(a)) + targets

    lam = _strength_tensor(strength, batch, a.device)
    mixed = lam * calibrated + (1.0 - lam) * a
    keep = (~plan.active.view(batch, 1, 1, 1)) | (n_content == 0)
    return torch.where(keep, a, mixed).to(dtype)


def merge_basket_states(
    content_lse: torch.Tensor,
    content_out: torch.Tensor,
    iso_scores: torch.Tensor,
    iso_values: torch.Tensor,
    iso_mode: torch.Tensor,
    iso_value: torch.Tensor,
    active: torch.Tensor,
    strength: float | torch.Tensor,
    basket_lengths: torch.Tensor | None = None,
    basket_weighting: str = "equal",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Calibrated and original attention outputs from per-basket states.

    With ``o_b`` the softmax-weighted value average inside basket ``b`` and
    ``lse_b`` its log-sum-exp of scores, the original basket mass is
    ``m_b = exp(lse_b - lse_all)`` and the calibrated output is
    ``sum_b [lambda * w_b + (1 - lambda) * m_b] * o_b``.

    Args:
        content_lse: ``[B, H, R, K]`` log-sum-exp per content basket (``-inf`` if the
            basket has no allowed key for that row).
        content_out: ``[B, H, R, K, d]`` normalised output per content basket.
        iso_scores: ``[B, H, R, J]`` scores of isolated keys (``-inf`` if absent).
        iso_values: ``[B, H, J, d]`` values of isolated keys.
        iso_mode: ``[B, J]`` policy codes; ``iso_value``: ``[B, J]`` fixed weights.
        active: ``[B]`` sequences to calibrate.
        strength: ``lambda``, a float or a per-sequence ``[B]`` tensor.
        basket_lengths: ``[B, K]`` tokens per content basket (needed for
            ``basket_weighting="length"``).
        basket_weighting: ``"equal"`` or ``"length"`` (see :func:`calibrate_weights`).

    Returns:
        ``(calibrated, original)``, each ``[B, H, R, d]``.
    """
    dtype = content_out.dtype
    lse = content_lse.float()
    s_iso = iso_scores.float()
    lse_all = torch.logsumexp(torch.cat([lse, s_iso], -1), -1, keepdim=True)
    lse_all = torch.where(torch.isfinite(lse_all), lse_all, torch.zeros_like(lse_all))
    mass = torch.exp(lse - lse_all)  # [B,H,R,K]
    a_iso = torch.exp(s_iso - lse_all)  # [B,H,R,J]
    present = torch.isfinite(lse)
    iso_present = torch.isfinite(s_iso)
    n_content = present.sum(-1, keepdim=True).float()
    n_total = n_content + iso_present.sum(-1, keepdim=True).float()
    batch = lse.shape[0]
    targets = _isolated_targets(a_iso, iso_mode.view(batch, 1, 1, -1), iso_value.view(batch, 1, 1, -1), n_total)
    targets = torch.where(iso_present, targets, torch.zeros_like(targets))
    if basket_lengths is None:
        if basket_weighting != "equal":
            raise ValueError('basket_weighting="length" needs basket_lengths')
        sizes = torch.ones_like(mass)
    else:
        sizes = basket_lengths.float().view(batch, 1, 1, -1).expand_as(mass)
    remainder = (1.0 - targets.sum(-1, keepdim=True)).clamp(min=0.0)
    share = remainder * _basket_shares(sizes, present, basket_weighting)

    out = content_out.float()
    values = iso_values.float().unsqueeze(2)  # [B,H,1,J,d]
    original = (mass.unsqueeze(-1) * out).sum(-2) + (a_iso.unsqueeze(-1) * values).sum(-2)
    calibrated = (share.unsqueeze(-1) * out).sum(-2) + (targets.unsqueeze(-1) * values).sum(-2)
    lam = _strength_tensor(strength, batch, original.device)
    mixed = lam * calibrated + (1.0 - lam) * original
    keep = (~active.view(batch, 1, 1, 1)) | (n_content == 0)
    mixed = torch.where(keep, original, mixed)
    return mixed.to(dtype), original.to(dtype)
