"""NodeScorer and the reranker's scoring choices: node, best sub-chunk, node-weighted; duplicate candidates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from llama_index.core.schema import NodeWithScore, TextNode

from llamaindex_posfair import PosFairRerank
from llamaindex_posfair.integrations.node_scoring import NodeScorer
from llamaindex_posfair.scoring import cosine_matrix
from qdrant_tools.chunking import whitespace_spans
from qdrant_tools.subchunks import SubchunkConfig, subchunk_text

FILLER = " ".join(f"Sentence {i} talks about weather and roads and nothing else." for i in range(12))
LATE = FILLER + " The lighthouse keeper lit the lamp at dusk."
EARLY = "The lighthouse keeper lit the lamp at dusk. " + FILLER


def _unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_subchunk_score_is_the_best_sub_chunk_cosine(fake_encoder):
    cfg = SubchunkConfig(max_tokens=16, overlap_sentences=1)
    got = NodeScorer(fake_encoder, scoring="subchunks", subchunks=cfg).scores("lighthouse lamp", [LATE, FILLER])
    q = _unit(fake_encoder.encode_queries(["lighthouse lamp"])[0])
    for text, score in zip([LATE, FILLER], got):
        pieces = [s.text for s in subchunk_text(text, cfg, whitespace_spans)]
        assert score == pytest.approx(float((_unit(fake_encoder.encode_documents(pieces)) @ q).max()), abs=1e-5)


def test_a_late_fact_scores_like_an_early_one_by_best_sub_chunk(make_fake):
    enc = make_fake(position_decay=0.5, calibration=None, max_length=512)  # a planted primacy bias
    node = NodeScorer(enc, scoring="node").scores("lighthouse keeper lamp", [EARLY, LATE])
    sub = NodeScorer(enc, scoring="subchunks", subchunks=SubchunkConfig(16, 1)).scores(
        "lighthouse keeper lamp", [EARLY, LATE]
    )
    assert node[0] - node[1] > 0.1  # the whole-node vector favours the early fact
    assert sub[0] == pytest.approx(sub[1], abs=1e-5)  # the best sub-chunk does not care where it sits


def test_weighted_scoring_weighs_node_and_best_sub_chunk(make_fake):
    enc = make_fake(max_length=512)  # every text within the window: its node vector is encoded
    texts = [LATE, FILLER, EARLY]
    node = NodeScorer(enc, scoring="node").scores("lamp", texts)
    sub = NodeScorer(enc, scoring="subchunks").scores("lamp", texts)
    fused = NodeScorer(enc, scoring="weighted", node_weight=0.25).scores("lamp", texts)
    np.testing.assert_allclose(fused, 0.25 * node + 0.75 * sub, atol=1e-6)


def test_a_derived_node_vector_is_the_mean_of_the_sub_chunk_vectors(fake_encoder):
    cfg = SubchunkConfig(max_tokens=16, overlap_sentences=0)
    got = NodeScorer(fake_encoder, scoring="node", subchunks=cfg, node_source="subchunk-mean").scores("lamp", [LATE])
    pieces = [s.text for s in subchunk_text(LATE, cfg, whitespace_spans)]
    mean = _unit(fake_encoder.encode_documents(pieces)).mean(axis=0)
    want = _unit(mean) @ _unit(fake_encoder.encode_queries(["lamp"])[0])
    assert got[0] == pytest.approx(float(want), abs=1e-5)


def test_derived_weighted_scoring_encodes_no_node_text(make_fake):
    enc = make_fake()
    scorer = NodeScorer(enc, scoring="weighted", node_source="subchunk-mean", node_weight=0.5)
    scorer.scores("lamp", [LATE, FILLER])
    sub_chunks = sum(len(subchunk_text(t, scorer.subchunks, whitespace_spans)) for t in (LATE, FILLER))
    assert [c.count for c in enc.calls if c.role == "document"] == [sub_chunks]


def test_unknown_node_source_is_named(fake_encoder):
    with pytest.raises(ValueError, match='node_source must be "encoded" or "subchunk-mean"'):
        NodeScorer(fake_encoder, node_source="mean")


def test_unknown_scoring_is_named(fake_encoder):
    with pytest.raises(ValueError, match='scoring must be "node", "subchunks" or "weighted"'):
        NodeScorer(fake_encoder, scoring="max")


def _nodes(*items):
    return [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=t, metadata={"source": s}), score=sc)
        for i, (t, s, sc) in enumerate(items)
    ]


def test_rerank_in_subchunk_mode_ranks_the_late_fact_first(make_fake):
    enc = make_fake(position_decay=0.5, calibration=None, max_length=512)
    cands = _nodes((FILLER, "a.txt", 0.9), (LATE, "b.txt", 0.2))
    node_mode = PosFairRerank(top_n=2, encoder=enc, scoring="node")
    sub_mode = PosFairRerank(top_n=2, encoder=enc, scoring="subchunks", subchunk_tokens=16)
    assert sub_mode.postprocess_nodes(cands, query_str="lighthouse keeper lamp")[0].node.node_id == "n1"
    assert node_mode.scoring == "node" and sub_mode.to_dict()["scoring"] == "subchunks"


def test_exact_duplicate_candidates_are_scored_once(fake_encoder):
    cands = _nodes(("apples are red", "a.txt", 0.5), ("apples are red", "a.txt", 0.7), ("pears", "b.txt", 0.1))
    out = PosFairRerank(top_n=5, encoder=fake_encoder).postprocess_nodes(cands, query_str="red apples")
    assert [n.node.node_id for n in out] == ["n1", "n2"]  # the better-scored copy is kept
    assert [c.count for c in fake_encoder.calls if c.role == "document"] == [2]


def test_same_text_from_two_sources_is_kept(fake_encoder):
    cands = _nodes(("apples are red", "a.txt", 0.5), ("apples are red", "b.txt", 0.4))
    out = PosFairRerank(top_n=5, encoder=fake_encoder).postprocess_nodes(cands, query_str="red apples")
    assert sorted(n.node.node_id for n in out) == ["n0", "n1"]


finite = st.integers(-5, 5).map(float)  # away from the norm floor (1e-12) that guards zero vectors


@settings(max_examples=60, deadline=None)
@given(q=arrays(np.float32, 8, elements=finite), d=arrays(np.float32, (5, 8), elements=finite))
def test_cosine_scores_are_bounded_and_scale_free(q, d):
    s = cosine_matrix(q, d)
    assert s.shape == (5,) and np.all(np.abs(s) <= 1 + 1e-9)
    np.testing.assert_allclose(cosine_matrix(3 * q, d * 0.5), s, atol=1e-6)


def test_weighted_scoring_scores_a_text_longer_than_the_window_by_the_mean_of_its_sub_chunks(make_fake):
    enc = make_fake(max_length=32)
    cfg = SubchunkConfig(max_tokens=16, overlap_sentences=0)
    got = NodeScorer(enc, scoring="weighted", subchunks=cfg, node_weight=0.25).scores("lamp", [LATE])
    derived = NodeScorer(enc, scoring="weighted", subchunks=cfg, node_weight=0.25, node_source="subchunk-mean")
    assert got[0] == pytest.approx(float(derived.scores("lamp", [LATE])[0]), abs=1e-5)
