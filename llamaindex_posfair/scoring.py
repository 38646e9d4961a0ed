"""The one MaxSim / node-weighted scorer: a node's best sub-chunk, its own cosine, and their weighted sum, in numpy.

What a posfair collection's default dense search computes inside Qdrant (``qdrant_tools.search``), written once
for every in-process path (its users: docs/architecture.md). Pure numpy, no I/O, nothing else from the package.

With one query vector ``q`` and unit vectors, a node with node vector ``n`` and sub-chunk vectors ``s_j``
scores

    ``w * cos(q, n) + (1 - w) * max_j cos(q, s_j)``

(``w = node_weight``; ``w = 0`` is the best sub-chunk alone, ``w = 1`` the node vector alone). A node
without sub-chunks has no best sub-chunk: it scores ``-inf`` unless ``w = 1``.

Example:
    >>> import numpy as np
    >>> q = np.array([[1.0, 0.0]])
    >>> node = np.array([[1.0, 1.0], [0.0, 1.0]])          # two nodes
    >>> sub = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # sub-chunks: node 0 has two, node 1 one
    >>> owner = np.array([0, 0, 1])
    >>> node_scores(q, node, sub, owner, node_weight=0.0).astype(float).round(3).tolist()
    [[1.0, 0.707]]
    >>> node_scores(q, node, sub, owner, node_weight=0.5).astype(float).round(3).tolist()
    [[0.854, 0.354]]
"""

from __future__ import annotations

import numpy as np

__all__ = ["NODE_WEIGHT", "cosine_matrix", "max_over_owners", "node_scores", "unit_rows", "weigh_node_scores"]

#: The default search's weight of the node cosine (``w`` above; research/results/hybrid_sweep/sweep.md): the default of
#: every node-weighted score in the package (``PosFairRerank`` and ``/v1/rerank`` with ``scoring="weighted"``); the
#: default search, ``qdrant_tools.search.SearchSettings()``, holds the same value (qdrant_tools imports nothing of
#: the package; a test checks that the two agree).
NODE_WEIGHT = 0.5


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row of ``x`` (``[n, d]``, or ``[d]``) scaled to unit length; zero rows stay zero (float32).

    Example:
        >>> unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)


def cosine_matrix(queries: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """``[n_queries, n_documents]`` cosines (computed in float64, returned float32); a single query ``[d]`` gives ``[n_documents]``.

    Example:
        >>> cosine_matrix(np.array([2.0, 0.0]), np.array([[1.0, 0.0], [1.0, 1.0]])).astype(float).round(3).tolist()
        [1.0, 0.707]
    """
    q = np.asarray(queries, dtype=np.float64)
    d = np.asarray(documents, dtype=np.float64).reshape(-1, q.shape[-1])
    q = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), 1e-12)
    d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    return (q @ d.T).astype(np.float32)  # float64 inside: |cos| <= 1 survives the rounding


def max_over_owners(sim: np.ndarray, owners: np.ndarray, n_owners: int) -> np.ndarray:
    """``[n_queries, n_items]`` scores -> ``[n_queries, n_owners]``: per owner, its best item (``-inf`` if none).

    ``owners[j]`` is the owner (node, passage) of item ``j`` (sub-chunk, chunk); a 1-d ``sim`` (one query)
    gives a 1-d answer. The dtype of ``sim`` is kept.

    Raises:
        ValueError: ``owners`` does not give one owner per item, or names an owner outside ``[0, n_owners)``.

    Example:
        >>> max_over_owners(np.array([[0.1, 0.5, 0.2]]), np.array([0, 0, 1]), 3).tolist()
        [[0.5, 0.2, -inf]]
    """
    sim = np.asarray(sim)
    owners = np.asarray(owners, dtype=np.int64)
    flat = sim[None, :] if sim.ndim == 1 else sim
    if owners.shape != (flat.shape[1],):
        raise ValueError(f"owners must name one owner per item: {owners.shape[0]} owners for {flat.shape[1]} items")
    if owners.size and (owners.min() < 0 or owners.max() >= n_owners):
        raise ValueError(f"owners must lie in [0, {n_owners}), got [{owners.min()}, {owners.max()}]")
    dtype = flat.dtype if np.issubdtype(flat.dtype, np.floating) else np.float64
    out = np.full((n_owners, flat.shape[0]), -np.inf, dtype=dtype)
    np.maximum.at(out, owners, flat.T.astype(dtype, copy=False))
    return out.T[0] if sim.ndim == 1 else out.T


def weigh_node_scores(node: np.ndarray, best: np.ndarray, node_weight: float) -> np.ndarray:
    """``w * node + (1 - w) * best`` (same shapes); ``w = 0`` is ``best`` and ``w = 1`` is ``node`` exactly.

    Raises:
        ValueError: ``node_weight`` outside ``[0, 1]``.

    Example:
        >>> weigh_node_scores(np.array([1.0]), np.array([0.0]), 0.25).tolist()
        [0.25]
    """
    if not 0.0 <= node_weight <= 1.0:
        raise ValueError(f"node_weight must lie in [0, 1], got {node_weight!r}; 0 = best sub-chunk only")
    if node_weight == 0.0:
        return np.asarray(best)
    if node_weight == 1.0:  # a node without sub-chunks (best = -inf) keeps its node score
        return np.asarray(node)
    return node_weight * np.asarray(node) + (1.0 - node_weight) * np.asarray(best)


def node_scores(
    queries: np.ndarray, node: np.ndarray, sub: np.ndarray, owner: np.ndarray, node_weight: float = 0.0
) -> np.ndarray:
    """``[n_queries, n_nodes]`` scores of the sub-chunk layout (see the module docstring), float32.

    Args:
        queries: ``[n_queries, d]`` (or one ``[d]``: the answer is then ``[n_nodes]``).
        node: ``[n_nodes, d]`` node vectors (only read when ``node_weight > 0``).
        sub: ``[n_sub, d]`` sub-chunk vectors.
        owner: ``[n_sub]`` the node of each sub-chunk.
        node_weight: ``w`` in ``[0, 1]``.
    """
    n_nodes = len(node)
    best = max_over_owners(cosine_matrix(queries, sub), owner, n_nodes) if node_weight < 1.0 else None
    cos = cosine_matrix(queries, node) if node_weight > 0.0 else None
    if best is None:
        return cos
    return weigh_node_scores(cos if cos is not None else best, best, node_weight).astype(np.float32)
