"""Pure math for DUMP training and evaluation: InfoNCE and ranking metrics.

No model, no I/O: embeddings and score matrices in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch


def infonce_loss(
    queries: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor | None = None, scale: float = 20.0
) -> float:
    """InfoNCE of ``n`` queries against all ``n`` positives and ``n`` hard negatives.

    ``s(q, d) = scale * cos(q, d)``; query ``i``'s target is positive ``i``;
    every other positive and every hard negative is a negative (the
    ``MultipleNegativesRankingLoss`` objective over one batch).

    Args:
        queries: ``[n, dim]``.
        positives: ``[n, dim]``.
        negatives: ``[n, dim]`` or None (in-batch negatives only).
        scale: ``1/tau`` (paper: 20).

    Returns:
        The mean cross-entropy (natural log).

    Example:
        >>> q = torch.eye(2); p = torch.eye(2)
        >>> round(infonce_loss(q, p, scale=20.0), 6)
        0.0
    """
    q = torch.nn.functional.normalize(torch.as_tensor(queries, dtype=torch.float32), dim=-1)
    docs = [torch.as_tensor(positives, dtype=torch.float32)]
    if negatives is not None:
        docs.append(torch.as_tensor(negatives, dtype=torch.float32))
    d = torch.nn.functional.normalize(torch.cat(docs, dim=0), dim=-1)
    scores = scale * q @ d.T
    target = torch.arange(q.shape[0])
    return float(torch.nn.functional.cross_entropy(scores, target))


def ranks_of_relevant(scores: np.ndarray, relevant: Sequence[int]) -> np.ndarray:
    """1-based rank of each query's single relevant document (ties count against it).

    Args:
        scores: ``[n_queries, n_docs]`` similarity matrix.
        relevant: For each query, the column of its relevant document.

    Returns:
        ``[n_queries]`` integer ranks.

    Example:
        >>> ranks_of_relevant(np.array([[0.9, 0.1], [0.9, 0.1]]), [0, 1]).tolist()
        [1, 2]
    """
    scores = np.asarray(scores, dtype=np.float64)
    rel = np.asarray(relevant, dtype=np.int64)
    if scores.ndim != 2 or len(rel) != scores.shape[0]:
        raise ValueError(
            f"scores must be [n_queries, n_docs] with one relevant column per query, got shape {scores.shape} "
            f"and {len(rel)} relevant indices"
        )
    target = scores[np.arange(len(rel)), rel]
    return (scores >= target[:, None]).sum(axis=1)  # counts itself once; ties rank it lower


def ranking_metrics(ranks: Sequence[int], ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """nDCG@10, MRR@10 and recall@k for one relevant document per query.

    Example:
        >>> m = ranking_metrics([1, 2])
        >>> round(m["mrr@10"], 3), m["recall@1"]
        (0.75, 0.5)
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    if ranks.size == 0:
        raise ValueError("ranks must not be empty; evaluate at least one query")
    out = {
        "ndcg@10": float(np.mean([1.0 / math.log2(r + 1) if r <= 10 else 0.0 for r in ranks])),
        "mrr@10": float(np.mean([1.0 / r if r <= 10 else 0.0 for r in ranks])),
    }
    for k in ks:
        out[f"recall@{k}"] = float(np.mean(ranks <= k))
    return out
