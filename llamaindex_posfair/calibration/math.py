"""Basket calibration of attention rows: pure tensor math, no model.

Two equivalent forms (docs/methods.md, part A):

* :func:`calibrate_weights` edits post-softmax rows ``a`` (what the eager
  reference backend sees);
* :func:`merge_basket_states` produces the calibrated *output* of a row from
  per-basket attention states ``(lse_b, o_b)`` without forming the row (what the
  fast backend computes).
"""

from __future__ import annotations

import math

import torch

from llamaindex_posfair.calibration.baskets import (
    ISOLATED,
    POLICY_EQUAL,
    POLICY_FIXED,
    POLICY_ORIGINAL,
    BasketAssignment,
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
    assignment: BasketAssignment,
    strength: float | torch.Tensor,
    key_allowed: torch.Tensor | None = None,
    basket_weighting: str = "equal",
) -> torch.Tensor:
    """Calibrate post-softmax attention rows.

    Args:
        attn: ``[B, H, R, L]`` attention rows (each sums to 1 over allowed keys).
        assignment: the batch's :class:`~llamaindex_posfair.calibration.baskets.BasketAssignment`.
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
        >>> from llamaindex_posfair.calibration.baskets import assign_baskets
        >>> valid = torch.ones(1, 4, dtype=torch.bool)
        >>> zeros = torch.zeros(1, 4, dtype=torch.long)
        >>> assignment = assign_baskets(valid, zeros, zeros.float(), valid, basket_size=2)
        >>> a = torch.tensor([[[[0.7, 0.1, 0.1, 0.1]]]])
        >>> calibrate_weights(a, assignment, strength=1.0)
        tensor([[[[0.4375, 0.0625, 0.2500, 0.2500]]]])
    """
    return WeightCalibration(assignment, key_allowed, basket_weighting)(attn, strength)


class WeightCalibration:
    """:func:`calibrate_weights` in two steps: the assignment's part once, then any number of attention rows.

    Everything that depends only on the assignment and the allowed keys (basket membership,
    sizes, shares, isolated targets) is built here, once per batch; :meth:`__call__`
    does the per-layer work on the rows. Basket sums and per-key broadcasts are matrix
    products with a one-hot basket matrix (no scatter, no gather).

    Args:
        assignment: the batch's :class:`~llamaindex_posfair.calibration.baskets.BasketAssignment`.
        key_allowed: optional ``[B, 1|H, R, L]`` bool, the keys each row may attend to.
        basket_weighting: ``"equal"`` or ``"length"`` (see :func:`calibrate_weights`).
    """

    def __init__(
        self, assignment: BasketAssignment, key_allowed: torch.Tensor | None = None, basket_weighting: str = "equal"
    ) -> None:
        batch, length = assignment.basket_ids.shape
        ids = assignment.basket_ids.view(batch, 1, 1, length)
        self.allowed_keys = torch.ones_like(ids, dtype=torch.bool) if key_allowed is None else key_allowed.bool()
        self.every_key_allowed = bool(self.allowed_keys.all())
        self.allowed = (ids >= 0) & self.allowed_keys  # content keys each row may attend to
        self.onehot = basket_onehot(assignment)  # [B, L, K]
        size = _times(self.allowed.float(), self.onehot)  # [B, 1|H, R, K]
        present = size > 0
        n_content = present.sum(-1, keepdim=True).float()
        iso = (ids == ISOLATED) & self.allowed_keys
        n_total = n_content + iso.sum(-1, keepdim=True).float()
        mode, value = assignment.iso_mode.view(batch, 1, 1, length), assignment.iso_value.view(batch, 1, 1, length)
        self.iso_fixed = torch.where(iso & (mode == POLICY_EQUAL), 1.0 / n_total.clamp(min=1), 0.0)
        self.iso_fixed = self.iso_fixed + torch.where(iso & (mode == POLICY_FIXED), value.float(), 0.0)
        original = iso & (mode == POLICY_ORIGINAL)
        self.iso_original = original.float() if bool(original.any()) else None  # None: targets do not depend on a
        self.shares = _basket_shares(size, present, basket_weighting)
        if self.iso_original is None:  # the content's share of the row is fixed: scale it once
            self.shares = (1.0 - self.iso_fixed.sum(-1, keepdim=True)).clamp(min=0.0) * self.shares
        self.present = present
        self.size = size.clamp(min=1.0)
        self.keep = (~assignment.active.view(batch, 1, 1, 1)) | (n_content == 0)
        self.keeps_any = bool(self.keep.any())  # False: every row is calibrated (no where() needed)

    def __call__(self, attn: torch.Tensor, strength: float | torch.Tensor) -> torch.Tensor:
        """Calibrated ``[B, H, R, L]`` rows (see :func:`calibrate_weights`)."""
        a = attn.float()
        if self.iso_original is None:
            targets, share = self.iso_fixed, self.shares
        else:
            targets = self.iso_fixed + self.iso_original * a
            share = (1.0 - targets.sum(-1, keepdim=True)).clamp(min=0.0) * self.shares  # [B, H, R, K]
        mass = _times(torch.where(self.allowed, a, 0.0), self.onehot)
        has_mass = mass > 0
        # A key of basket b gets a_j * share_b / mass_b, or share_b / size_b when the basket's mass is 0.
        scale = torch.where(has_mass, share / mass.clamp(min=torch.finfo(a.dtype).tiny), 0.0)
        per_key = a * _times(scale, self.onehot.transpose(1, 2))
        if bool((self.present & ~has_mass).any()):
            uniform = torch.where(has_mass, 0.0, share / self.size)
            per_key = per_key + _times(uniform, self.onehot.transpose(1, 2))
        calibrated = torch.where(self.allowed, per_key, 0.0) + targets
        lam = _strength_tensor(strength, a.shape[0], a.device)
        mixed = torch.lerp(a, calibrated, lam)  # lam * calibrated + (1 - lam) * a
        return (torch.where(self.keep, a, mixed) if self.keeps_any else mixed).to(attn.dtype)


