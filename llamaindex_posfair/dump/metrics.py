"""Pure math for DUMP training and evaluation: InfoNCE and ranking metrics.

No model, no I/O: embeddings and score matrices in, numbers out. Ranking
metrics are computed with ``llamaindex_posfair.eval.metrics`` (the one nDCG of
the package and its tie rule: a relevant document tied with others ranks last).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from llamaindex_posfair.eval.metrics import mrr_at_k, ndcg_at_k, rank_scores, recall_at_k

__all__ = ["infonce_loss", "ranking_metrics"]


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


def ranking_metrics(scores: np.ndarray, relevant: Sequence[int], ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """nDCG@10, MRR@10 and recall@k of a score matrix with one relevant document per query.

    Args:
        scores: ``[n_queries, n_docs]`` similarity matrix (higher is better).
        relevant: For each query, the column of its relevant document.
        ks: Recall cut-offs.

    Returns:
        ``{"ndcg@10", "mrr@10", "recall@<k>" for k in ks}``, means over queries.

    Raises:
        ValueError: the shapes disagree or there is no query.

    Example:
        >>> m = ranking_metrics(np.array([[0.9, 0.1], [0.9, 0.1]]), [0, 1])
        >>> round(m["mrr@10"], 3), m["recall@1"]
        (0.75, 0.5)
    """
    scores = np.asarray(scores, dtype=np.float64)
    rel = [int(r) for r in relevant]
    if scores.ndim != 2 or len(rel) != scores.shape[0]:
        raise ValueError(
            f"scores must be [n_queries, n_docs] with one relevant column per query, got shape {scores.shape} "
            f"and {len(rel)} relevant indices"
        )
    if not rel:
        raise ValueError("scores has no row; evaluate at least one query")
    doc_ids = [str(j) for j in range(scores.shape[1])]
    qrels = [{str(r): 1.0} for r in rel]
    ranked = rank_scores(scores, doc_ids, max(10, *ks), qrels)
    pairs = list(zip(ranked, qrels))
    out = {
        "ndcg@10": float(np.mean([ndcg_at_k(r, q, 10) for r, q in pairs])),
        "mrr@10": float(np.mean([mrr_at_k(r, q, 10) for r, q in pairs])),
    }
    for k in ks:
        out[f"recall@{k}"] = float(np.mean([recall_at_k(r, q, k) for r, q in pairs]))
    return out
