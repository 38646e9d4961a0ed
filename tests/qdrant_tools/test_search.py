"""``qdrant_tools.search`` above ``exact_up_to``: candidates from the node vector, the sub-chunk graph and BM25.

Small random collections (node vector = the normalised mean of a node's sub-chunk vectors, a poor proxy for
its best sub-chunk), written into both embedded engines with and without an HNSW graph on the sub-chunk
multivector, searched with ``exact_up_to`` below their size so the large-collection query runs.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools import search as S
from qdrant_tools.search import SearchSettings, collection_vectors, search
from qdrant_tools.store import open_store

N, DIM, PER, VOCAB = 240, 16, 6, 60


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[models.SparseVector]]:
    """Node vectors, sub-chunk vectors ``[N, PER, DIM]`` (around 40 centres) and a sparse vector per node."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM))
    subs = centres[rng.integers(0, 40, (N, PER))] + 0.6 * rng.standard_normal((N, PER, DIM))
    subs /= np.linalg.norm(subs, axis=2, keepdims=True)
    node = subs.mean(axis=1)
    node /= np.linalg.norm(node, axis=1, keepdims=True)
    sparse = []
    for _ in range(N):
        terms = np.sort(rng.choice(VOCAB, size=rng.integers(3, 9), replace=False))
        sparse.append(models.SparseVector(indices=terms.tolist(), values=rng.uniform(0.5, 2.0, len(terms)).tolist()))
    return node.astype(np.float32), subs.astype(np.float32), sparse


DATA = _data()


def _queries(n: int = 20, seed: int = 1) -> np.ndarray:
    """Queries near stored sub-chunks (each has a clear best sub-chunk somewhere)."""
    rng = np.random.default_rng(seed)
    q = DATA[1].reshape(-1, DIM)[rng.integers(0, N * PER, n)] + 0.3 * rng.standard_normal((n, DIM))
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _write(client, m: int) -> None:
    """The posfair layout (node vector, sub-chunk multivector with HNSW ``m``, BM25), indexed where the store can."""
    node, subs, sparse = DATA
    multi = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
    client.create_collection(
        "c",
        vectors_config={
            "vanilla": models.VectorParams(size=DIM, distance=models.Distance.COSINE),
            "subchunks": models.VectorParams(
                size=DIM,
                distance=models.Distance.COSINE,
                multivector_config=multi,
                hnsw_config=models.HnswConfigDiff(m=m),
            ),
        },
        sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1),
    )
    vectors = [{"vanilla": node[i].tolist(), "subchunks": subs[i].tolist(), "bm25": sparse[i]} for i in range(N)]
    client.upsert("c", [models.PointStruct(id=i, vector=v, payload={"i": i}) for i, v in enumerate(vectors)])
    if hasattr(client, "build_index"):
        client.build_index("c")


def _exact_top(queries: np.ndarray, k: int = 10) -> list[set[int]]:
    """Each query's top-``k`` nodes by exact MaxSim in numpy."""
    maxsim = np.einsum("qd,npd->qnp", queries, DATA[1]).max(axis=2)
    return [set(np.argsort(-row, kind="stable")[:k].tolist()) for row in maxsim]


def _recall(client, settings: SearchSettings, queries: np.ndarray) -> float:
    want = _exact_top(queries)
    got = [{int(h.id) for h in search(client, "c", q, settings)} for q in queries]
    return float(np.mean([len(g & w) / len(w) for g, w in zip(got, want)]))


def _settled(hits: list) -> tuple[list[float], set[str]]:
    """The ranking scores (the fusion value of a fused query), and the ids scored above the last one: RRF ties
    come in either order, and a tie at the cut may send either node in."""
    scores = [round(h.rank_score, 4) for h in hits]
    return scores, {h.id for h, s in zip(hits, scores) if s > scores[-1]}


pytestmark = pytest.mark.usefixtures("fresh_advice")


@pytest.fixture
def store(client, request):
    """``client`` (both engines) holding the random collection, sub-chunk HNSW ``m`` = the test's param."""
    _write(client, request.param)
    return client


#: Large-collection settings: 240 nodes > exact_up_to, a node-vector prefetch of only 10 of them, best sub-chunk only.
LARGE = SearchSettings(
    limit=10, prefetch_limit=10, exact_up_to=20, subchunk_candidates=60, sparse=False, node_weight=0.0
)


@pytest.mark.parametrize(("store", "graph"), [(0, False), (16, True)], indirect=["store"])
def test_the_layout_says_whether_the_subchunk_multivector_has_a_graph(store, graph):
    assert collection_vectors(store, "c").subchunk_graph is graph


