"""qdrant-client query arguments -> Qdrant Edge requests (queries, prefetches, search params, selectors).

Supported queries: a dense vector (list or numpy), a multivector (list of
lists, scored by the vector's comparator, e.g. MaxSim), a sparse vector
(``models.SparseVector``, scored by dot product, times IDF where the sparse
vector has ``Modifier.IDF``), ``NearestQuery`` of any of these,
``FusionQuery`` (RRF, DBSF) / ``RrfQuery`` and ``FormulaQuery`` over
prefetches, ``OrderByQuery`` and ``SampleQuery``; each may sit under
``using=`` and nest prefetches (with filters) to any depth. Anything else
(query by point id, documents for server-side inference, recommend / discover
/ context, MMR, ``lookup_from``) raises :class:`UnsupportedCallError` naming
the alternative. Given the collection's record, every ``using`` is checked
first (:meth:`CollectionRecord.check_vector`): a sparse query on a dense or
unknown name raises a ``ValueError`` that names the vector and the fix.

Example:
    >>> req = query_request(query=[1.0, 0.0], using="node", limit=3)
    >>> req.limit
    3
"""

from __future__ import annotations

from typing import Any

import numpy as np
import qdrant_edge as E
from qdrant_client import models

from qdrant_tools.store.config import CollectionRecord
from qdrant_tools.store.enums import to_edge
from qdrant_tools.store.errors import UnsupportedCallError
from qdrant_tools.store.filters import to_edge_filter
from qdrant_tools.store.formulas import edge_formula
from qdrant_tools.store.points import edge_sparse_vector

#: Qdrant's default ``k`` of reciprocal rank fusion (``Fusion.RRF`` without parameters).
RRF_K = 2
#: Qdrant's default limit of a prefetch without one.
PREFETCH_LIMIT = 10


def _vector(v: Any) -> list[Any]:
    arr = np.asarray(v, dtype=np.float32)
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise ValueError(f"a query vector must be 1-D (dense) or 2-D (multivector), got shape {arr.shape}")
    return arr.tolist()


def _unsupported_query(q: Any) -> UnsupportedCallError:
    if isinstance(q, (int, str)) or type(q).__name__ == "UUID":
        what = "query by point id; retrieve(ids, with_vectors=[name]) and query with the vector"
    elif isinstance(q, models.Document):
        what = (
            f"models.Document(model={q.model!r}) (server-side inference); compute the vector client-side, e.g. "
            "qdrant_tools.sparse.Bm25Sparse().embed_query(text) for BM25, and query with it"
        )
    else:
        what = f"query of type {type(q).__name__}"
    return UnsupportedCallError(
        f"query_points: {what} is not supported by the embedded Qdrant Edge store; supported: a vector, a "
        "multivector, a SparseVector, NearestQuery, FusionQuery/RrfQuery, FormulaQuery, OrderByQuery, SampleQuery. "
        "For the rest use a Qdrant server (url=...) or open_store(path, engine='local')"
    )


def _nearest(v: Any, using: str | None) -> E.Query:
    if isinstance(v, models.SparseVector):
        return E.Query.Nearest(edge_sparse_vector(using or "", v), using=using)
    if isinstance(v, (list, np.ndarray)):
        return E.Query.Nearest(_vector(v), using=using)
    raise _unsupported_query(v)


def edge_query(query: Any, using: str | None) -> Any:
    """The Edge scoring query of a qdrant-client ``query`` (None stays None)."""
    if query is None:
        return None
    if isinstance(query, (list, np.ndarray, models.SparseVector)):
        return _nearest(query, using)
    if isinstance(query, models.NearestQuery):
        if query.mmr is not None:
            raise _unsupported_query(query.mmr)
        return _nearest(query.nearest, using)
    if isinstance(query, models.FusionQuery):
        return E.Fusion.Rrf(k=RRF_K) if query.fusion == models.Fusion.RRF else E.Fusion.Dbsf()
    if isinstance(query, models.RrfQuery):
        return E.Fusion.Rrf(k=query.rrf.k if query.rrf.k is not None else RRF_K, weights=query.rrf.weights)
    if isinstance(query, models.FormulaQuery):
        return edge_formula(query)
    if isinstance(query, models.OrderByQuery):
        return edge_order_by(query.order_by)
    if isinstance(query, models.SampleQuery):
        return E.Sample.Random
    raise _unsupported_query(query)


def edge_order_by(order_by: Any) -> E.OrderBy | None:
    """``OrderBy`` (or a field name) -> Edge ``OrderBy``."""
    if order_by is None:
        return None
    if isinstance(order_by, str):
        return E.OrderBy(order_by)
    direction = to_edge(E.Direction, order_by.direction) if order_by.direction else None
    start = order_by.start_from
    if start is not None and not isinstance(start, (int, float)):
        raise UnsupportedCallError("OrderBy.start_from as a datetime is not supported by the embedded store")
    return E.OrderBy(order_by.key, direction=direction, start_from=start)


def edge_params(params: models.SearchParams | None) -> E.SearchParams | None:
    """Search parameters (HNSW ef, exact, quantization rescoring, ACORN, the IDF corpus of sparse vectors)."""
    if params is None:
        return None
    q = params.quantization
    acorn = params.acorn
    return E.SearchParams(
        hnsw_ef=params.hnsw_ef,
        exact=bool(params.exact),
        quantization=E.QuantizationSearchParams(bool(q.ignore), q.rescore, q.oversampling) if q else None,
        indexed_only=bool(params.indexed_only),
        acorn=E.AcornSearchParams(bool(acorn.enable), acorn.max_selectivity) if acorn else None,
        idf=_idf(params.idf),
    )


