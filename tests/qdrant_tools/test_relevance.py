"""A hit's score is its relevance in [0, 1]: the dense similarity, in ranking order, whatever the fusion."""

from __future__ import annotations

import itertools

import pytest
from subchunk_layouts import BM25, DATA, FUSED, PLAIN, QUERY

from qdrant_tools.ingest import ingest_path
from qdrant_tools.search import SearchSettings, relevance, search

QUERIES = (QUERY, "alpha beta gamma", "omega", "the quick brown fox")


def _dense_scores(client, collection, q, settings):
    """Every node's dense score: a dense-only search deep enough to return all of them."""
    hits = search(client, collection, q, settings.overridden(limit=100, sparse=False, evidence=False))
    assert all(h.fusion_score is None for h in hits)
    return {h.id: h.score for h in hits}


@pytest.mark.parametrize("layout", ["fused", "plain"])
@pytest.mark.parametrize("fusion", ["rrf", "dbsf"])
def test_a_fused_query_scores_each_hit_by_its_dense_similarity_in_ranking_order(client, encoder, layout, fusion):
    ingest_path(client, layout, DATA, {"calibrated": encoder}, FUSED if layout == "fused" else PLAIN)
    settings = SearchSettings(limit=6, node_weight=0.4, fusion_limit=10).overridden(fusion=fusion)
    for text in QUERIES:
        q = encoder.encode_queries([text])[0]
        dense = _dense_scores(client, layout, q, settings)
        hits = search(client, layout, q, settings, sparse_query=BM25.embed_query(text))
        assert hits and all(h.fusion_score is not None for h in hits)
        scores = [h.score for h in hits]
        assert all(0.0 <= s <= 1.0 for s in scores) and all(a > b or b == 0.0 for a, b in itertools.pairwise(scores))
        assert scores == pytest.approx(relevance([dense[h.id] for h in hits]), abs=1e-5)


def test_a_dense_query_keeps_qdrants_scores_as_relevance(client, encoder):
    ingest_path(client, "fused", DATA, {"calibrated": encoder}, FUSED)
    q = encoder.encode_queries([QUERY])[0]
    hits = search(client, "fused", q, SearchSettings(limit=5, node_weight=0.4, sparse=False, evidence=True))
    assert [h.fusion_score for h in hits] == [None] * len(hits)
    assert [h.score for h in hits] == relevance([h.score for h in hits])
    assert all(h.evidence is not None for h in hits)


def test_the_evidence_of_a_fused_query_is_the_best_sub_chunk_as_in_a_dense_query(client, encoder):
    ingest_path(client, "fused", DATA, {"calibrated": encoder}, FUSED)
    ingest_path(client, "plain", DATA, {"calibrated": encoder}, PLAIN)
    q = encoder.encode_queries([QUERY])[0]
    s = SearchSettings(limit=6, node_weight=0.4, fusion_limit=10, evidence=True)
    spans = {}
    for collection in ("fused", "plain"):
        for hit in search(client, collection, q, s, sparse_query=BM25.embed_query(QUERY)):
            spans.setdefault(hit.fields["doc_id"] + f"#{hit.fields['chunk_index']}", set()).add(hit.evidence)
    assert spans and all(len(found) == 1 and None not in found for found in spans.values())


def test_relevance_clips_and_caps_by_the_hit_above():
    assert relevance([]) == []
    assert relevance([1.3, 0.2, 0.5, -0.4]) == pytest.approx([1.0, 0.2, 0.199999, 0.0], abs=1e-9)
    assert relevance([0.0, 0.0]) == [0.0, 0.0]