@pytest.mark.parametrize("store", [16], indirect=True)
def test_the_subchunk_graph_keeps_the_exact_maxsim_top10_above_exact_up_to(store):
    assert _recall(store, LARGE, _queries()) >= 0.95


def test_without_the_graph_the_node_prefetch_bounds_recall(client):
    _write(client, 0)
    with_graph = open_store(":memory:", engine="local")
    try:
        _write(with_graph, 16)
        fallback, graph = _recall(client, LARGE, _queries()), _recall(with_graph, LARGE, _queries())
    finally:
        with_graph.close()
    assert fallback < 0.8 < graph


@pytest.mark.parametrize("m", [0, 16])
@pytest.mark.parametrize("hybrid", [False, True])
@pytest.mark.parametrize("node_weight", [0.0, 0.5])
def test_edge_and_local_mode_answer_the_large_collection_query_alike(m, hybrid, node_weight):
    settings = SearchSettings(
        limit=10, prefetch_limit=10, exact_up_to=20, subchunk_candidates=60, node_weight=node_weight, fusion_limit=15
    )
    sparse = models.SparseVector(indices=[3, 7, 11, 19], values=[1.0, 1.0, 1.0, 1.0]) if hybrid else None
    ranked = {}
    for engine in ("edge", "local"):
        client = open_store(":memory:", engine=engine)
        try:
            _write(client, m)
            hits = [search(client, "c", q, settings, sparse_query=sparse) for q in _queries(8)]
            ranked[engine] = [_settled(q_hits) for q_hits in hits]
        finally:
            client.close()
    assert ranked["edge"] == ranked["local"]


@pytest.mark.parametrize("store", [16], indirect=True)
def test_bm25_and_the_graph_keep_the_hybrid_top10_of_the_exhaustive_search(store):
    sparse = models.SparseVector(indices=[3, 7, 11, 19], values=[1.0, 1.0, 1.0, 1.0])
    rrf = {"node_weight": 0.5, "fusion": "rrf", "fusion_limit": 50}
    large = SearchSettings(limit=10, prefetch_limit=10, exact_up_to=20, subchunk_candidates=60, **rrf)
    exhaustive = SearchSettings(limit=10, exact_up_to=0, prefetch_limit=N, **rrf)  # every node a candidate
    shares = []
    for q in _queries():
        want = {h.id for h in search(store, "c", q, exhaustive, sparse_query=sparse)}
        got = {h.id for h in search(store, "c", q, large, sparse_query=sparse)}
        shares.append(len(want & got) / len(want))
    assert np.mean(shares) >= 0.9  # measured 0.975-0.985 over fresh Edge builds


@pytest.mark.parametrize("store", [0], indirect=True)
def test_a_large_collection_without_the_graph_is_told_once_that_reingesting_helps(store, caplog):
    with caplog.at_level(logging.WARNING, logger="qdrant_tools.search"):
        for q in _queries(3):
            search(store, "c", q, LARGE)
        search(store, "c", _queries(1)[0], SearchSettings(exact_up_to=N))  # exact: nothing to say
    told = [r.getMessage() for r in caplog.records if "no HNSW graph" in r.getMessage()]
    assert len(told) == 1 and "Re-ingesting" in told[0] and "240 nodes" in told[0]


@pytest.mark.parametrize("store", [16], indirect=True)
def test_a_collection_with_the_graph_is_not_told_to_reingest(store, caplog):
    with caplog.at_level(logging.WARNING, logger="qdrant_tools.search"):
        search(store, "c", _queries(1)[0], LARGE)
    assert [r for r in caplog.records if "no HNSW graph" in r.getMessage()] == []


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_subchunk_candidates_must_be_a_non_negative_integer(bad):
    with pytest.raises(ValueError, match="subchunk_candidates must be an integer >= 0"):
        SearchSettings(subchunk_candidates=bad)


@pytest.mark.parametrize("store", [16], indirect=True)
def test_up_to_exact_up_to_a_collection_with_the_graph_is_still_scanned_exactly(store):
    queries = _queries()
    exact = SearchSettings(limit=10, exact_up_to=N, sparse=False, node_weight=0.0)
    got = [[int(h.id) for h in search(store, "c", q, exact)] for q in queries]
    maxsim = np.einsum("qd,npd->qnp", queries, DATA[1]).max(axis=2)
    want = [np.argsort(-row, kind="stable")[:10].tolist() for row in maxsim]
    assert got == want


class _Recording:
    """The store, recording the arguments of each ``query_points`` call."""

    def __init__(self, client):
        self.client, self.calls = client, []

    def __getattr__(self, name):
        return getattr(self.client, name)

    def query_points(self, *args, **kwargs):
        self.calls.append(kwargs)
        return self.client.query_points(*args, **kwargs)