def _idf(idf: Any) -> E.IdfParams | None:
    """``IdfScope.GLOBAL`` (or None): collection-wide statistics; ``IdfCorpusParams``: over a filter's points."""
    if isinstance(idf, models.IdfCorpusParams):
        return E.IdfParams(corpus=to_edge_filter(idf.corpus))
    return None


def _query_is_sparse(query: Any) -> bool | None:
    """Whether a query scores a sparse vector (True), a dense one or multivector (False), or no vector (None)."""
    if isinstance(query, models.NearestQuery):
        query = query.nearest
    if isinstance(query, models.SparseVector):
        return True
    if isinstance(query, (list, np.ndarray)):
        return False
    return None


def check_vectors(record: CollectionRecord, query: Any, using: str | None, prefetch: Any, where: str) -> None:
    """Check the vector names a query and its prefetches (to any depth) score, against the collection.

    Raises:
        ValueError: an unknown name, or a sparse query on a dense vector (or the reverse); see
            :meth:`CollectionRecord.check_vector`.
    """
    sparse = _query_is_sparse(query)
    if sparse is not None:
        record.check_vector(using, sparse=sparse, where=where)
    for p in _stages(prefetch):
        check_vectors(record, p.query, p.using, p.prefetch, f"{where} prefetch")


def _stages(prefetch: Any) -> list[Any]:
    return prefetch if isinstance(prefetch, list) else ([prefetch] if prefetch is not None else [])


def edge_prefetch(p: models.Prefetch) -> E.Prefetch:
    """One prefetch stage and its nested stages."""
    if p.lookup_from is not None:
        raise UnsupportedCallError("Prefetch(lookup_from=...) is not supported by the embedded store (one collection)")
    nested = _stages(p.prefetch)
    return E.Prefetch(
        limit=p.limit if p.limit is not None else PREFETCH_LIMIT,
        query=edge_query(p.query, p.using),
        prefetches=[edge_prefetch(x) for x in nested] or None,
        params=edge_params(p.params),
        filter=to_edge_filter(p.filter),
        score_threshold=p.score_threshold,
    )


def edge_with_payload(value: Any) -> Any:
    """``with_payload`` (bool, field list, include/exclude selector) in Edge's terms."""
    if isinstance(value, models.PayloadSelectorInclude):
        return E.PayloadSelector.Include(list(value.include))
    if isinstance(value, models.PayloadSelectorExclude):
        return E.PayloadSelector.Exclude(list(value.exclude))
    if isinstance(value, (bool, list)):
        return value
    raise UnsupportedCallError(f"with_payload={value!r} is not supported; pass a bool, a list or a PayloadSelector")


def query_request(
    *,
    query: Any = None,
    using: str | None = None,
    prefetch: Any = None,
    query_filter: models.Filter | None = None,
    search_params: models.SearchParams | None = None,
    limit: int = 10,
    offset: int | None = None,
    with_payload: Any = True,
    with_vectors: Any = False,
    score_threshold: float | None = None,
    record: CollectionRecord | None = None,
) -> E.QueryRequest:
    """The Edge ``QueryRequest`` of ``query_points``' arguments.

    Args:
        record: the collection's record; if given, every ``using`` is checked against it first.

    Raises:
        UnsupportedCallError: a query kind Edge lacks (see the module docstring).
        ValueError: prefetches without a query (Qdrant Edge needs a query to combine them), or a
            ``using`` the collection lacks or of the wrong kind (sparse vs dense).
    """
    stages = _stages(prefetch)
    if record is not None:
        check_vectors(record, query, using, stages, "query_points")
    if stages and query is None:
        raise ValueError(
            "query_points got prefetch but no query; pass the query that re-scores the prefetched points "
            "(e.g. query=multivector, using='subchunks') or models.FusionQuery(fusion=models.Fusion.RRF)"
        )
    return E.QueryRequest(
        limit=limit,
        offset=offset,
        query=edge_query(query, using),
        prefetches=[edge_prefetch(p) for p in stages] or None,
        with_vector=with_vectors,
        with_payload=edge_with_payload(with_payload),
        filter=to_edge_filter(query_filter),
        score_threshold=score_threshold,
        params=edge_params(search_params),
    )


def batch_request(req: models.QueryRequest, record: CollectionRecord | None = None) -> E.QueryRequest:
    """One ``models.QueryRequest`` of ``query_batch_points`` (``record``: see :func:`query_request`)."""
    if req.lookup_from is not None:
        raise UnsupportedCallError("QueryRequest(lookup_from=...) is not supported by the embedded store")
    return query_request(
        query=req.query,
        using=req.using,
        prefetch=req.prefetch,
        query_filter=req.filter,
        search_params=req.params,
        limit=req.limit if req.limit is not None else 10,
        offset=req.offset,
        with_payload=req.with_payload if req.with_payload is not None else False,
        with_vectors=req.with_vector if req.with_vector is not None else False,
        score_threshold=req.score_threshold,
        record=record,
    )
