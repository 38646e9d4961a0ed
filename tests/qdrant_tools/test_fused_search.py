"""The fused multivector: sub-chunks fused with the node vector at ingestion, scored in one arm at that weight."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from subchunk_layouts import BM25, DATA, FUSED, PLAIN, QUERY
from subchunk_layouts import nodes as _nodes

from qdrant_tools.encoding import fused_rows
from qdrant_tools.ingest import ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.search import SearchSettings, collection_vectors, search
from qdrant_tools.subchunks import FUSED_VECTOR, SubchunkConfig


def _unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _settled(hits):
    """RRF scores (the fusion values), and the nodes scored above the last one (RRF ties come in either order)."""
    scores = [round(h.fusion_score, 4) for h in hits]
    return scores, {n for n, x in zip(_nodes(hits), scores) if x > scores[-1]}


def _both(client, encoder):
    ingest_path(client, "plain", DATA, {"calibrated": encoder}, PLAIN)
    ingest_path(client, "fused", DATA, {"calibrated": encoder}, FUSED)


def test_the_plain_sub_chunks_are_memory_mapped_only_beside_the_fused_rows(client, encoder):
    _both(client, encoder)
    on_disk = {c: client.get_collection(c).config.params.vectors["subchunks"].on_disk for c in ("fused", "plain")}
    assert on_disk["fused"] is True and not on_disk["plain"]


def test_every_node_stores_its_sub_chunks_fused_with_its_node_vector(client, encoder):
    ingest_path(client, "fused", DATA, {"calibrated": encoder}, FUSED)
    vectors = collection_vectors(client, "fused")
    assert (vectors.fused, vectors.fused_weight) == (FUSED_VECTOR, 0.4)
    for p in client.scroll("fused", limit=1000, with_vectors=True)[0]:
        want = 0.6 * _unit(p.vector["subchunks"]) + 0.4 * _unit(p.vector["calibrated"])[None, :]
        np.testing.assert_allclose(p.vector[FUSED_VECTOR], want, atol=1e-5)


@pytest.mark.parametrize("exact_up_to", [10_000, 0])  # scored exactly; through candidates
def test_one_arm_at_the_written_weight_ranks_as_the_two_arm_formula(client, encoder, exact_up_to):
    _both(client, encoder)
    q = encoder.encode_queries([QUERY])[0]
    s = SearchSettings(limit=6, node_weight=0.4, sparse=False, exact_up_to=exact_up_to, prefetch_limit=12)
    one, two = (search(client, c, q, s) for c in ("fused", "plain"))
    assert _nodes(one) == _nodes(two)
    assert [h.score for h in one] == pytest.approx([h.score for h in two], abs=1e-5)


def test_a_hybrid_query_on_the_fused_layout_fuses_the_same_rankings(client, encoder):
    _both(client, encoder)
    q, sparse = encoder.encode_queries([QUERY])[0], BM25.embed_query(QUERY)
    s = SearchSettings(limit=6, node_weight=0.4, fusion_limit=10)
    one, two = (search(client, c, q, s, sparse_query=sparse) for c in ("fused", "plain"))
    assert _settled(one) == _settled(two)


def test_another_weight_takes_the_two_arm_formula(client, encoder):
    _both(client, encoder)
    q = encoder.encode_queries([QUERY])[0]
    s = SearchSettings(limit=6, node_weight=0.7, sparse=False)
    one, two = (search(client, c, q, s) for c in ("fused", "plain"))
    assert [h.score for h in one] == pytest.approx([h.score for h in two], abs=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fused_weight": 0.0}, "strictly between 0 and 1"),
        ({"fused_weight": 1.0}, "strictly between 0 and 1"),
        ({"fused_weight": 0.5, "subchunks": None}, "needs sub-chunks; pass subchunks="),
    ],
)
def test_a_bad_fused_weight_is_named(encoder, kwargs, message):
    with pytest.raises(ValueError, match=message):
        NodeLayout(**{"subchunks": SubchunkConfig(24, 0), **kwargs}).point_encoding({"calibrated": encoder})


@settings(max_examples=50, deadline=None)
@given(
    arrays(np.float32, (4, 6), elements=st.floats(-1, 1, width=32)),
    arrays(np.float32, 6, elements=st.floats(-1, 1, width=32)),
    arrays(np.float32, 6, elements=st.floats(-1, 1, width=32)),
    st.floats(0.05, 0.95),
)
def test_maxsim_over_fused_rows_is_the_weighted_score(subs, node, q, w):
    norms = [np.linalg.norm(subs, axis=1).min(), np.linalg.norm(node), np.linalg.norm(q)]
    if min(norms) < 1e-2:
        return  # no direction to score
    got = float((fused_rows(node, subs, w) @ _unit(q)).max())
    want = (1 - w) * float((_unit(subs) @ _unit(q)).max()) + w * float(_unit(node) @ _unit(q))
    assert got == pytest.approx(want, abs=1e-5)


@pytest.mark.usefixtures("fresh_advice")
def test_a_collection_without_the_fused_multivector_is_told_once_how_to_copy_it(client, encoder, caplog):
    _both(client, encoder)
    q = encoder.encode_queries([QUERY])[0]
    large = SearchSettings(limit=3, node_weight=0.4, sparse=False, exact_up_to=0)
    with caplog.at_level(logging.WARNING, logger="qdrant_tools.search"):
        for _ in range(2):
            search(client, "plain", q, large)
            search(client, "fused", q, large)
        search(client, "plain", q, SearchSettings(node_weight=0.4, sparse=False))  # scored exactly: nothing to say
    told = [r.getMessage() for r in caplog.records if "no fused multivector" in r.getMessage()]
    assert len(told) == 1 and "'plain'" in told[0] and "posfair storage migrate --collection plain --to NEW" in told[0]


@pytest.mark.parametrize("weight", [0.4, 0.7])  # one arm (the fused rows); the two-arm formula
def test_int8_node_vectors_leave_the_exact_scores_exact(client, encoder, weight):
    ingest_path(
        client,
        "q8",
        DATA,
        {"calibrated": encoder},
        replace(FUSED, layout=FUSED.layout.replace(node_quantization="int8")),
    )
    params = client.get_collection("q8").config.params.vectors["calibrated"]
    assert params.quantization_config is not None
    pts = client.scroll("q8", limit=1000, with_vectors=True)[0]
    q = encoder.encode_queries([QUERY])[0]
    want = sorted(
        (
            weight * float(_unit(p.vector["calibrated"]) @ _unit(q))
            + (1 - weight) * float((_unit(p.vector["subchunks"]) @ _unit(q)).max())
            for p in pts
        ),
        reverse=True,
    )[:5]
    hits = search(client, "q8", q, SearchSettings(limit=5, node_weight=weight, sparse=False))
    assert [h.rank_score for h in hits] == pytest.approx(want, abs=1e-5)


@pytest.mark.parametrize("copy", ["int8", "binary"])  # an exactly scored collection reads the float rows alone
def test_compact_storage_ranks_as_the_float_rows(client, encoder, copy):
    compact = FUSED.layout.replace(fused_quantization=copy, node_quantization="int8", node_on_disk=True)
    ingest_path(client, "fused", DATA, {"calibrated": encoder}, FUSED)
    ingest_path(client, "compact", DATA, {"calibrated": encoder}, replace(FUSED, layout=compact))
    fused = client.get_collection("compact").config.params.vectors[FUSED_VECTOR]
    assert fused.on_disk and fused.quantization_config is not None
    q = encoder.encode_queries([QUERY])[0]
    s = SearchSettings(limit=6, node_weight=0.4, sparse=False)
    want, got = (search(client, c, q, s) for c in ("fused", "compact"))
    assert _nodes(got) == _nodes(want)
    assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
