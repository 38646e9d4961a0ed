"""Basket partition of key positions: pure tensor code, no model.

An *assignment* says, for a padded batch, which key positions are content (and in
which basket), which are isolated (and with which weight policy), which are
padding, and which query rows are edited. Both backends consume the same assignment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

EXCLUDED = -1
ISOLATED = -2

#: Isolated-token policy codes stored in :attr:`BasketAssignment.iso_mode`.
POLICY_NONE = 0
POLICY_EQUAL = 1
POLICY_ORIGINAL = 2
POLICY_FIXED = 3


@dataclass(frozen=True)
class BasketAssignment:
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
    def max_baskets(self) -> int:
        """Most content baskets of any sequence in the batch."""
        return int(self.num_baskets.max().item()) if self.num_baskets.numel() else 0

    def to(self, device: torch.device | str) -> BasketAssignment:
        """Move every tensor to ``device``."""
        tensors = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return dataclasses.replace(self, **{k: v.to(device) for k, v in tensors.items() if isinstance(v, torch.Tensor)})


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


def content_basket_ids(content: torch.Tensor, basket_size: int, layout: str = "fixed") -> torch.Tensor:
    """``[B, L]`` basket index of every content position (``EXCLUDED`` elsewhere), without a loop.

    The ``r``-th content token of a row (in order) goes to basket ``r // B``
    (``"fixed"``), or, for ``"equal"``, to the basket :func:`basket_lengths` puts it in.

    >>> content_basket_ids(torch.tensor([[True, False, True, True, True]]), 2).tolist()
    [[0, -1, 0, 1, 1]]
    """
    if basket_size < 1:
        raise ValueError(f"basket_size must be a positive integer, got {basket_size}")
    rank = content.long().cumsum(-1) - 1
    if layout == "fixed":
        ids = rank // basket_size
    elif layout == "equal":
        total = content.sum(-1, keepdim=True)
        count = (-(-total // basket_size)).clamp(min=1)
        base = total // count
        extra = total - base * count  # the first ``extra`` baskets hold ``base + 1``
        long_part = extra * (base + 1)
        ids = torch.where(rank < long_part, rank // (base + 1), extra + (rank - long_part) // base.clamp(min=1))
    else:
        raise ValueError(f'basket_layout must be "fixed" or "equal", got {layout!r}')
    return torch.where(content, ids, torch.full_like(ids, EXCLUDED))


def assign_baskets(
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
) -> BasketAssignment:
    """Assign every key position of a padded batch to a basket (vectorised: no loop over sequences).

    Args:
        valid: ``[B, L]`` bool, ``True`` for real (non-padding) tokens.
        isolated_mode: ``[B, L]`` policy code per position (``POLICY_NONE`` = content).
        isolated_value: ``[B, L]`` fixed weights where the code is ``POLICY_FIXED``.
        row_mask: ``[B, L]`` bool, query rows to edit.
        basket_size: content tokens per basket.
        layout: ``"fixed"`` or ``"equal"`` (see :func:`basket_lengths`).
        skip_single_basket: mark sequences whose content fits in one basket inactive.
        all_rows: the assignment edits every valid row (mean pooling).
        weighting: ``"equal"`` or ``"length"`` share per content basket.
        length_reference: if set, ``lambda`` is scaled per sequence by
            ``min(1, content_tokens / length_reference)`` (short passages get less).

    Returns:
        The :class:`BasketAssignment`, on the device of ``valid``.

    Raises:
        ValueError: ``basket_size`` is not positive or ``layout`` is unknown.
    """
    valid = valid.bool()
    isolated = (isolated_mode != POLICY_NONE) & valid
    content = valid & ~isolated
    basket_ids = content_basket_ids(content, basket_size, layout)
    basket_ids = torch.where(isolated, torch.full_like(basket_ids, ISOLATED), basket_ids)
    total = content.sum(-1)
    num_baskets = -(-total // basket_size)
    if layout == "fixed":
        longest = total.clamp(max=basket_size)
    else:
        longest = -(-total // num_baskets.clamp(min=1))
    max_len = int(longest.max().item()) if longest.numel() else 0
    active = num_baskets >= 1
    if skip_single_basket:
        active &= num_baskets > 1
    scale = None
    if length_reference is not None:
        scale = (total.float() / float(length_reference)).clamp(max=1.0)
    return BasketAssignment(
        basket_ids=basket_ids,
        iso_mode=torch.where(isolated, isolated_mode, torch.zeros_like(isolated_mode)).long(),
        iso_value=isolated_value.float(),
        num_baskets=num_baskets,
        row_mask=(row_mask.bool() & valid),
        active=active,
        all_rows=all_rows,
        max_basket_len=max_len,
        strength_scale=scale,
        weighting=weighting,
    )


def basket_gather_index(assignment: BasketAssignment) -> tuple[torch.Tensor, torch.Tensor]:
    """Key positions of every content basket, padded: ``([B, K, M], [B, K, M] valid)``.

    ``K`` is the most baskets of any sequence, ``M`` the longest basket; positions
    keep their order inside a basket. Vectorised (a stable sort by basket id).
    """
    ids = assignment.basket_ids
    batch, length = ids.shape
    k_max, m_max = max(assignment.max_baskets, 1), max(assignment.max_basket_len, 1)
    key = torch.where(ids >= 0, ids, torch.full_like(ids, k_max))  # non-content last
    sorted_key, order = torch.sort(key, dim=-1, stable=True)
    counts = torch.zeros(batch, k_max + 1, dtype=torch.long, device=ids.device).scatter_add_(
        1, key, torch.ones_like(key)
    )
    starts = counts.cumsum(-1) - counts
    within = torch.arange(length, device=ids.device).view(1, -1) - starts.gather(1, sorted_key)
    sel = sorted_key < k_max
    rows = torch.arange(batch, device=ids.device).view(-1, 1).expand(batch, length)[sel]
    index = torch.zeros(batch, k_max, m_max, dtype=torch.long, device=ids.device)
    ok = torch.zeros(batch, k_max, m_max, dtype=torch.bool, device=ids.device)
    index[rows, sorted_key[sel], within[sel]] = order[sel]
    ok[rows, sorted_key[sel], within[sel]] = True
    return index, ok


def isolated_gather_index(assignment: BasketAssignment) -> tuple[torch.Tensor, torch.Tensor]:
    """Isolated key positions, in order, padded: ``([B, J], [B, J] valid)``."""
    iso = assignment.basket_ids == ISOLATED
    batch, length = iso.shape
    count = iso.sum(-1, keepdim=True)
    j_max = max(int(count.max().item()) if batch else 0, 1)
    _, order = torch.sort((~iso).to(torch.uint8), dim=-1, stable=True)  # isolated first
    index = torch.zeros(batch, j_max, dtype=torch.long, device=iso.device)
    width = min(j_max, length)
    index[:, :width] = order[:, :width]
    ok = torch.arange(j_max, device=iso.device).view(1, -1) < count
    return torch.where(ok, index, torch.zeros_like(index)), ok
