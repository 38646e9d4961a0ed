"""The sub-chunk layout: each node carries a MaxSim multivector of its sentence-aligned sub-chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import posfair_fields
from qdrant_tools.search import SearchSettings, collection_vectors, search
from qdrant_tools.spec import CollectionMismatchError
from qdrant_tools.subchunks import SubchunkConfig

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
SUB = SubchunkConfig(max_tokens=24, overlap_sentences=1)
CFG = IngestConfig(show_progress=False, layout=NodeLayout(chunk_tokens=120, overlap_tokens=10, subchunks=SUB))


def _points(client, collection="c"):
    pts, _ = client.scroll(collection, limit=10_000, with_payload=True, with_vectors=True)
    return pts


def _unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_every_node_stores_the_vectors_of_its_own_sub_chunks(client, encoder):
    report = ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    assert report.chunks_written > 10
    docs = {p.name: p.read_text() for p in DATA.iterdir()}
    for p in _points(client):
        spans = posfair_fields(p.payload)["subchunk_spans"]
        sub = np.asarray(p.vector["subchunks"])
        assert sub.shape == (len(spans), encoder.dimension)
        texts = [docs[posfair_fields(p.payload)["doc_id"]][a:b] for a, b in spans]
        assert all(
            posfair_fields(p.payload)["start_char"] <= a < b <= posfair_fields(p.payload)["end_char"] for a, b in spans
        )
        np.testing.assert_allclose(sub, encoder.encode_documents(texts), atol=1e-5)


def test_maxsim_through_qdrant_equals_numpy_max_over_the_same_vectors(client, encoder):
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    pts = _points(client)
    q = encoder.encode_queries(["how do spring tides form when the moon and sun align"])[0]
    want = {str(p.id): float((_unit(p.vector["subchunks"]) @ _unit(q)).max()) for p in pts}
    hits = search(client, "c", q, SearchSettings(limit=len(pts), prefetch_limit=len(pts), node_weight=0.0))
    assert [h.id for h in hits][:5] == sorted(want, key=lambda i: -want[i])[:5]
    for h in hits:
        assert h.score == pytest.approx(want[h.id], abs=1e-5)


def test_node_weighted_score_weighs_the_node_and_the_best_sub_chunk(client, encoder):
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    pts = {str(p.id): p for p in _points(client)}
    q = encoder.encode_queries(["lighthouse keeper lamp"])[0]
    hits = search(client, "c", q, SearchSettings(limit=3, prefetch_limit=len(pts), node_weight=0.3))
    for h in hits:
        p = pts[h.id]
        node = float(_unit(p.vector["calibrated"]) @ _unit(q))
        best = float((_unit(p.vector["subchunks"]) @ _unit(q)).max())
        assert h.rank_score == pytest.approx(0.3 * node + 0.7 * best, abs=1e-5) and h.score <= best + 1e-5


def test_evidence_is_the_best_matching_sub_chunk(client, encoder):
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    q = encoder.encode_queries(["waggle dance honeybees"])[0]
    hit = search(client, "c", q, SearchSettings(limit=1, evidence=True))[0]
    spans = posfair_fields(hit.payload)["subchunk_spans"]
    sub = client.retrieve("c", ids=[hit.id], with_vectors=["subchunks"])[0].vector["subchunks"]
    best = int(np.argmax(_unit(sub) @ _unit(q)))
    assert hit.evidence == tuple(spans[best])


def test_evidence_limit_gives_evidence_to_the_best_hits_only(client, encoder):
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    q = encoder.encode_queries(["waggle dance honeybees"])[0]
    hits = search(client, "c", q, SearchSettings(limit=4, evidence=True, evidence_limit=2))
    assert [h.evidence is not None for h in hits] == [True, True, False, False]


def test_single_vector_layout_is_still_available(client, encoder):
    ingest_path(
        client, "c", DATA, {"calibrated": encoder}, IngestConfig(show_progress=False, layout=NodeLayout(subchunks=None))
    )
    vectors = collection_vectors(client, "c")
    assert vectors.subchunks is None and vectors.names == ["calibrated"]
    assert all(set(p.vector) == {"calibrated"} and "subchunk_spans" not in p.payload for p in _points(client))
    q = encoder.encode_queries(["tides"])[0]
    assert len(search(client, "c", q, SearchSettings(limit=2))) == 2


@pytest.mark.parametrize(("first", "second"), [(None, SUB), (SUB, None)])
def test_layouts_never_mix_in_one_collection(client, encoder, first, second):
    ingest_path(
        client,
        "c",
        DATA,
        {"calibrated": encoder},
        IngestConfig(show_progress=False, layout=NodeLayout(subchunks=first)),
    )
    before = client.count("c", exact=True).count
    with pytest.raises(CollectionMismatchError, match="sub-chunk|subchunks"):
        ingest_path(
            client,
            "c",
            DATA,
            {"calibrated": encoder},
            IngestConfig(show_progress=False, layout=NodeLayout(subchunks=second)),
        )
    assert client.count("c", exact=True).count == before


def test_other_sub_chunk_settings_re_embed_every_document(client, encoder):
    first = ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    again = ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    assert again.chunks_written == 0 and len(again.unchanged) == len(first.new)
    other = IngestConfig(
        show_progress=False, layout=NodeLayout(chunk_tokens=120, overlap_tokens=10, subchunks=SubchunkConfig(16, 0))
    )
    changed = ingest_path(client, "c", DATA, {"calibrated": encoder}, other)
    assert len(changed.changed) == len(first.new)
    assert client.count("c", exact=True).count == first.chunks_written


def test_a_crash_then_a_rerun_stores_every_node_once_with_its_sub_chunks(client, make_encoder):
    broken = make_encoder(fail_on_call=3)
    with pytest.raises(RuntimeError, match="injected failure"):
        ingest_path(client, "c", DATA, {"calibrated": broken}, IngestConfig(**{**CFG.__dict__, "batch_size": 2}))
    partial = client.count("c", exact=True).count
    report = ingest_path(client, "c", DATA, {"calibrated": make_encoder()}, CFG)
    pts = _points(client)
    assert 0 < partial < len(pts) and report.chunks_resumed == partial
    assert len({(posfair_fields(p.payload)["doc_id"], posfair_fields(p.payload)["chunk_index"]) for p in pts}) == len(
        pts
    )
    assert all(len(p.vector["subchunks"]) == len(posfair_fields(p.payload)["subchunk_spans"]) for p in pts)


def test_int8_quantized_sub_chunks_are_configured_on_the_multivector(client, encoder):
    cfg = IngestConfig(show_progress=False, layout=NodeLayout(subchunks=SUB, subchunk_quantization="int8"))
    ingest_path(client, "c", DATA, {"calibrated": encoder}, cfg)
    params = client.get_collection("c").config.params.vectors["subchunks"]
    assert params.multivector_config is not None and params.quantization_config is not None
    assert params.hnsw_config.m == 0


def _numpy_top(pts, q, k, weight=0.0, node_vector="calibrated"):
    """Exact scores over every node: ``w * cos(q, node) + (1 - w) * max_j cos(q, s_j)``, best ``k`` first."""
    score = {
        str(p.id): weight * float(_unit(p.vector[node_vector]) @ _unit(q))
        + (1 - weight) * float((_unit(p.vector["subchunks"]) @ _unit(q)).max())
        for p in pts
    }
    return sorted(score.items(), key=lambda kv: -kv[1])[:k]


def test_a_small_collection_is_scored_by_exact_maxsim_over_every_node(client, encoder):
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    pts = _points(client)
    q = encoder.encode_queries(["how do spring tides form when the moon and sun align"])[0]
    hits = search(client, "c", q, SearchSettings(limit=5, prefetch_limit=1, node_weight=0.0))  # exact_up_to >= nodes
    want = _numpy_top(pts, q, 5)
    assert [h.id for h in hits] == [i for i, _ in want]
    assert [h.score for h in hits] == pytest.approx([s for _, s in want], abs=1e-5)


def test_a_node_weighted_score_in_a_small_collection_considers_every_node(client, encoder):
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    pts = _points(client)
    q = encoder.encode_queries(["lighthouse keeper lamp"])[0]
    hits = search(client, "c", q, SearchSettings(limit=3, prefetch_limit=1, node_weight=0.3))
    want = _numpy_top(pts, q, 3, weight=0.3)
    assert [h.id for h in hits] == [i for i, _ in want]
    assert [h.rank_score for h in hits] == pytest.approx([s for _, s in want], abs=1e-5)


def test_the_exact_scan_applies_the_query_filter(client, encoder):
    from qdrant_client import models

    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    pts = [p for p in _points(client) if posfair_fields(p.payload)["doc_id"] == "tides.md"]
    q = encoder.encode_queries(["waggle dance honeybees"])[0]
    only = models.Filter(must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value="tides.md"))])
    hits = search(client, "c", q, SearchSettings(limit=3), query_filter=only)
    assert [h.id for h in hits] == [i for i, _ in _numpy_top(pts, q, 3)]


def test_exact_up_to_zero_keeps_the_node_vector_prefetch(client, encoder):
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    pts = _points(client)
    q = encoder.encode_queries(["how do spring tides form when the moon and sun align"])[0]
    hits = search(client, "c", q, SearchSettings(limit=3, prefetch_limit=3, exact_up_to=0))
    nearest = _numpy_top(pts, q, 3, weight=1.0)  # the prefetch: the 3 nodes nearest by node cosine
    assert {h.id for h in hits} == {i for i, _ in nearest}


def test_a_collection_larger_than_exact_up_to_is_searched_in_two_stages(client, make_encoder):
    encoder = make_encoder(max_length=256)  # nodes within the window keep their encoded node vectors
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    pts = _points(client)
    q = encoder.encode_queries(["how do spring tides form when the moon and sun align"])[0]
    by_node, by_maxsim = ({i for i, _ in _numpy_top(pts, q, 3, weight=w)} for w in (1.0, 0.0))
    assert by_node != by_maxsim  # the query tells the two strategies apart
    two_stage = search(client, "c", q, SearchSettings(limit=3, prefetch_limit=3, exact_up_to=len(pts) - 1))
    exact = search(client, "c", q, SearchSettings(limit=3, prefetch_limit=3, exact_up_to=len(pts)))
    assert {h.id for h in two_stage} == by_node and {h.id for h in exact} == by_maxsim


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_exact_up_to_must_be_a_non_negative_integer(bad):
    with pytest.raises(ValueError, match="exact_up_to must be an integer >= 0"):
        SearchSettings(exact_up_to=bad)


@pytest.mark.parametrize(("m", "graph"), [(0, False), (16, True)])
def test_subchunk_graph_m_decides_whether_ingestion_writes_the_subchunk_graph(client, encoder, m, graph):
    from dataclasses import replace

    ingest_path(client, "c", DATA, {"vanilla": encoder}, replace(CFG, layout=CFG.layout.replace(subchunk_graph_m=m)))
    params = client.get_collection("c").config.params.vectors["subchunks"]
    assert (params.hnsw_config.m, collection_vectors(client, "c").subchunk_graph) == (m, graph)


def test_subchunk_graph_m_must_be_a_non_negative_integer(client, encoder):
    from dataclasses import replace

    with pytest.raises(ValueError, match="subchunk_graph_m must be an integer >= 0"):
        ingest_path(
            client, "c", DATA, {"vanilla": encoder}, replace(CFG, layout=CFG.layout.replace(subchunk_graph_m=-1))
        )
