"""A hit's score is its relevance in [0, 1]: its best sub-chunk's cosine, in ranking order, whatever the query."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from subchunk_layouts import BM25, DATA, FUSED, PLAIN, QUERY

from qdrant_tools.ingest import ingest_path
from qdrant_tools.search import SearchSettings, collection_vectors, relevance, search

QUERIES = (QUERY, "alpha beta gamma", "omega", "the quick brown fox")


def _best_subchunk_cosines(client, collection, q):
    """Every node's best sub-chunk cosine with ``q``, from its stored sub-chunk vectors."""
    rows = collection_vectors(client, collection).subchunks
    records, _ = client.scroll(collection, limit=1000, with_vectors=[rows])
    unit = q / np.linalg.norm(q)
    out = {}
    for r in records:
        m = np.asarray(r.vector[rows], dtype=np.float32)
        out[str(r.id)] = float((m @ unit / np.linalg.norm(m, axis=1)).max())
    return out


@pytest.mark.parametrize("layout", ["fused", "plain"])
@pytest.mark.parametrize("fusion", ["rrf", "dbsf", None])
def test_every_query_scores_each_hit_by_its_best_sub_chunk_cosine_in_ranking_order(client, encoder, layout, fusion):
    ingest_path(client, layout, DATA, {"calibrated": encoder}, FUSED if layout == "fused" else PLAIN)
    settings = SearchSettings(limit=6, node_weight=0.4, fusion_limit=10)
    settings = settings.overridden(sparse=False) if fusion is None else settings.overridden(fusion=fusion)
    for text in QUERIES:
        q = encoder.encode_queries([text])[0]
        best = _best_subchunk_cosines(client, layout, q)
        hits = search(client, layout, q, settings, sparse_query=BM25.embed_query(text))
        assert hits and all((h.fusion_score is None) == (fusion is None) for h in hits)
        scores = [h.score for h in hits]
        assert all(0.0 <= s <= 1.0 for s in scores) and all(a > b or b == 0.0 for a, b in itertools.pairwise(scores))
        assert scores == pytest.approx(relevance([best[h.id] for h in hits]), abs=1e-5)


def test_a_node_vector_query_scores_by_the_node_cosine(client, encoder):
    ingest_path(client, "fused", DATA, {"calibrated": encoder}, FUSED)
    q = encoder.encode_queries([QUERY])[0]
    settings = SearchSettings(limit=5, subchunks=False, sparse=False)
    hits = search(client, "fused", q, settings)
    node = collection_vectors(client, "fused").node_vector()
    unit = q / np.linalg.norm(q)
    stored = {
        str(r.id): np.asarray(r.vector[node])
        for r in client.retrieve("fused", [h.id for h in hits], with_vectors=[node])
    }
    cosines = [float(stored[h.id] @ unit / np.linalg.norm(stored[h.id])) for h in hits]
    assert [h.score for h in hits] == pytest.approx(relevance(cosines), abs=1e-5)


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
