"""The default pipeline as a harness system: file-level aggregation, storage accounting, numpy/store congruence."""

from __future__ import annotations

import numpy as np
import pytest
from qdrant_client import QdrantClient

from llamaindex_posfair.eval.metrics import rank_scores
from qdrant_tools.layout import NodeLayout
from qdrant_tools.subchunks import SubchunkConfig
from research.default_pipeline.system import (
    DefaultPipelineSystem,
    IndexPool,
    StorageStats,
    StoreIndex,
    eval_search,
    int8_roundtrip,
    node_scores,
    prefetch_recall,
)
from research.eval.benchmarks.data import PositionBenchmark
from research.eval.harness.runner import evaluate_scores
from research.eval.harness.systems import EncodeCache


def memory_store(folder: str) -> QdrantClient:
    """An in-memory store (the folder is ignored): fast, nothing on disk."""
    return QdrantClient(":memory:")


@pytest.fixture
def plain(fake_encoder_factory):
    """A plain bag-of-words fake: a word's position does not matter, so scores are easy to compute by hand."""
    return fake_encoder_factory(dimension=64, max_length=64, calibration=None)


def _score(system: DefaultPipelineSystem, docs: dict[str, str], queries: list[str]) -> np.ndarray:
    cache = EncodeCache(list(docs.values()), queries, doc_ids=list(docs))
    return system.score(cache)


def _pool() -> IndexPool:
    return IndexPool(client_factory=memory_store)


def test_file_score_is_the_best_node_of_the_passage(plain):
    # 4-token nodes without overlap: "a" -> nodes "alpha beta gamma delta" | "zebra zebra zebra zebra"
    docs = {"a": "alpha beta gamma delta zebra zebra zebra zebra", "b": "zebra alpha beta gamma"}
    layout = NodeLayout(chunk_tokens=4, overlap_tokens=0, subchunks=None)
    with _pool() as pool:
        scores = _score(DefaultPipelineSystem("mj", plain, layout, eval_search(layout), pool=pool), docs, ["zebra"])
    q = plain.encode_queries(["zebra"])[0]
    nodes = plain.encode_documents(["alpha beta gamma delta", "zebra zebra zebra zebra", "zebra alpha beta gamma"])
    assert scores[0, 0] == pytest.approx(max(q @ nodes[0], q @ nodes[1]), abs=1e-5)
    assert scores[0, 1] == pytest.approx(q @ nodes[2], abs=1e-5)
    assert scores[0, 0] > scores[0, 1]


def test_file_score_of_a_sub_chunk_layout_is_its_best_sub_chunk(plain):
    docs = {"a": "Alpha beta gamma. Zebra zebra zebra. Delta delta delta.", "b": "Zebra alpha beta. Gamma gamma."}
    layout = NodeLayout(
        chunk_tokens=64,
        subchunks=SubchunkConfig(max_tokens=4, overlap_sentences=0),
        fused_weight=None,
        node_quantization=None,
    )
    with _pool() as pool:
        scores = _score(DefaultPipelineSystem("mj", plain, layout, eval_search(layout), pool=pool), docs, ["zebra"])
    q = plain.encode_queries(["zebra"])[0]
    subs = plain.encode_documents(["Zebra zebra zebra.", "Zebra alpha beta."])
    np.testing.assert_allclose(scores[0], [q @ subs[0], q @ subs[1]], atol=1e-5)


def test_passages_without_a_returned_node_score_minus_inf_and_rank_last(plain):
    docs = {"a": "zebra zebra", "b": "alpha beta", "c": "gamma zebra"}
    layout = NodeLayout(chunk_tokens=8, subchunks=None)
    with _pool() as pool:
        system = DefaultPipelineSystem("mj", plain, layout, eval_search(layout, depth=1), pool=pool)
        scores = _score(system, docs, ["zebra"])
    assert np.isfinite(scores[0]).tolist() == [True, False, False]
    # "c" is relevant but was not returned: tied at -inf with "b", it ranks after it (pessimistic tie rule)
    assert rank_scores(scores, list(docs), 3, [{"c": 1}]) == [["a", "b", "c"]]
    bench = PositionBenchmark("t", docs, {"q": "zebra"}, {"q": {"c": 1}}, {"q": "end"})
    summary, _, _ = evaluate_scores(scores, bench)
    assert summary.harmonic == pytest.approx(1 / np.log2(4))


