"""Sparse vectors (BM25 with the IDF modifier) and fusion: the Edge store against qdrant-client's local mode.

One hybrid collection, written into both engines: a dense ``vanilla``
vector, a ``subchunks`` multivector (MaxSim) and a ``bm25`` sparse vector of
the node text (:class:`qdrant_tools.sparse.Bm25Sparse`, IDF applied by the
collection). Every query must rank the same ids in the same order, with
scores within float32 rounding (RRF scores: equal to 1e-6).

The one place the engines legitimately differ is pinned below
(``test_after_deletes_edge_idf_still_counts_deleted_points``): Qdrant Edge
computes a collection-wide IDF from its sparse index, which keeps deleted
points until the optimizer vacuums their segment (as a Qdrant server does,
per qdrant-client's own notes on ``IdfScope.GLOBAL``); local mode counts
live points at once. ``SearchParams(idf=IdfCorpusParams(corpus=Filter()))``
makes both count live points.
"""

from __future__ import annotations

import itertools
import uuid
from contextlib import closing

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools.sparse import Bm25Sparse
from qdrant_tools.spec import CollectionSpec, VectorConfig
from qdrant_tools.store import UnsupportedCallError, open_store
from qdrant_tools.writer import PointBatch, QdrantWriter

pytestmark = pytest.mark.filterwarnings("ignore:Local mode performs exact")

DIM = 8
N = 48
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
    "romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()
BM25 = Bm25Sparse(avg_len=20)
#: Queries whose BM25 rankings have no tied scores in their top 20 (checked by a test): fused rankings
#: then do not depend on how each engine orders ties.
TEXT_QUERIES = ("golf quebec mike", "xray yankee golf")
LIVE_IDF = models.SearchParams(idf=models.IdfCorpusParams(corpus=models.Filter()))


def point_id(i: int) -> int | str:
    return str(uuid.UUID(int=i * 7919 + 1)) if i % 3 else i