def _times(x: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """``x [B, ..., N] @ matrix [B, N, P]`` as one batched product (``matrix`` is not copied per head/row)."""
    batch, n = x.shape[0], x.shape[-1]
    return torch.bmm(x.reshape(batch, -1, n), matrix).view(*x.shape[:-1], matrix.shape[-1])


def basket_onehot(assignment: BasketAssignment) -> torch.Tensor:
    """``[B, L, K]`` float32: 1 where position ``l`` is in content basket ``k`` (``K`` = most baskets, at least 1)."""
    baskets = torch.arange(max(assignment.max_baskets, 1), device=assignment.basket_ids.device)
    return (assignment.basket_ids.unsqueeze(-1) == baskets).float()


def row_strength(
    active: torch.Tensor,
    strength: float | torch.Tensor,
    n_content: torch.Tensor,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[B, *, R, 1]`` ``lambda`` per row: 0 for inactive sequences, rows without content and rows not edited.

    Args:
        active: ``[B]`` sequences to calibrate.
        strength: ``lambda``, a float or a per-sequence ``[B]`` tensor.
        n_content: ``[B, H|1, R]`` content baskets each row can see.
        rows: optional ``[B, R]`` bool, the rows to edit.
    """
    batch = active.shape[0]
    lam = _strength_tensor(strength, batch, active.device) * active.view(batch, 1, 1, 1).float()
    if rows is not None:
        lam = lam * rows.view(batch, 1, -1, 1).float()
    return lam * (n_content > 0).unsqueeze(-1).float()


def basket_shares(present: torch.Tensor, sizes: torch.Tensor | None, weighting: str) -> torch.Tensor:
    """Calibrated share of the content mass per basket (sums to 1 over the baskets present in a row).

    Args:
        present: ``[..., K]`` bool, the row can see the basket.
        sizes: ``[..., K]`` tokens per basket (needed for ``weighting="length"``).
        weighting: ``"equal"`` or ``"length"``.

    Raises:
        ValueError: ``weighting`` is unknown, or ``"length"`` without ``sizes``.
    """
    if weighting == "length" and sizes is None:
        raise ValueError('basket_weighting="length" needs basket_lengths')
    size = torch.ones_like(present, dtype=torch.float32) if sizes is None else sizes.expand_as(present)
    return _basket_shares(size, present, weighting)


class BasketMerge:
    """Merge per-basket attention states into calibrated rows, one basket at a time, in bounded memory.

    The form of :func:`merge_basket_states` the fast backend uses: baskets arrive one by one; up to ``buffer``
    outputs are kept and combined exactly, beyond that they fold into a running (online) merge of two outputs
    against a per-row reference log-sum-exp, so memory never exceeds ``max(buffer, 2)`` outputs
    (docs/backends.md, "fast").

    Online, with ``guard=True`` the reference is raised (and the sum rescaled)
    whenever a basket's log-sum-exp exceeds it by more than :attr:`HEADROOM`, so
    ``exp`` never overflows; with ``guard=False`` that check (a reduction and a
    sync per basket) is skipped and :meth:`overflowed` says afterwards whether the
    sums may have overflowed: then add the baskets again guarded.

    Args:
        iso_scores: ``[B, H, R, J]`` scores of isolated keys (``-inf`` if absent), or
            ``None`` when the batch has no isolated key.
        iso_values: ``[B, H, J, d]`` values of isolated keys (``None`` with ``iso_scores``).
        guard: check every basket for overflow once merging online (see above).
        buffer: basket outputs kept for the exact one-output combination (0: always online).
        owns_outputs: the outputs passed to :meth:`add` are the merge's to overwrite (the
            fast backend's kernel outputs): :meth:`result` then writes the calibrated rows
            into the first one instead of allocating a new tensor.

    Example (one row, two baskets; the first holds 90% of the original mass):
        >>> import torch
        >>> merge = BasketMerge()
        >>> yes, half = torch.ones(1, 1, 1, dtype=torch.bool), torch.full((1, 1, 1), 0.5)
        >>> merge.add(torch.log(torch.full((1, 1, 1), 0.9)), torch.tensor([[[[1.0, 0.0]]]]), yes, half)
        >>> merge.add(torch.log(torch.full((1, 1, 1), 0.1)), torch.tensor([[[[0.0, 1.0]]]]), yes, half)
        >>> lam = torch.ones(1, 1, 1, 1)
        >>> merge.result(lam, torch.full((1, 1, 1), 2.0), torch.zeros(1, 0), torch.zeros(1, 0), original=True)
        (tensor([[[[0.5000, 0.5000]]]]), tensor([[[[0.9000, 0.1000]]]]))
    """

    #: Largest ``lse_b - ref`` accumulated online without rescaling (``exp(64)`` is far below float32's limit).
    HEADROOM = 64.0

    def __init__(
        self,
        iso_scores: torch.Tensor | None = None,
        iso_values: torch.Tensor | None = None,
        guard: bool = True,
        buffer: int = 4,
        owns_outputs: bool = False,
    ) -> None:
        self.iso_scores = None if iso_scores is None else iso_scores.float()
        self.iso_values = None if iso_values is None else iso_values.float()
        self.guard = guard
        self.buffer = buffer
        self.owns_outputs = owns_outputs
        self._kept: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self._online: _OnlineMerge | None = None

    def add(self, lse: torch.Tensor, out: torch.Tensor, present: torch.Tensor | None, share: torch.Tensor) -> None:
        """Add one content basket.

        Args:
            lse: ``[B, H, R]`` log-sum-exp of the row's scores over the basket's keys.
            out: ``[B, H, R, d]`` the basket's normalised output (finite where absent).
            present: bool, broadcastable to ``lse``: the row has an allowed key in the basket
                (``None``: every row has).
            share: broadcastable to ``lse``: the basket's calibrated share (see
                :func:`basket_shares`); the same tensor for consecutive baskets saves a copy online.
        """
        lse = lse.float()
        if present is not None:
            lse = torch.where(present, lse, float("-inf"))
        item = (lse, out.float(), share.float())
        if self._online is None and len(self._kept) < self.buffer:
            self._kept.append(item)
            return
        if self._online is None:
            self._online = _OnlineMerge(self.iso_scores, self.iso_values, self.guard, self.HEADROOM)
            for kept in self._kept:
                self._online.add(*kept)
            self._kept = []
        self._online.add(*item)

    def overflowed(self) -> bool:
        """Whether an unguarded online merge may have overflowed (then add the baskets again with ``guard=True``)."""
        return self._online is not None and self._online.overflowed()

    def result(
        self,
        lam: torch.Tensor,
        n_content: torch.Tensor,
        iso_mode: torch.Tensor,
        iso_value: torch.Tensor,
        original: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(lam * calibrated + (1 - lam) * original, original or None)``, each ``[B, H, R, d]``.

        Consumes the state (the online output reuses its memory).

        Args:
            lam: ``[B, H|1, R, 1]`` from :func:`row_strength`.
            n_content: ``[B, H|1, R]`` content baskets each row can see.
            iso_mode: ``[B, J]`` policy codes; ``iso_value``: ``[B, J]`` fixed weights.
            original: also return the original rows.

        Raises:
            ValueError: no basket was added.
        """
        iso = (self.iso_scores, self.iso_values, iso_mode, iso_value)
        if self._online is not None:
            return self._online.result(lam, n_content, iso, original)
        if not self._kept:
            raise ValueError("BasketMerge.result needs at least one content basket; add() was never called")
        return _combine_kept(self._kept, lam, n_content, iso, original, self.owns_outputs)


def _iso_targets(a_iso: torch.Tensor, n_content: torch.Tensor, iso: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    """Target weights of the isolated keys (zero where absent) and the content remainder ``1 - sum``."""
    scores, _, iso_mode, iso_value = iso
    batch = iso_mode.shape[0]
    present = torch.isfinite(scores)
    n_total = (n_content + present.sum(-1)).unsqueeze(-1)
    targets = _isolated_targets(a_iso, iso_mode.view(batch, 1, 1, -1), iso_value.view(batch, 1, 1, -1), n_total)
    targets = torch.where(present, targets, torch.zeros_like(targets))
    return targets, (1.0 - targets.sum(-1, keepdim=True)).clamp(min=0.0)


def _combine_kept(
    kept: list, lam: torch.Tensor, n_content: torch.Tensor, iso: tuple, original: bool, in_place: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Exact combination of every basket at once: ``sum_b [lam w_b + (1 - lam) m_b] o_b`` (+ isolated keys)."""
    iso_scores, iso_values = iso[0], iso[1]
    lse = torch.stack([item[0] for item in kept], -1)  # [B, H, R, K]
    scores = lse if iso_scores is None else torch.cat([lse, iso_scores], -1)
    # Not torch.softmax: over a last dimension of a few baskets it is several times slower than this.
    top = torch.nan_to_num(scores.amax(-1, keepdim=True), neginf=0.0)
    probs = (scores - top).exp_()
    probs.div_(probs.sum(-1, keepdim=True).clamp(min=torch.finfo(torch.float32).tiny))
    mass = probs[..., : len(kept)]
    if all(item[2] is kept[0][2] for item in kept):  # equal shares: one broadcast column, no stacked copy
        shares = kept[0][2].unsqueeze(-1)
    else:
        shares = torch.stack([item[2].expand_as(item[0]) for item in kept], -1)
    if iso_scores is None:
        coef = torch.lerp(shares, mass, 1.0 - lam)  # lam * shares + (1 - lam) * mass, in one pass
        iso_weights = None
    else:
        a_iso = probs[..., len(kept) :]
        targets, remainder = _iso_targets(a_iso, n_content, iso)
        iso_weights = (lam * targets + (1.0 - lam) * a_iso, a_iso)
        coef = (lam * remainder) * shares + (1.0 - lam) * mass
    plain = _weighted_sum([item[1] for item in kept], mass) if original else None
    mixed = _weighted_sum([item[1] for item in kept], coef, in_place)
    if iso_weights is not None:
        mixed.add_(torch.matmul(iso_weights[0], iso_values))
        if plain is not None:
            plain.add_(torch.matmul(iso_weights[1], iso_values))
    return mixed, plain


def _weighted_sum(outs: list[torch.Tensor], weights: torch.Tensor, in_place: bool = False) -> torch.Tensor:
    """``sum_b weights[..., b, None] * outs[b]``: one multiply-add per output, no stacked copy.

    ``in_place``: accumulate into ``outs[0]`` (no new allocation, its memory order kept).
    """
    first = weights[..., 0:1]
    fits = outs[0].shape == torch.broadcast_shapes(outs[0].shape, first.shape)  # the product has outs[0]'s shape
    total = outs[0].mul_(first) if in_place and fits else outs[0] * first
    for b in range(1, len(outs)):
        total.addcmul_(outs[b], weights[..., b : b + 1])
    return total


class _OnlineMerge:
    """The running two-output merge of :class:`BasketMerge` (see there)."""

    def __init__(self, iso_scores, iso_values, guard: bool, headroom: float) -> None:
        self.iso_scores, self.iso_values = iso_scores, iso_values
        self.guard, self.limit = guard, math.exp(headroom)
        self.acc: torch.Tensor | None = None  # [2, B, H, R, d]: sum exp(lse_b - ref) o_b, sum share_b o_b
        self.coef: torch.Tensor | None = None  # [2, B, H, R]: this basket's exp(lse_b - ref) and share_b
        self.ref: torch.Tensor | None = None  # [B, H, R]
        self.denom: torch.Tensor | None = None  # sum exp(lse_b - ref) (isolated keys included)
        self._share: torch.Tensor | None = None  # the share now in ``coef[1]``

    def add(self, lse: torch.Tensor, out: torch.Tensor, share: torch.Tensor) -> None:
        if self.acc is None:
            self._start(lse, out, share)
            return
        mass = torch.sub(lse, self.ref, out=self.coef[0]).exp_()
        if self.guard and mass.max().item() > self.limit:
            self._raise_ref(lse)
            mass = torch.sub(lse, self.ref, out=self.coef[0]).exp_()
        self.denom.add_(mass)
        if share is not self._share:
            self.coef[1].copy_(share.expand_as(lse))
            self._share = share
        self.acc.addcmul_(out.unsqueeze(0), self.coef.unsqueeze(-1))

    def _start(self, lse: torch.Tensor, out: torch.Tensor, share: torch.Tensor) -> None:
        ref = lse
        if self.iso_scores is not None:
            ref = torch.maximum(ref, self.iso_scores.amax(-1))
        # A row with nothing yet gets a finite sentinel: its first basket then exceeds it and sets it.
        self.ref = torch.nan_to_num(ref, neginf=_UNSET)
        self.coef = _stacked_empty_like(lse, 2)
        torch.sub(lse, self.ref, out=self.coef[0]).exp_()
        self.coef[1].copy_(share.expand_as(lse))
        self._share = share
        self.acc = torch.mul(out.unsqueeze(0), self.coef.unsqueeze(-1), out=_stacked_empty_like(out, 2))
        self.denom = self.coef[0].clone()
        if self.iso_scores is not None:
            probs = torch.exp(self.iso_scores - self.ref.unsqueeze(-1))
            self.acc[0].add_(torch.matmul(probs, self.iso_values))
            self.denom.add_(probs.sum(-1))

    def _raise_ref(self, lse: torch.Tensor) -> None:
        new_ref = torch.maximum(self.ref, lse)
        scale = torch.exp(self.ref - new_ref)
        self.acc[0].mul_(scale.unsqueeze(-1))
        self.denom.mul_(scale)
        self.ref = new_ref

    def overflowed(self) -> bool:
        # The running sum of masses bounds each of them; NaN or infinity fails the comparison too.
        return self.denom is not None and not self.denom.max().item() <= self.limit

    def result(self, lam, n_content, iso: tuple, original: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        denom = self.denom.clamp(min=torch.finfo(torch.float32).tiny).unsqueeze(-1)
        plain = self.acc[0] / denom if original else None
        remainder, iso_part = 1.0, None
        if self.iso_scores is not None:
            a_iso = torch.exp(self.iso_scores - (self.ref.unsqueeze(-1) + torch.log(denom)))
            targets, remainder = _iso_targets(a_iso, n_content, iso)
            iso_part = torch.matmul(targets * lam, self.iso_values)
        mixed = self.acc[1].mul_(lam * remainder).addcmul_(self.acc[0], (1.0 - lam) / denom)
        if iso_part is not None:
            mixed.add_(iso_part)
        return mixed, plain


def _stacked_empty_like(x: torch.Tensor, n: int) -> torch.Tensor:
    """An empty ``[n, *x.shape]`` whose trailing dims have ``x``'s memory order (so views of it keep it)."""
    order = sorted(range(x.dim()), key=lambda i: -x.stride(i))
    base = x.new_empty((n, *(x.shape[i] for i in order)))
    return base.permute(0, *(1 + order.index(i) for i in range(x.dim())))


#: Reference of a row that has seen no key yet (finite, so ``exp(-inf - ref)`` is 0, never NaN).
_UNSET = -1e30


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
    ``sum_b [lambda * w_b + (1 - lambda) * m_b] * o_b``. All baskets at once;
    :class:`BasketMerge` (used here) takes them one at a time.

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

    Raises:
        ValueError: ``basket_weighting`` is unknown, or ``"length"`` without ``basket_lengths``.
    """
    if basket_weighting not in ("equal", "length"):
        raise ValueError(f'basket_weighting must be "equal" or "length", got {basket_weighting!r}')
    dtype = content_out.dtype
    batch = content_lse.shape[0]
    present = torch.isfinite(content_lse)
    sizes = None if basket_lengths is None else basket_lengths.float().view(batch, 1, 1, -1)
    shares = basket_shares(present, sizes, basket_weighting)
    merge = BasketMerge(iso_scores, iso_values)
    for k in range(content_lse.shape[-1]):
        out = torch.nan_to_num(content_out[..., k, :].float())
        merge.add(content_lse[..., k], out, present[..., k], shares[..., k])
    n_content = present.sum(-1).float()
    lam = row_strength(active, strength, n_content)
    mixed, original = merge.result(lam, n_content, iso_mode, iso_value, original=True)
    return mixed.to(dtype), original.to(dtype)
