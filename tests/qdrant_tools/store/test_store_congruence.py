"""Congruence: the same calls on the Edge store and on qdrant-client's local mode give the same answers.

Ids, payloads, scores (exact search: the collection is below the indexing
threshold) and counts must agree, for dense queries, prefetch + MaxSim over a
multivector, fusion, keyword / integer / list / nested filters, payload
selectors, scroll pages, retrieve, groups, deletes and re-upserts.
"""

from __future__ import annotations

import numpy as np
import pytest
from qdrant_client import models

from tests.qdrant_tools.store.conftest import make_points, plain, point_id

pytestmark = pytest.mark.filterwarnings("ignore:Local mode performs exact")


def kw(key, value):
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def ids_scores(response):
    """(score, ids with that score) in rank order: points tied on a score (fusion ranks) may come in any order.

    The last entry keeps only its score.
    """
    ranked: list[tuple[float, set]] = []
    for p in response.points:
        score = round(p.score, 5)
        if ranked and ranked[-1][0] == score:
            ranked[-1][1].add(str(p.id))
        else:
            ranked.append((score, {str(p.id)}))
    if ranked:  # the last rank may be a tie cut by the limit (fusion): which tied point made it is arbitrary
        ranked[-1] = (ranked[-1][0], set())
    return ranked


QUERIES = {
    "dense": lambda s, q: s.query_points("c", query=q, using="node", limit=7),
    "dense hnsw params": lambda s, q: s.query_points(
        "c", query=q, using="node", limit=5, search_params=models.SearchParams(hnsw_ef=64)
    ),
    "dense keyword filter": lambda s, q: s.query_points(
        "c", query=q, using="node", limit=5, query_filter=models.Filter(must=[kw("doc_id", "d3")])
    ),
    "dense offset threshold": lambda s, q: s.query_points(
        "c", query=q, using="node", limit=4, offset=2, score_threshold=0.05
    ),
    "maxsim only": lambda s, q: s.query_points("c", query=[q], using="subchunks", limit=6),
    "prefetch dense then maxsim": lambda s, q: s.query_points(
        "c", prefetch=models.Prefetch(query=q, using="node", limit=20), query=[q], using="subchunks", limit=6
    ),
    "prefetch filtered then maxsim": lambda s, q: s.query_points(
        "c",
        prefetch=models.Prefetch(query=q, using="node", limit=15, filter=models.Filter(must_not=[kw("doc_id", "d0")])),
        query=[q],
        using="subchunks",
        limit=6,
    ),
    "rrf fusion": lambda s, q: s.query_points(
        "c",
        prefetch=[
            models.Prefetch(query=q, using="node", limit=20),
            models.Prefetch(query=[q], using="subchunks", limit=20),
        ],
        query=models.FusionQuery(fusion=models.Fusion.RRF),
        limit=6,
    ),
    "dbsf fusion": lambda s, q: s.query_points(
        "c",
        prefetch=[
            models.Prefetch(query=q, using="node", limit=20),
            models.Prefetch(query=[q], using="subchunks", limit=20),
        ],
        query=models.FusionQuery(fusion=models.Fusion.DBSF),
        limit=6,
    ),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_query_ids_and_scores_agree(edge, local, query_vector, name):
    got, want = ids_scores(QUERIES[name](edge, query_vector)), ids_scores(QUERIES[name](local, query_vector))
    assert len(want) > 0 and got == want


FILTERS = {
    "keyword": models.Filter(must=[kw("doc_id", "d1")]),
    "keyword must_not": models.Filter(must=[kw("doc_id", "d1")], must_not=[kw("chunk_index", 6)]),
    "integer range": models.Filter(must=[models.FieldCondition(key="chunk_index", range=models.Range(gte=10, lt=30))]),
    "match any on a list": models.Filter(must=[models.FieldCondition(key="tags", match=models.MatchAny(any=["a"]))]),
    "match except": models.Filter(
        must=[models.FieldCondition(key="doc_id", match=models.MatchExcept(**{"except": ["d1", "d2"]}))]
    ),
    "should with has_id": models.Filter(should=[kw("doc_id", "d4"), models.HasIdCondition(has_id=[0, 3, point_id(1)])]),
    "nested key": models.Filter(must=kw("meta.x", 1)),
    "is empty": models.Filter(must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="missing"))]),
    "sub-filter": models.Filter(must=[models.Filter(should=[kw("doc_id", "d0"), kw("doc_id", "d2")])]),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filtered_counts_agree(edge, local, name):
    flt = FILTERS[name]
    got, want = edge.count("c", count_filter=flt, exact=True).count, local.count("c", count_filter=flt).count
    assert 0 < want < 60 or name == "is empty"
    assert got == want