def texts(n: int = N, seed: int = 0) -> list[str]:
    """Random texts, 5 to 40 words, Zipf-like frequencies: common and rare terms."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.1
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 40)), p=p / p.sum())) for _ in range(n)]


def vectors_config() -> dict[str, models.VectorParams]:
    return {
        "vanilla": models.VectorParams(size=DIM, distance=models.Distance.COSINE),
        "subchunks": models.VectorParams(
            size=DIM,
            distance=models.Distance.COSINE,
            multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            hnsw_config=models.HnswConfigDiff(m=0),
        ),
    }


SPARSE_CONFIG = {"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)}


def make_batch(n: int = N, seed: int = 0) -> models.Batch:
    rng = np.random.default_rng(seed + 1)
    docs = texts(n, seed)
    subs = [rng.normal(size=(int(rng.integers(1, 4)), DIM)).astype(np.float32).tolist() for _ in range(n)]
    return models.Batch(
        ids=[point_id(i) for i in range(n)],
        vectors={
            "vanilla": rng.normal(size=(n, DIM)).astype(np.float32).tolist(),
            "subchunks": subs,
            "bm25": BM25.embed_documents(docs),
        },
        payloads=[{"doc_id": f"d{i % 4}", "n": i, "text": t} for i, t in enumerate(docs)],
    )


def fill(store):
    store.create_collection("h", vectors_config=vectors_config(), sparse_vectors_config=SPARSE_CONFIG)
    store.upsert("h", make_batch(), wait=True)
    return store


@pytest.fixture
def edge():
    s = fill(open_store(":memory:"))
    yield s
    s.close()


@pytest.fixture
def local():
    s = fill(open_store(":memory:", engine="local"))
    yield s
    s.close()


@pytest.fixture
def dense_q():
    return np.random.default_rng(42).normal(size=DIM).astype(np.float32).tolist()


def assert_same_ranking(got, want, *, atol: float, min_len: int = 5) -> None:
    """Same scores position by position (within ``atol``) and the same ids in order.

    Points whose scores tie (within ``atol``) may come in either order, so ids are compared as a set per
    tie; the last tie is cut by the limit, so which of its points made it is arbitrary: its ids are not compared.
    """
    g, w = got.points, want.points
    assert len(w) >= min_len and len(g) == len(w)
    assert np.allclose([p.score for p in g], [p.score for p in w], rtol=1e-5, atol=atol)
    starts = [0] + [i for i in range(1, len(w)) if abs(w[i].score - w[i - 1].score) > atol]
    for a, b in itertools.pairwise(starts):  # every tie but the last
        assert {str(p.id) for p in g[a:b]} == {str(p.id) for p in w[a:b]}, f"ranks {a}..{b - 1} differ"


def sparse(text: str) -> models.SparseVector:
    return BM25.embed_query(text)


def kw(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


SCORE_DEFAULTS = {"$score[0]": 0.0, "$score[1]": 0.0}
#: One of every formula operator (finite for every point: logs of positive sums, roots of positive sums).
FORMULA_TERMS = [
    models.DivExpression(
        div=models.DivParams(
            left="$score[0]", right=models.SumExpression(sum=[1.0, models.AbsExpression(abs="$score[1]")])
        )
    ),
    models.ExpDecayExpression(exp_decay=models.DecayParamsExpression(x="$score[1]", target=4.0, scale=2.0)),
    models.GaussDecayExpression(gauss_decay=models.DecayParamsExpression(x="n", target=20.0, scale=10.0, midpoint=0.3)),
    models.LinDecayExpression(lin_decay=models.DecayParamsExpression(x="n", target=0.0, scale=48.0)),
    models.LnExpression(ln=models.SumExpression(sum=[1.0, models.MaxExpression(max=["$score[1]", 0.0])])),
    models.PowExpression(
        pow=models.PowParams(
            base=models.SqrtExpression(sqrt=models.SumExpression(sum=[2.0, "$score[0]"])), exponent=2.0
        )
    ),
    models.NegExpression(neg=models.MinExpression(min=["$score[0]", 0.1])),
    models.Log10Expression(log10=models.ExpExpression(exp=1.0)),
]

QUERIES = {
    "sparse only": (
        1e-5,
        lambda s, q: s.query_points("h", query=sparse("xray yankee golf"), using="bm25", limit=30),
    ),
    "sparse nearest query with filter": (
        1e-5,
        lambda s, q: s.query_points(
            "h",
            query=models.NearestQuery(nearest=sparse("golf quebec mike")),
            using="bm25",
            query_filter=models.Filter(must_not=[kw("doc_id", "d1")]),
            limit=10,
        ),
    ),
    "dense + sparse rrf": (
        1e-6,
        lambda s, q: s.query_points(
            "h",
            prefetch=[
                models.Prefetch(query=q, using="vanilla", limit=20),
                models.Prefetch(query=sparse("golf quebec mike"), using="bm25", limit=20),
            ],
            query=models.FusionQuery(fusion=models.Fusion.RRF),
            limit=10,
        ),
    ),
    "multivector + sparse rrf": (
        1e-6,
        lambda s, q: s.query_points(
            "h",
            prefetch=[
                models.Prefetch(query=[q, q[::-1]], using="subchunks", limit=20),
                models.Prefetch(query=sparse("xray yankee golf"), using="bm25", limit=20),
            ],
            query=models.FusionQuery(fusion=models.Fusion.RRF),
            limit=10,
        ),
    ),
    "dense + sparse + multivector weighted rrf": (
        1e-6,
        lambda s, q: s.query_points(
            "h",
            prefetch=[
                models.Prefetch(query=q, using="vanilla", limit=20),
                models.Prefetch(query=sparse("golf quebec mike"), using="bm25", limit=20),
                models.Prefetch(query=[q], using="subchunks", limit=20),
            ],
            query=models.RrfQuery(rrf=models.Rrf(k=60, weights=[1.0, 2.0, 0.5])),
            limit=10,
        ),
    ),
    "dense + sparse dbsf": (
        1e-5,
        lambda s, q: s.query_points(
            "h",
            prefetch=[
                models.Prefetch(query=q, using="vanilla", limit=20),
                models.Prefetch(query=sparse("golf quebec mike"), using="bm25", limit=20),
            ],
            query=models.FusionQuery(fusion=models.Fusion.DBSF),
            limit=10,
        ),
    ),
    "filtered prefetches rrf": (
        1e-6,
        lambda s, q: s.query_points(
            "h",
            prefetch=[
                models.Prefetch(query=q, using="vanilla", limit=15, filter=models.Filter(must=[kw("doc_id", "d2")])),
                models.Prefetch(
                    query=sparse("golf quebec mike"),
                    using="bm25",
                    limit=15,
                    filter=models.Filter(must_not=[kw("doc_id", "d0")]),
                ),
            ],
            query=models.FusionQuery(fusion=models.Fusion.RRF),
            limit=10,
        ),
    ),
    "nested: fusion of filtered prefetches, re-scored by maxsim": (
        1e-5,
        lambda s, q: s.query_points(
            "h",
            prefetch=models.Prefetch(
                prefetch=[
                    models.Prefetch(query=q, using="vanilla", limit=20),
                    models.Prefetch(
                        query=sparse("xray yankee golf"),
                        using="bm25",
                        limit=20,
                        filter=models.Filter(must_not=[kw("doc_id", "d3")]),
                    ),
                ],
                query=models.FusionQuery(fusion=models.Fusion.RRF),
                limit=15,
            ),
            query=[q],
            using="subchunks",
            limit=8,
        ),
    ),
    "formula: weighted sum of dense and sparse scores": (
        1e-5,
        lambda s, q: s.query_points(
            "h",
            prefetch=[
                models.Prefetch(query=q, using="vanilla", limit=20),
                models.Prefetch(query=sparse("golf quebec mike"), using="bm25", limit=20),
            ],
            query=models.FormulaQuery(
                formula=models.SumExpression(
                    sum=[
                        models.MultExpression(mult=[0.7, "$score[0]"]),
                        models.MultExpression(mult=[0.3, "$score[1]"]),
                        models.MultExpression(mult=[0.5, kw("doc_id", "d1")]),
                    ]
                ),
                defaults={"$score[0]": 0.0, "$score[1]": 0.0},
            ),
            limit=10,
        ),
    ),
    "formula: decays, division, powers, logs, min, max": (
        1e-5,
        lambda s, q: s.query_points(
            "h",
            prefetch=[
                models.Prefetch(query=q, using="vanilla", limit=20),
                models.Prefetch(query=sparse("golf quebec mike"), using="bm25", limit=20),
            ],
            query=models.FormulaQuery(formula=models.SumExpression(sum=FORMULA_TERMS), defaults=SCORE_DEFAULTS),
            limit=10,
        ),
    ),
    "sparse with the idf of a filtered corpus": (
        1e-5,
        lambda s, q: s.query_points(
            "h",
            query=sparse("golf quebec mike"),
            using="bm25",
            search_params=models.SearchParams(
                idf=models.IdfCorpusParams(corpus=models.Filter(must=[kw("doc_id", "d2")]))
            ),
            limit=10,
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_rankings_agree(edge, local, dense_q, name):
    atol, run = QUERIES[name]
    assert_same_ranking(run(edge, dense_q), run(local, dense_q), atol=atol)


@pytest.mark.parametrize("text", TEXT_QUERIES)
def test_the_fixture_sparse_rankings_have_no_ties_in_their_top_20(edge, text):
    scores = [round(p.score, 5) for p in edge.query_points("h", query=sparse(text), using="bm25", limit=20).points]
    assert len(scores) == 20 and len(set(scores)) == 20


def test_idf_scores_are_bm25_weights_times_qdrant_idf(edge):
    """Score = sum over query terms of doc weight * ln(1 + (N - n + 0.5) / (n + 0.5)), N = points with the vector."""
    batch = make_batch()
    docs = dict(zip(batch.ids, batch.vectors["bm25"]))
    q = sparse("golf quebec mike")
    df = {t: sum(t in d.indices for d in docs.values()) for t in q.indices}
    want = {}
    for pid, d in docs.items():
        weights = dict(zip(d.indices, d.values))
        s = sum(weights[t] * np.log(1 + (N - df[t] + 0.5) / (df[t] + 0.5)) for t in q.indices if t in weights)
        if s > 0:
            want[pid] = s
    got = edge.query_points("h", query=q, using="bm25", limit=N).points
    assert len(got) == len(want) > 10
    assert np.allclose([p.score for p in got], [want[p.id] for p in got], rtol=1e-5)
    assert [round(p.score, 5) for p in got] == sorted((round(s, 5) for s in want.values()), reverse=True)


def test_after_deletes_edge_idf_still_counts_deleted_points(edge, local):
    """The one difference: Edge's global IDF keeps deleted points until the optimizer vacuums their segment.

    Local mode recomputes from live points at once. With the corpus given as a filter (any filter, even an
    empty one) both count live points and agree again.
    """
    q = sparse("golf quebec mike")
    before = edge.query_points("h", query=q, using="bm25", limit=N).points
    for s in (edge, local):
        s.delete("h", points_selector=models.PointIdsList(points=[point_id(i) for i in range(0, N, 3)]), wait=True)
    stale = edge.query_points("h", query=q, using="bm25", limit=5).points
    live = local.query_points("h", query=q, using="bm25", limit=5).points
    assert {p.id: p.score for p in stale}.items() <= {p.id: p.score for p in before}.items()  # unchanged
    assert not np.allclose([p.score for p in stale], [p.score for p in live], rtol=1e-3)
    assert_same_ranking(
        edge.query_points("h", query=q, using="bm25", limit=5, search_params=LIVE_IDF),
        local.query_points("h", query=q, using="bm25", limit=5, search_params=LIVE_IDF),
        atol=1e-5,
    )


def test_a_vacuum_brings_edge_global_idf_back_to_live_points(tmp_path):
    opt = models.OptimizersConfigDiff(vacuum_min_vector_number=1, deleted_threshold=0.1)
    with open_store(tmp_path / "s") as store, closing(open_store(":memory:", engine="local")) as local:
        store.create_collection(
            "h", vectors_config=vectors_config(), sparse_vectors_config=SPARSE_CONFIG, optimizers_config=opt
        )
        fill(local)
        store.upsert("h", make_batch())
        store.build_index("h")
        gone = models.PointIdsList(points=[point_id(i) for i in range(0, N, 3)])
        for s in (store, local):
            s.delete("h", points_selector=gone)
        store.build_index("h")
        q = sparse("golf quebec mike")
        got, want = (s.query_points("h", query=q, using="bm25", limit=8) for s in (store, local))
        assert_same_ranking(got, want, atol=1e-5)


def test_sparse_vectors_come_back_as_models_and_agree(edge, local):
    ids = [point_id(4), point_id(0), point_id(7)]
    got = edge.retrieve("h", ids, with_vectors=["bm25"])
    want = local.retrieve("h", ids, with_vectors=["bm25"])
    assert [r.id for r in got] == [r.id for r in want] == ids
    for a, b in zip(got, want):
        assert set(a.vector) == {"bm25"} and isinstance(a.vector["bm25"], models.SparseVector)
        assert a.vector["bm25"].indices == b.vector["bm25"].indices
        assert np.allclose(a.vector["bm25"].values, b.vector["bm25"].values, rtol=1e-6)


def test_scroll_with_all_vectors_returns_dense_multi_and_sparse(edge):
    page, _ = edge.scroll("h", limit=3, with_vectors=True)
    batch = make_batch()
    want = dict(zip(batch.ids, batch.vectors["bm25"]))
    assert len(page) == 3
    for r in page:
        assert set(r.vector) == {"vanilla", "subchunks", "bm25"}
        assert r.vector["bm25"].indices == want[r.id].indices  # Bm25Sparse sorts indices, as Qdrant stores them
        assert np.allclose(r.vector["bm25"].values, want[r.id].values, rtol=1e-6)


def test_point_structs_with_unsorted_sparse_vectors_are_stored_sorted(edge, local):
    p = models.PointStruct(
        id=999,
        vector={"vanilla": [1.0] * DIM, "bm25": models.SparseVector(indices=[30, 4, 17], values=[0.5, 2.0, 1.0])},
        payload={"doc_id": "x"},
    )
    for s in (edge, local):
        s.upsert("h", [p])
    got, want = (s.retrieve("h", [999], with_vectors=["bm25"])[0].vector["bm25"] for s in (edge, local))
    assert got == want == models.SparseVector(indices=[4, 17, 30], values=[2.0, 1.0, 0.5])


def test_get_collection_reports_sparse_vectors_like_local_mode(tmp_path, local):
    with open_store(tmp_path / "s") as store:
        fill(store)
    with open_store(tmp_path / "s") as store:  # reopened: read back from collection.json
        params = store.get_collection("h").config.params
    want = local.get_collection("h").config.params
    assert params.sparse_vectors == want.sparse_vectors == SPARSE_CONFIG
    assert params.vectors == want.vectors


def test_a_sparse_only_collection_works(edge):
    edge.create_collection("s", sparse_vectors_config=SPARSE_CONFIG)
    docs = ["red apples and green apples", "green pears", "blue sky"]
    edge.upsert("s", models.Batch(ids=[1, 2, 3], vectors={"bm25": BM25.embed_documents(docs)}))
    hits = edge.query_points("s", query=sparse("apple"), using="bm25").points
    assert [p.id for p in hits] == [1]
    assert edge.get_collection("s").config.params.vectors == {}


def test_the_writer_passes_sparse_vectors_through_to_both_engines(dense_q):
    spec = CollectionSpec(name="w", vectors=[VectorConfig(name="vanilla", size=DIM)], payload_indexes=())
    docs = texts(12, seed=3)
    rng = np.random.default_rng(3)
    ids = [str(uuid.UUID(int=i + 1)) for i in range(12)]
    batch = PointBatch(
        ids=ids,
        payloads=[{"text": t} for t in docs],
        vectors={"vanilla": rng.normal(size=(12, DIM)).astype(np.float32)},
        sparse={"bm25": BM25.embed_documents(docs)},
    )
    results = []
    for engine in ("edge", "local"):
        with closing(open_store(":memory:", engine=engine)) as store:
            store.create_collection("w", vectors_config={"vanilla": spec.vectors[0].to_qdrant()},
                                    sparse_vectors_config=SPARSE_CONFIG)  # fmt: skip
            writer = QdrantWriter(store, spec)
            writer.ensure()
            assert writer.upsert(batch) == 12
            results.append(store.query_points("w", query=sparse("golf mike"), using="bm25", limit=5))
            stored = store.retrieve("w", [ids[0]], with_vectors=["bm25"])[0].vector["bm25"]
            assert stored == batch.sparse["bm25"][0]
    assert_same_ranking(results[0], results[1], atol=1e-5, min_len=3)


def test_the_writer_refuses_sparse_rows_that_are_not_sparse_vectors():
    spec = CollectionSpec(name="w", vectors=[VectorConfig(name="vanilla", size=2)], payload_indexes=())
    with open_store(":memory:") as store:
        writer = QdrantWriter(store, spec)
        writer.ensure()
        bad = PointBatch(ids=[str(uuid.UUID(int=1))], payloads=[{}], vectors={}, sparse={"bm25": [[1.0, 2.0]]})
        with pytest.raises(ValueError, match="sparse vector 'bm25' got a list; give models.SparseVector"):
            writer.upsert(bad)
        clash = PointBatch(ids=[str(uuid.UUID(int=1))], payloads=[{}], vectors={}, sparse={"vanilla": [sparse("a")]})
        with pytest.raises(ValueError, match=r"sparse vectors \['vanilla'\] are named like dense vectors"):
            writer.upsert(clash)


# ---------------------------------------------------------------------- errors


def test_a_sparse_query_on_a_dense_vector_names_it_and_the_fix(edge):
    with pytest.raises(ValueError, match=r"query_points: 'vanilla' is a dense vector but got a SparseVector.*'bm25'"):
        edge.query_points("h", query=sparse("golf"), using="vanilla")


def test_a_sparse_query_on_an_unknown_name_lists_the_sparse_vectors(edge):
    with pytest.raises(ValueError, match=r"no sparse vector named 'bm26'.*sparse vectors \['bm25'\].*sparse_vectors_c"):
        edge.query_points("h", query=sparse("golf"), using="bm26")


def test_a_wrong_name_inside_a_nested_prefetch_is_caught_before_the_query(edge, dense_q):
    inner = models.Prefetch(query=dense_q, using="bm25", limit=5)
    with pytest.raises(ValueError, match="query_points prefetch prefetch: 'bm25' is a sparse vector but got a dense"):
        edge.query_points(
            "h", prefetch=models.Prefetch(prefetch=[inner], query=[dense_q], using="subchunks"), query=[dense_q],
            using="subchunks",
        )  # fmt: skip


def test_a_sparse_vector_upserted_to_a_dense_name_is_refused_before_writing(edge):
    p = models.PointStruct(id=1000, vector={"vanilla": models.SparseVector(indices=[1], values=[1.0])})
    with pytest.raises(ValueError, match="upsert: 'vanilla' is a dense vector but got a SparseVector"):
        edge.upsert("h", [p])
    assert edge.retrieve("h", [1000]) == []


def test_a_dense_vector_in_a_batch_column_of_a_sparse_name_is_refused(edge):
    batch = models.Batch(ids=[1000], vectors={"bm25": [[1.0, 2.0]]})
    with pytest.raises(ValueError, match="upsert: 'bm25' is a sparse vector but got a dense vector.*Bm25Sparse"):
        edge.upsert("h", batch)


def test_a_sparse_vector_with_repeated_indices_is_refused_like_qdrant_does(edge):
    p = models.PointStruct(id=1000, vector={"bm25": models.SparseVector(indices=[3, 3], values=[1.0, 2.0])})
    with pytest.raises(ValueError, match=r"repeated indices \[3\]"):
        edge.upsert("h", [p])


def test_server_side_inference_documents_point_to_bm25_sparse(edge):
    with pytest.raises(UnsupportedCallError, match="models.Document.*Bm25Sparse"):
        edge.query_points("h", query=models.Document(text="golf", model="qdrant/bm25"), using="bm25")


def test_a_name_in_both_dense_and_sparse_configs_is_refused(edge):
    with pytest.raises(ValueError, match=r"\['vanilla'\] named in both vectors_config and sparse_vectors_config"):
        edge.create_collection(
            "x", vectors_config=vectors_config(), sparse_vectors_config={"vanilla": models.SparseVectorParams()}
        )