def test_storage_accounting_of_a_known_corpus(plain):
    # one 8-word node of four 2-word sentences; budget 4 without overlap -> 2 sub-chunks
    docs = {"a": "One fish. Two fish. Red fish. Blue fish."}
    layout = NodeLayout(
        chunk_tokens=8,
        subchunks=SubchunkConfig(max_tokens=4, overlap_sentences=0),
        fused_weight=None,
        node_quantization=None,
    )
    with _pool() as pool:
        system = DefaultPipelineSystem("mj", plain, layout, eval_search(layout), pool=pool)
        _score(system, docs, ["fish"])
    s = system.stats.storage
    assert (s.nodes, s.subchunk_vectors, s.dim) == (1, 2, 64)
    assert s.vectors_per_node == 3.0 and system.vectors_per_passage == 3.0
    assert s.bytes_per_node == 4 * 64 * 3  # three float32 vectors
    assert s.bytes_per_node_int8 == 4 * 64 + 2 * 64  # float32 node vector + two int8 sub-chunk vectors


def test_storage_stats_per_passage_counts_every_node():
    s = StorageStats(nodes=6, passages=2, dim=10, dense_per_node=1, subchunk_vectors=12)
    assert (s.vectors_per_node, s.vectors_per_passage, s.bytes_per_node) == (3.0, 9.0, 120.0)
    assert s.bytes_per_passage == 360.0  # three nodes of 120 bytes per passage


def test_storage_stats_count_the_fused_rows_as_float32_vectors():
    s = StorageStats(nodes=6, passages=2, dim=10, dense_per_node=1, subchunk_vectors=12, fused_vectors=12)
    assert (s.vectors_per_node, s.bytes_per_node) == (5.0, 200.0)
    assert s.bytes_per_node_int8 == 4 * 10 * (1 + 2) + 2 * 10  # float32 node and fused rows, int8 sub-chunks


@pytest.mark.parametrize("weight", [0.0, 0.4])
def test_the_store_answers_what_numpy_computes_for_the_two_stage_query(plain, weight):
    words = ["alpha", "beta", "gamma", "delta", "zebra", "quail", "heron", "otter"]
    rng = np.random.default_rng(3)
    docs = {f"d{i}": ". ".join(" ".join(rng.choice(words, 3)) for _ in range(6)) + "." for i in range(12)}
    queries = ["zebra quail", "heron", "alpha otter"]
    layout = NodeLayout(chunk_tokens=12, overlap_tokens=0, subchunks=SubchunkConfig(max_tokens=6, overlap_sentences=1))
    index = StoreIndex.build(plain, list(docs.values()), list(docs), layout, memory_store)
    try:
        q = plain.encode_queries(queries)
        store, _ = index.answer(q, eval_search(layout, prefetch_limit=5, node_weight=weight, exact_up_to=0))
    finally:
        index.close()
    simulated = node_scores(index.vectors, q, weight, prefetch_limit=5)
    np.testing.assert_array_equal(np.isfinite(store), np.isfinite(simulated))
    np.testing.assert_allclose(store[np.isfinite(store)], simulated[np.isfinite(simulated)], atol=1e-5)


def test_prefetch_recall_counts_the_exact_top_nodes_the_store_kept():
    exact = np.array([[0.9, 0.8, 0.7, 0.1], [0.1, 0.2, 0.3, 0.4]])
    store = np.array([[0.9, -np.inf, 0.7, 0.1], [0.1, 0.2, 0.3, 0.4]])
    assert prefetch_recall(store, exact, k=2) == pytest.approx((0.5 + 1.0) / 2)


def test_int8_roundtrip_keeps_256_levels_and_clips_outliers():
    x = np.concatenate([np.linspace(-0.5, 0.5, 10_000), [40.0]]).astype(np.float32)
    y = int8_roundtrip(x)
    assert len(np.unique(y)) <= 256
    assert y.max() < 0.5  # the outlier is clipped to the central 99% of the values
    inside = np.abs(x) < 0.49
    assert np.abs(y[inside] - x[inside]).max() <= 0.99 / 255 / 2 + 1e-6  # half a step


def test_int8_needs_sub_chunks():
    with pytest.raises(ValueError, match="sub-chunk"):
        NodeLayout(chunk_tokens=254, subchunks=None, subchunk_quantization="int8")