SELECTORS = {
    "none": False,
    "field list with nested path": ["doc_id", "meta.x"],
    "include": models.PayloadSelectorInclude(include=["chunk_index"]),
    "exclude": models.PayloadSelectorExclude(exclude=["tags", "meta"]),
}


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_payload_selectors_agree(edge, local, query_vector, name):
    def run(s):
        return [
            p.payload
            for p in s.query_points("c", query=query_vector, using="node", with_payload=SELECTORS[name]).points
        ]

    assert run(edge) == run(local)


def test_returned_vectors_agree(edge, local, query_vector):
    def run(s):
        p = s.query_points("c", query=query_vector, using="node", limit=1, with_vectors=True).points[0]
        return p.vector

    got, want = run(edge), run(local)
    assert set(got) == set(want) == {"node", "subchunks"}
    assert np.allclose(got["node"], want["node"], atol=1e-6) and np.allclose(
        got["subchunks"], want["subchunks"], atol=1e-6
    )


def scroll_all(store, limit, flt=None):
    pages, offset = [], None
    while True:
        points, offset = store.scroll("c", scroll_filter=flt, limit=limit, offset=offset, with_payload=["doc_id"])
        pages.append(([p.id for p in points], offset))
        if offset is None:
            return pages


def test_scroll_pages_and_offsets_agree(edge, local):
    got, want = scroll_all(edge, 7), scroll_all(local, 7)
    assert got == want and sum(len(ids) for ids, _ in got) == 60


def test_filtered_scroll_pages_agree(edge, local):
    flt = models.Filter(must=[kw("doc_id", "d2")])
    assert scroll_all(edge, 5, flt) == scroll_all(local, 5, flt)


def test_retrieve_keeps_request_order_and_skips_missing(edge, local):
    ids = [point_id(5), 999_999, point_id(1), 0]
    got = [(r.id, r.payload) for r in edge.retrieve("c", ids)]
    assert got == [(r.id, r.payload) for r in local.retrieve("c", ids)] and len(got) == 3


@pytest.mark.parametrize("with_payload", [False, True, ["chunk_index"]])
def test_groups_agree(edge, local, query_vector, with_payload):
    def run(s):
        res = s.query_points_groups(
            "c", group_by="doc_id", query=query_vector, using="node", limit=3, group_size=2, with_payload=with_payload
        )
        return plain(res.groups)

    got = run(edge)
    assert got == run(local) and len(got) == 3 and all(len(g["hits"]) == 2 for g in got)


def test_batch_queries_agree(edge, local, query_vector):
    requests = [
        models.QueryRequest(query=query_vector, using="node", limit=3, with_payload=True),
        models.QueryRequest(
            query=[query_vector], using="subchunks", limit=3, filter=models.Filter(must=[kw("doc_id", "d2")])
        ),
    ]
    got, want = edge.query_batch_points("c", requests), local.query_batch_points("c", requests)
    assert plain(got) == plain(want)


def test_delete_by_ids_then_reupsert_agree(edge, local, query_vector):
    for s in (edge, local):
        s.delete("c", points_selector=models.PointIdsList(points=[point_id(i) for i in range(0, 60, 4)]), wait=True)
    assert edge.count("c").count == local.count("c").count == 45
    changed = make_points(seed=0, version="v2")  # same ids and vectors, new payloads
    for s in (edge, local):
        s.upsert("c", changed, wait=True)
    flt = models.Filter(must=[kw("version", "v2")])
    assert edge.count("c", count_filter=flt).count == local.count("c", count_filter=flt).count == 60
    assert ids_scores(QUERIES["dense"](edge, query_vector)) == ids_scores(QUERIES["dense"](local, query_vector))


def test_delete_by_filter_agree(edge, local):
    flt = models.Filter(
        must=[kw("doc_id", "d1")], must_not=[models.FieldCondition(key="chunk_index", range=models.Range(gt=40))]
    )
    for s in (edge, local):
        s.delete("c", points_selector=models.FilterSelector(filter=flt), wait=True)
    assert scroll_all(edge, 100) == scroll_all(local, 100)
    assert edge.count("c").count == 60 - 8  # d1 holds 12 points, 4 of them above chunk 40


def test_point_structs_upsert_like_a_batch(edge, local):
    p = models.PointStruct(
        id=point_id(100), vector={"node": [1.0] * 8, "subchunks": [[1.0] * 8, [0.5] * 8]}, payload={"doc_id": "new"}
    )
    for s in (edge, local):
        s.upsert("c", [p])
    assert plain(edge.retrieve("c", [p.id], with_vectors=["node"])) == plain(
        local.retrieve("c", [p.id], with_vectors=["node"])
    )
