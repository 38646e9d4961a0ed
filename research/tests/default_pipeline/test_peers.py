"""LlamaIndex peers (``research/default_pipeline/peers.py``): passage-level aggregation, every peer through the harness, BM25 fusion."""

from __future__ import annotations

import math

import pytest
from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

from research.default_pipeline.peers import (
    LlamaIndexPeer,
    hybrid_recipe,
    llamaindex_peers,
    passage_scores,
    splitter_recipe,
)
from research.eval.benchmarks.data import PositionBenchmark
from research.eval.harness.runner import run_eval

FILLER = "Apples grow on trees in the orchard. The weather turned cold in winter. Trains leave the station at noon."


@pytest.fixture(scope="module")
def embed(fake_encoder_factory):
    """The shared fake encoder (a hashed bag of words) as a LlamaIndex embedding model."""
    from llamaindex_posfair import PosFairEmbedding

    return PosFairEmbedding(encoder=fake_encoder_factory(dimension=256, calibration=None))


def _hit(node_id: str, doc_id: str, score: float = 1.0) -> NodeWithScore:
    source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc_id)}
    return NodeWithScore(node=TextNode(id_=node_id, text=node_id, relationships=source), score=score)


def test_passage_scores_take_each_passage_best_node_and_rank_unseen_last():
    hits = [
        [_hit("n1", "b"), _hit("n2", "a"), _hit("n3", "b"), _hit("n2", "a")],  # n2 twice: its first place counts
        [_hit("n4", "c"), _hit("n3", "b")],
    ]
    scores = passage_scores(hits, ["a", "b", "c"])
    assert scores.tolist() == [[-1.0, 0.0, -math.inf], [-math.inf, -1.0, 0.0]]


def test_passage_scores_follow_llamaindex_order_not_tied_scores():
    hits = [[_hit("n1", "b", 0.5), _hit("n2", "a", 0.5)]]  # equal node-weighted scores: the returned order decides
    assert passage_scores(hits, ["a", "b"]).tolist() == [[-1.0, 0.0]]


def test_passage_scores_reject_a_node_of_an_unknown_document():
    with pytest.raises(ValueError, match="'zz', which is not a passage"):
        passage_scores([[_hit("n1", "zz")]], ["a", "b"])


def test_top_k_must_be_positive(embed):
    with pytest.raises(ValueError, match="top_k must be a positive integer, got 0"):
        LlamaIndexPeer("p", embed, splitter_recipe(), top_k=0)


def _toy_bench() -> PositionBenchmark:
    """Five passages of exactly four sentences; each query names one passage's own sentence."""
    topics = ["otters", "glaciers", "violins", "comets", "saffron"]
    corpus = {f"d{i}": f"This passage is about {t} number {i}. {FILLER}" for i, t in enumerate(topics)}
    queries = {f"q{i}": f"tell me about {t}" for i, t in enumerate(topics)}
    qrels = {f"q{i}": {f"d{i}": 1.0} for i in range(len(topics))}
    groups = {f"q{i}": ("begin", "end")[i % 2] for i in range(len(topics))}
    return PositionBenchmark("toy", corpus, queries, qrels, groups, ("begin", "end"))


def test_every_peer_scores_every_query_and_counts_its_vectors(embed):
    bench = _toy_bench()
    peers = llamaindex_peers(embed)
    results = run_eval(bench, peers, show_progress_bar=False)
    assert [r.name for r in results] == [p.name for p in peers]
    for result, peer in zip(results, peers):
        assert result.per_query == {q: 1.0 for q in bench.query_ids}, peer.name  # each finds its passage first
        assert peer.stats.passages == 5 and peer.stats.bytes_per_vector == 4 * 256
        assert peer.stats.min_passages_hit == 5 and peer.stats.query_p50_ms > 0
    vectors = {p.name: p.vectors_per_passage for p in peers}
    assert vectors == {
        "llamaindex-default (SentenceSplitter 1024/200)": 1.0,
        "SentenceSplitter 256/20": 1.0,
        "SentenceSplitter 128/20": 1.0,
        "SentenceWindow (window 3)": 4.0,  # one node per sentence
        "LlamaIndex hybrid (dense + BM25, RRF) 128/20": 1.0,
    }


def test_hybrid_finds_a_rare_keyword_that_the_dense_fake_misses(embed):
    """Twelve passages share the query's common words; only the target has its rare word."""
    corpus = {f"d{i}": f"The river boats carry grain past the old mills, trip {i}. {FILLER}" for i in range(12)}
    corpus["target"] = f"Zyxorbium is mined in the northern hills. {FILLER}"
    query = {"q": "which river boats carry zyxorbium grain past the old mills"}
    bench = PositionBenchmark("keyword", corpus, query, {"q": {"target": 1.0}}, {"q": "begin"})
    dense = LlamaIndexPeer("dense 128/20", embed, splitter_recipe(128, 20))
    hybrid = LlamaIndexPeer("hybrid 128/20", embed, hybrid_recipe(128, 20))
    dense_result, hybrid_result = run_eval(bench, [dense, hybrid], show_progress_bar=False)
    assert dense_result.per_query["q"] == 0.0  # below the ten passages that share its common words
    assert hybrid_result.per_query["q"] > 0.0  # BM25 finds it, the fusion keeps it in the top 10


@pytest.mark.slow
def test_real_minilm_default_peer_truncates_where_small_chunks_do_not():
    """The defaults embed a passage's first 256 tokens only: a fact at the end of a long passage is lost."""
    from research.default_pipeline.peers import bundled_minilm_embedding

    embed = bundled_minilm_embedding(device="cpu")
    garden = (
        "Tomatoes need full sun and steady watering through the summer months. Mulch keeps the soil moist and "
        "stops weeds from taking over the beds. Prune the lower leaves so that air moves between the stems. "
    )
    fact = (
        "Marguerite, the lighthouse keeper, paints her rowing boat bright orange every April. She says the colour "
        "keeps the fishing fleet from running into it in the fog."
    )
    corpus = {
        "long": garden * 8 + fact,  # ~310 MiniLM tokens of gardening, then the fact (353 in all)
        "keeper": "The lighthouse keeper climbs the tower each evening to light the lamp and wind the clock.",
        "boats": "Fishing boats return to the harbour at dusk, and their crews mend the nets on the quay.",
    }
    assert embed.max_length == 256
    query = {"q": "What colour does Marguerite the lighthouse keeper paint her boat?"}
    bench = PositionBenchmark("truncation", corpus, query, {"q": {"long": 1.0}}, {"q": "end"})
    default, small = (
        LlamaIndexPeer("default", embed, splitter_recipe()),
        LlamaIndexPeer("128", embed, splitter_recipe(128, 20)),
    )
    default_result, small_result = run_eval(bench, [default, small], show_progress_bar=False)
    assert default.stats.nodes == 3 and small.stats.nodes > 3
    assert small_result.per_query["q"] == 1.0
    assert default_result.per_query["q"] < 1.0