def _scans(prefetches, using):
    """The prefetches (at any depth) that search ``using`` over the collection (no prefetch of their own)."""
    out = []
    for p in prefetches or []:
        if p.prefetch:
            out += _scans(p.prefetch if isinstance(p.prefetch, list) else [p.prefetch], using)
        elif p.using == using:
            out.append(p)
    return out


@pytest.mark.parametrize(
    ("store", "node_weight", "exact"),
    [(0, 0.0, None), (16, 0.0, True), (0, 0.5, True), (16, 0.5, True)],
    indirect=["store"],
)
def test_the_exact_scan_asks_for_exact_search_where_an_index_would_answer_approximately(store, node_weight, exact):
    recording = _Recording(store)
    search(
        recording, "c", _queries(1)[0], SearchSettings(limit=10, exact_up_to=N, sparse=False, node_weight=node_weight)
    )
    (call,) = recording.calls
    scans = _scans(call.get("prefetch"), "subchunks")
    params = scans[0].params if scans else call.get("search_params")
    assert (params.exact if params else None) is exact


@pytest.mark.parametrize("store", [0, 16], indirect=True)
def test_up_to_exact_up_to_the_node_weighted_score_is_exact_for_every_node_of_either_ranking(store):
    """Below ``exact_up_to`` both arms of the node-weight formula re-score the union of the exact MaxSim and the
    exact node-cosine rankings, so the node-weighted top 10 is numpy's exact ``0.5 cos + 0.5 MaxSim`` top 10."""
    queries = _queries()
    settings = SearchSettings(limit=10, exact_up_to=N, sparse=False, node_weight=0.5, fusion_limit=50)
    got = [[int(h.id) for h in search(store, "c", q, settings)] for q in queries]
    maxsim = np.einsum("qd,npd->qnp", queries, DATA[1]).max(axis=2)
    fused = 0.5 * queries @ DATA[0].T + 0.5 * maxsim
    want = [np.argsort(-row, kind="stable")[:10].tolist() for row in fused]
    assert got == want


@pytest.mark.parametrize(
    ("points", "want"), [(None, 300), (1_000, 300), (15_000, 300), (50_000, 1000), (100_000, 2000), (10**7, 2000)]
)
def test_node_candidates_grow_with_two_percent_of_the_collection_between_the_floor_and_the_cap(points, want):
    assert SearchSettings(prefetch_limit=300, prefetch_max=2000).node_candidates(points) == want


def test_without_a_cap_the_node_candidates_are_the_prefetch_limit():
    assert SearchSettings(prefetch_limit=300, prefetch_max=None).node_candidates(10**7) == 300


@pytest.mark.parametrize("bad", [299, True, 1.5])
def test_prefetch_max_below_the_prefetch_limit_is_refused(bad):
    with pytest.raises(ValueError, match="prefetch_max must be None or an integer >= prefetch_limit"):
        SearchSettings(prefetch_limit=300, prefetch_max=bad)


@pytest.mark.parametrize("store", [0], indirect=True)
def test_the_node_vector_prefetch_asks_for_the_grown_candidate_count(store, monkeypatch):
    monkeypatch.setattr(S, "PREFETCH_SHARE", 0.1)  # 24 of the 240 nodes
    recording = _Recording(store)
    settings = SearchSettings(limit=10, prefetch_limit=10, prefetch_max=100, exact_up_to=20, sparse=False)
    search(recording, "c", _queries(1)[0], settings)
    (call,) = recording.calls
    prefetch = call["prefetch"] if isinstance(call["prefetch"], list) else [call["prefetch"]]
    assert {p.limit for p in _scans(prefetch, "vanilla")} == {24}


def test_overrides_apply_only_where_given():
    s = SearchSettings(node_weight=0.2, prefetch_limit=50).overridden(limit=3, node_weight=None, evidence=True)
    assert (s.limit, s.node_weight, s.prefetch_limit, s.evidence) == (3, 0.2, 50, True)


def test_a_dbsf_override_drops_the_rrf_weight_and_k():
    s = SearchSettings(fusion="rrf", sparse_weight=1.5, rrf_k=60).overridden(fusion="dbsf")
    assert (s.fusion, s.sparse_weight, s.rrf_k) == ("dbsf", 1.0, None)


def test_a_bad_override_is_named():
    with pytest.raises(ValueError, match="node_weight must lie in"):
        SearchSettings().overridden(node_weight=2.0)


def test_an_unknown_override_is_named_with_the_settings():
    with pytest.raises(ValueError, match=r"no search setting \['fuson'\]; the settings are"):
        SearchSettings().overridden(fuson="dbsf")
