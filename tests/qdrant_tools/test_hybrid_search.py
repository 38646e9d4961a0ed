"""The hybrid layout: one point holds the node vector, the sub-chunk multivector and a BM25 sparse vector;
one ``query_points`` call fuses the dense and the BM25 rankings in Qdrant."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import posfair_fields
from qdrant_tools.search import SearchSettings, collection_vectors, search
from qdrant_tools.sparse import SPARSE_VECTOR, Bm25Sparse
from qdrant_tools.spec import CollectionMismatchError
from qdrant_tools.store import open_store
from qdrant_tools.subchunks import SubchunkConfig

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
BM25 = Bm25Sparse()
CFG = IngestConfig(
    show_progress=False,
    sparse=BM25,
    layout=NodeLayout(  # the layout these tests were written with: no fused rows, float node vectors
        chunk_tokens=120, overlap_tokens=10, subchunks=SubchunkConfig(24, 0), fused_weight=None, node_quantization=None
    ),
)


def _points(client):
    return client.scroll("c", limit=10_000, with_payload=True, with_vectors=True)[0]


def test_every_node_stores_the_bm25_vector_of_its_text(client, encoder):
    ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
    assert collection_vectors(client, "c").sparse == SPARSE_VECTOR
    for p in _points(client):
        want = BM25.embed_document(posfair_fields(p.payload)["text"])
        got = p.vector[SPARSE_VECTOR]
        assert list(got.indices) == list(want.indices)
        np.testing.assert_allclose(got.values, want.values, rtol=1e-6)


def test_a_rare_keyword_wins_through_bm25_when_the_dense_ranking_misses_it(client, encoder):
    ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
    n = len(_points(client))
    keyword_doc = {
        posfair_fields(p.payload)["doc_id"]
        for p in _points(client)
        if "waggle" in posfair_fields(p.payload)["text"].lower()
    }
    assert len(keyword_doc) == 1
    unrelated = encoder.encode_queries(["tide moon gravity ocean"])[0]  # the dense ranking prefers the tides file
    settings = SearchSettings(limit=3, fusion_limit=n)
    dense = search(client, "c", unrelated, SearchSettings(limit=3, sparse=False))
    hybrid = search(client, "c", unrelated, settings, sparse_query=BM25.embed_query("waggle"))
    assert dense[0].payload["doc_id"] not in keyword_doc
    assert hybrid[0].payload["doc_id"] in keyword_doc


@pytest.mark.parametrize(
    "fusion",
    [
        {"fusion": "rrf"},
        {"fusion": "dbsf"},
        {"fusion": "rrf", "sparse_weight": 0.5},
        {"fusion": "rrf", "sparse_weight": 2.0, "rrf_k": 60},
        {"fusion": "rrf", "node_weight": 0.5, "sparse_weight": 1.5, "rrf_k": 60, "fusion_limit": 100},
        {"node_weight": 0.5, "fusion": "dbsf", "fusion_limit": 100},
    ],
    ids=["rrf", "dbsf", "weighted-rrf", "weighted-rrf-k60", "default-search", "dbsf-node-0.5"],
)
def test_edge_and_local_mode_rank_the_hybrid_query_the_same(encoder, fusion):
    q = encoder.encode_queries(["how do spring tides form"])[0]
    sparse = BM25.embed_query("spring tides moon sun align")
    ranked = {}
    for engine in ("edge", "local"):
        client = open_store(":memory:", engine=engine)
        try:
            ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
            hits = search(client, "c", q, SearchSettings(limit=8, **fusion), sparse_query=sparse)
            ranked[engine] = [(h.id, round(h.score, 4)) for h in hits]
        finally:
            client.close()
    assert len(ranked["edge"]) == 8
    assert ranked["edge"] == ranked["local"]


def test_the_bm25_weight_of_weighted_rrf_decides_which_ranking_leads(client, encoder):
    ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
    n = len(_points(client))
    unrelated = encoder.encode_queries(["tide moon gravity ocean"])[0]
    sparse = BM25.embed_query("waggle")
    dense_top = search(client, "c", unrelated, SearchSettings(limit=1, sparse=False, node_weight=0.0))[0].id
    bm25_top = next(p.id for p in _points(client) if "waggle" in posfair_fields(p.payload)["text"].lower())
    top = {
        w: search(
            client,
            "c",
            unrelated,
            SearchSettings(limit=1, fusion="rrf", fusion_limit=n, sparse_weight=w),
            sparse_query=sparse,
        )[0].id
        for w in (0.25, 4.0)
    }
    assert dense_top != bm25_top
    assert (top[0.25], top[4.0]) == (dense_top, bm25_top)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sparse_weight": 0.0}, "sparse_weight must be > 0"),
        ({"fusion": "dbsf", "sparse_weight": 2.0}, "DBSF takes no weights"),
        ({"rrf_k": 0}, "rrf_k must be a positive integer"),
        ({"fusion": "dbsf", "rrf_k": 60}, "needs fusion='rrf'"),
    ],
)
def test_fusion_settings_out_of_range_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SearchSettings(**kwargs)


def test_without_a_sparse_query_the_search_is_dense_only(client, encoder):
    ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
    q = encoder.encode_queries(["lighthouse keeper"])[0]
    plain = search(client, "c", q, SearchSettings(limit=4, sparse=False))
    assert [h.id for h in search(client, "c", q, SearchSettings(limit=4))] == [h.id for h in plain]


def test_a_collection_without_bm25_refuses_a_run_that_writes_it(client, encoder):
    ingest_path(
        client,
        "c",
        DATA,
        {"vanilla": encoder},
        IngestConfig(show_progress=False, layout=CFG.layout),
    )
    before = client.count("c").count
    with pytest.raises(CollectionMismatchError, match="no sparse vector"):
        ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
    assert client.count("c").count == before


def test_the_ray_driver_adds_the_bm25_vectors_of_the_node_texts(encoder):
    from qdrant_tools.ray_ingest import with_sparse
    from qdrant_tools.writer import PointBatch

    plan = NodeLayout(subchunks=None).point_encoding({"vanilla": encoder}, sparse=BM25)
    texts = ["spring tides follow the moon", "bees dance"]
    batch = PointBatch(ids=["a", "b"], payloads=[{"text": t} for t in texts], vectors={"vanilla": np.ones((2, 16))})
    assert with_sparse(batch, plan).sparse == {SPARSE_VECTOR: BM25.embed_documents(texts)}


def test_the_filter_applies_to_both_rankings_and_evidence_comes_back(client, encoder):
    from qdrant_client import models

    ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
    only = models.Filter(must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value="tides.md"))])
    q = encoder.encode_queries(["waggle dance"])[0]
    settings = SearchSettings(limit=5, evidence=True)
    hits = search(client, "c", q, settings, query_filter=only, sparse_query=BM25.embed_query("waggle dance"))
    assert hits and {posfair_fields(h.payload)["doc_id"] for h in hits} == {"tides.md"}
    for h in hits:
        assert (
            h.evidence is not None
            and posfair_fields(h.payload)["start_char"]
            <= h.evidence[0]
            < h.evidence[1]
            <= posfair_fields(h.payload)["end_char"]
        )


def test_reingesting_the_hybrid_layout_is_idempotent(client, encoder):
    first = ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
    again = ingest_path(client, "c", DATA, {"vanilla": encoder}, CFG)
    assert first.chunks_written > 0 and again.chunks_written == 0
    assert client.count("c").count == first.chunks_written
