"""Basket partition of key positions: pure tensor code, no model.

A *plan* says, for a padded batch, which key positions are content (and in
which basket), which are isolated (and with which weight policy), which are
padding, and which query rows are edited. Both backends consume the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

EXCLUDED = -1
ISOLATED = -2

#: Isolated-token policy codes stored in :attr:`BasketPlan.iso_mode`.
POLICY_NONE = 0
POLICY_EQUAL = 1
POLICY_ORIGINAL = 2
POLICY_FIXED = 3


@dataclass(frozen=True)
class BasketPlan:
    """Per-batch basket layout.

    Attributes:
        basket_ids: ``[B, L]`` content basket index (``>= 0``), ``ISOLATED`` or ``EXCLUDED``.
        iso_mode: ``[B, L]`` policy code of isolated positions (``POLICY_NONE`` elsewhere).
        iso_value: ``[B, L]`` fixed weight where ``iso_mode == POLICY_FIXED``.
        num_baskets: ``[B]`` content baskets per sequence.
        row_mask: ``[B, L]`` query rows to edit.
        active: ``[B]`` whether the sequence is calibrated at all.
        all_rows: every valid row is edited (mean pooling).
        max_basket_len: longest basket in the batch.
        strength_scale: ``[B]`` factor on ``lambda`` per sequence (length-aware strength).
        weighting: ``"equal"`` or ``"length"`` share per content basket.
    """

    basket_ids: torch.Tensor
    iso_mode: torch.Tensor
    iso_value: torch.Tensor
    num_baskets: torch.Tensor
    row_mask: torch.Tensor
    active: torch.Tensor
    all_rows: bool
    max_basket_len: int
    strength_scale: torch.Tensor | None = None
    weighting: str = "equal"

    def strength(self, base: float) -> torch.Tensor:
        """Per-sequence ``lambda``: ``base`` times :attr:`strength_scale`."""
        scale = (
            self.strength_scale
            if self.strength_scale is not None
            else torch.ones_like(self.active, dtype=torch.float32)
        )
        return (scale.float() * float(base)).clamp(0.0, 1.0)

    @property
    def content_lengths(self) -> torch.Tensor:
        """``[B]`` content tokens per sequence."""
        return (self.basket_ids >= 0).sum(-1)

    @property
    def num_isolated(self) -> torch.Tensor:
        """``[B]`` isolated positions per sequence."""
        return (self.basket_ids == ISOLATED).sum(-1)

    @property
    def max_baskets(self) -> int:
        """Most content baskets of any sequence in the batch."""
        return int(self.num_baskets.max().item()) if self.num_baskets.numel() else 0

    def to(self, device: torch.device | str) -> BasketPlan:
        """Move every tensor to ``device``."""
        return BasketPlan(
            basket_ids=self.basket_ids.to(device),
            iso_mode=self.iso_mode.to(device),
            iso_value=self.iso_value.to(device),
            num_baskets=self.num_baskets.to(device),
            row_mask=self.row_mask.to(device),
            active=self.active.to(device),
            all_rows=self.all_rows,
            max_basket_len=self.max_basket_len,
            strength_scale=None if self.strength_scale is None else self.strength_scale.to(device),
            weighting=self.weighting,
        )


def basket_lengths(num_content: int, basket_size: int, layout: str = "fixed") -> list[int]:
    """Lengths of the baskets that cover ``num_content`` content tokens.

    ``"fixed"`` gives baskets of exactly ``basket_size`` and a short last one;
    ``"equal"`` gives ``ceil(C/B)`` baskets whose lengths differ by at most one.

    >>> basket_lengths(300, 128)
    [128, 128, 44]
    >>> basket_lengths(300, 128, "equal")
    [100, 100, 100]
    """
    if basket_size < 1:
        raise ValueError(f"basket_size must be a positive integer, got {basket_size}")
    if num_content <= 0:
        return []
    count = -(-num_content // basket_size)
    if layout == "fixed":
        return [basket_size] * (count - 1) + [num_content - basket_size * (count - 1)]
    if layout == "equal":
        base, extra = divmod(num_content, count)
        return [base + 1] * extra + [base] * (count - extra)
    raise ValueError(f'basket_layout must be "fixed" or "equal", got {layout!r}')


def build_plan(
    valid: torch.Tensor,
    isolated_mode: torch.Tensor,
    isolated_value: torch.Tensor,
    row_mask: torch.Tensor,
    basket_size: int,
    layout: str = "fixed",
    skip_single_basket: bool = True,
    all_rows: bool = False,
    weighting: str = "equal",
    length_reference: int | None = None,
) -> BasketPlan:
    """Assign every key position of a padded batch to a basket.

    Args:
        valid: ``[B, L]`` bool, ``True`` for real (non-padding) tokens.
        isolated_mode: ``[B, L]`` policy code per position (``POLICY_NONE`` = content).
        isolated_value: ``[B, L]`` fixed weights where the code is ``POLICY_FIXED``.
        row_mask: ``[B, L]`` bool, query rows to edit.
        basket_size: content tokens per basket.
        layout: ``"fixed"`` or ``"equal"`` (see :func:`basket_lengths`).
        skip_single_basket: mark sequences whose content fits in one basket inactive.
        all_rows: the plan edits every valid row (mean pooling).
        weighting: ``"equal"`` or ``"length"`` share per content basket.
        length_reference: if set, ``lambda`` is scaled per sequence by
            ``min(1, content_tokens / length_reference)`` (short passages get less).

    Returns:
        The :class:`BasketPlan`.
    """
    valid = valid.bool()
    batch, length = valid.shape
    isolated = (isolated_mode != POLICY_NONE) & valid
    content = valid & ~isolated
    basket_ids = torch.full((batch, length), EXCLUDED, dtype=torch.long)
    basket_ids[isolated.cpu()] = ISOLATED
    num_baskets = torch.zeros(batch, dtype=torch.long)
    max_len = 0
    content_cpu = content.cpu()
    for b in range(batch):
        positions = torch.nonzero(content_cpu[b], as_tuple=False).flatten()
        lengths = basket_lengths(int(positions.numel()), basket_size, layout)
        num_baskets[b] = len(lengths)
        if lengths:
            max_len = max(max_len, max(lengths))
            ids = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
            basket_ids[b, positions] = ids
    active = num_baskets >= 1
    if skip_single_basket:
        active &= num_baskets > 1
    device = valid.device
    scale = None
    if length_reference is not None:
        content_tokens = content.sum(-1).float()
        scale = (content_tokens / float(length_reference)).clamp(max=1.0).to(device)
    return BasketPlan(
        basket_ids=basket_ids.to(device),
        iso_mode=torch.where(isolated, isolated_mode, torch.zeros_like(isolated_mode)).long(),
        iso_value=isolated_value.float(),
        num_baskets=num_baskets.to(device),
        row_mask=(row_mask.bool() & valid),
        active=active.to(device),
        all_rows=all_rows,
        max_basket_len=max_len,
        strength_scale=scale,
        weighting=weighting,
    )


def basket_gather_index(plan: BasketPlan) -> tuple[torch.Tensor, torch.Tensor]:
    """Key positions of every content basket, padded: ``([B, K, M], [B, K, M] valid)``.

    ``K`` is the most baskets of any sequence, ``M`` the longest basket.
    """
    batch, _length = plan.basket_ids.shape
    k_max, m_max = max(plan.max_baskets, 1), max(plan.max_basket_len, 1)
    index = torch.zeros(batch, k_max, m_max, dtype=torch.long)
    ok = torch.zeros(batch, k_max, m_max, dtype=torch.bool)
    ids = plan.basket_ids.cpu()
    for b in range(batch):
        for k in range(int(plan.num_baskets[b])):
            pos = torch.nonzero(ids[b] == k, as_tuple=False).flatten()
            index[b, k, : pos.numel()] = pos
            ok[b, k, : pos.numel()] = True
    device = plan.basket_ids.device
    return index.to(device), ok.to(device)


def isolated_gather_index(plan: BasketPlan) -> tuple[torch.Tensor, torch.Tensor]:
    """Isolated key positions, padded: ``([B, J], [B, J] valid)``."""
    iso = (plan.basket_ids == ISOLATED).cpu()
    batch = iso.shape[0]
    j_max = max(int(iso.sum(-1).max().item()) if batch else 0, 1)
    index = torch.zeros(batch, j_max, dtype=torch.long)
    ok = torch.zeros(batch, j_max, dtype=torch.bool)
    for b in range(batch):
        pos = torch.nonzero(iso[b], as_tuple=False).flatten()
        index[b, : pos.numel()] = pos
        ok[b, : pos.numel()] = True
    device = plan.basket_ids.device
    return index.to(device), ok.to(device)
