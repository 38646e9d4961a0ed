"""PosFairVectorStore honours every field of a LlamaIndex query (hybrid_top_k, sparse_top_k, alpha, MMR,
``qdrant_filters=``), returns node ids and node vectors, refuses an empty query clearly, works with only an
async client, and finds Chinese and Japanese words by BM25; on Qdrant Edge and on local mode."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from qdrant_client import AsyncQdrantClient, models

from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
from qdrant_tools.store import open_store
from qdrant_tools.store.async_store import AsyncStore

DIM = 64
TEXTS = {
    "bees": "Honeybees dance to share the direction of flowers. The waggle run points at the sun.",
    "tides": "The moon raises two tidal bulges in the ocean. Spring tides follow the new moon.",
    "bread": "A sourdough starter is flour, water, yeast and bacteria. It rises overnight.",
}


@pytest.fixture
def embed(make_fake):
    return PosFairEmbedding(encoder=make_fake(dimension=DIM, max_length=64, calibration=None))


def _nodes(embed):
    out = []
    for name, text in TEXTS.items():
        node = TextNode(
            text=text,
            id_=f"{name}-0",
            metadata={"topic": name},
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc-{name}")},
        )
        node.embedding = embed.get_text_embedding(text)
        out.append(node)
    return out


@pytest.fixture
def store(client, embed):
    s = PosFairVectorStore("docs", client=client, embed_model=embed)
    s.add(_nodes(embed))
    return s


def _query(embed, text, k=3, **kwargs):
    return VectorStoreQuery(
        query_embedding=embed.get_query_embedding(text), query_str=text, similarity_top_k=k, **kwargs
    )


@pytest.fixture
def requests(client, monkeypatch):
    """The keyword arguments of every ``query_points`` call the store sends, in order."""
    sent = []
    original = client.query_points

    def spy(*args, **kwargs):
        sent.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(client, "query_points", spy)
    return sent


# ---------------------------------------------------------------------- hybrid_top_k, sparse_top_k, alpha
def test_hybrid_top_k_sets_the_fused_hits_of_a_hybrid_query(store, embed):
    hybrid = _query(embed, "moon tides", k=1, hybrid_top_k=3, mode=VectorStoreQueryMode.HYBRID)
    assert len(store.query(hybrid).nodes) == 3
    hybrid.mode = VectorStoreQueryMode.DEFAULT
    assert len(store.query(hybrid).nodes) == 1


def test_sparse_top_k_sets_the_bm25_candidates_of_the_fusion(store, embed, requests):
    store.query(_query(embed, "moon flowers sourdough", k=2, sparse_top_k=1))
    dense, bm25 = requests[-1]["prefetch"]
    assert bm25.using == "bm25" and bm25.limit == 1
    assert dense.limit == store.layout.search.fusion_limit  # the dense ranking keeps the layout's depth


def test_sparse_top_k_sets_the_hits_of_a_sparse_query(store, embed):
    query = _query(embed, "moon flowers sourdough", k=1, sparse_top_k=2, mode=VectorStoreQueryMode.SPARSE)
    assert len(store.query(query).nodes) == 2


def test_alpha_one_ranks_by_the_dense_ranking_alone(store, embed):
    text = "why does the moon raise tidal bulges"
    dense_only = VectorStoreQuery(query_embedding=embed.get_query_embedding(text), similarity_top_k=3)
    got = store.query(_query(embed, text, alpha=1.0))
    want = store.query(dense_only)
    assert got.ids == want.ids and got.similarities == pytest.approx(want.similarities)


def test_alpha_zero_ranks_by_bm25_alone(store, embed):
    text = "sourdough moon"
    got = store.query(_query(embed, text, alpha=0.0))
    assert got.ids == store.query(_query(embed, text, mode=VectorStoreQueryMode.SPARSE)).ids


def test_alpha_weighs_dense_against_bm25_in_reciprocal_rank_fusion(store, client, embed, requests):
    rrf = PosFairVectorStore("docs", client=client, embed_model=embed, search_overrides={"fusion": "rrf"})
    rrf.query(_query(embed, "moon tides", alpha=0.25))
    assert requests[-1]["query"].rrf.weights == pytest.approx([1.0, 3.0])  # dense 0.25 : BM25 0.75


@pytest.mark.parametrize("alpha", [-0.1, 1.5])
def test_alpha_outside_zero_one_is_refused(store, embed, alpha):
    with pytest.raises(ValueError, match=r"alpha must lie in \[0, 1\]"):
        store.query(_query(embed, "moon", alpha=alpha))


def test_alpha_is_refused_where_the_search_fuses_by_dbsf(client, embed, store):
    dbsf = PosFairVectorStore("docs", client=client, embed_model=embed, search_overrides={"fusion": "dbsf"})
    with pytest.raises(ValueError, match="DBSF, which takes no weights"):
        dbsf.query(_query(embed, "moon", alpha=0.3))
    assert len(dbsf.query(_query(embed, "moon", alpha=0.5)).nodes) == 3  # equal weights: plain DBSF


def test_bm25_fields_on_a_collection_without_bm25_are_refused(client, embed):
    from llamaindex_posfair.integrations.recipe import Recipe

    layout = Recipe.for_encoder(embed.spec).model_copy(update={"bm25": None})
    plain = PosFairVectorStore("plain", client=client, embed_model=embed, layout=layout)
    plain.add(_nodes(embed))
    with pytest.raises(ValueError, match="stores no BM25 vectors.*sparse_top_k=2"):
        plain.query(_query(embed, "moon", sparse_top_k=2))
    with pytest.raises(ValueError, match="stores no BM25 vectors.*mode='sparse'"):
        plain.query(_query(embed, "moon", mode=VectorStoreQueryMode.SPARSE))
    assert len(plain.query(_query(embed, "moon")).nodes) == 3


# ---------------------------------------------------------------------- MMR
E0, E1, E2 = np.eye(DIM, dtype=np.float32)[:3]


@pytest.fixture
def mmr_store(client, embed):
    """A, a near-copy of A, and B: less relevant to ``E0`` than the copy, but unlike A."""
    vectors = {"a": E0, "a-copy": 0.995 * E0 + 0.0999 * E1, "b": 0.8 * E0 + 0.6 * E2}
    texts = {"a": "alpha one", "a-copy": "alpha two", "b": "beta three"}
    s = PosFairVectorStore("mmr", client=client, embed_model=embed)
    s.add([TextNode(text=texts[k], id_=k, embedding=v.tolist()) for k, v in vectors.items()])
    return s


def _mmr(threshold=None, k=2):
    return VectorStoreQuery(
        query_embedding=E0.tolist(), similarity_top_k=k, mode=VectorStoreQueryMode.MMR, mmr_threshold=threshold
    )


def test_mmr_at_threshold_one_ranks_by_relevance(mmr_store):
    assert mmr_store.query(_mmr(1.0)).ids == ["a", "a-copy"]


def test_mmr_at_a_low_threshold_prefers_a_node_unlike_the_first(mmr_store):
    assert mmr_store.query(_mmr(0.3)).ids == ["a", "b"]
    assert mmr_store.query(_mmr(), mmr_threshold=0.3).ids == ["a", "b"]  # as vector_store_kwargs pass it


async def test_mmr_through_the_async_client_chooses_the_same(mmr_store):
    assert (await mmr_store.aquery(_mmr(0.3))).ids == ["a", "b"]


def test_mmr_prefetch_settings_and_alpha_are_checked(mmr_store):
    with pytest.raises(ValueError, match="mmr_prefetch_k must be a positive integer, got 0"):
        mmr_store.query(_mmr(0.3), mmr_prefetch_k=0)
    query = _mmr(0.3)
    query.alpha = 0.0
    with pytest.raises(ValueError, match="alpha=0 ranks by BM25 alone, but MMR re-ranks"):
        mmr_store.query(query)


# ---------------------------------------------------------------------- filters, ids, embeddings, empty queries
OCEAN = models.Filter(must=[models.FieldCondition(key="topic", match=models.MatchValue(value="tides"))])


def test_qdrant_filters_pass_a_native_filter_through(store, embed):
    got = store.query(_query(embed, "flour moon flowers"), qdrant_filters=OCEAN)
    assert got.ids == ["tides-0"]
    assert [n.node_id for n in store.get_nodes(qdrant_filters=OCEAN)] == ["tides-0"]


def test_qdrant_filters_are_required_beside_metadata_filters(store, embed):
    bees = MetadataFilters(filters=[MetadataFilter(key="topic", value="bees")])
    assert store.query(_query(embed, "moon", filters=bees), qdrant_filters=OCEAN).ids == []


def test_qdrant_filters_of_another_type_are_refused(store, embed):
    with pytest.raises(TypeError, match="qdrant_filters must be a qdrant_client.models.Filter, got dict"):
        store.query(_query(embed, "moon"), qdrant_filters={"must": []})


def test_result_ids_are_node_ids(store, embed):
    got = store.query(_query(embed, "moon"))
    assert got.ids == [n.node_id for n in got.nodes] and sorted(got.ids) == ["bees-0", "bread-0", "tides-0"]


def test_get_nodes_returns_each_node_vector_as_its_embedding(store, embed):
    got = {n.node_id: n for n in store.get_nodes()}
    for name, text in TEXTS.items():
        stored, given = np.asarray(got[f"{name}-0"].embedding), np.asarray(embed.get_text_embedding(text))
        assert stored @ given / (np.linalg.norm(stored) * np.linalg.norm(given)) == pytest.approx(1.0, abs=1e-5)


def test_get_nodes_limit_bounds_the_nodes(store):
    assert len(store.get_nodes(limit=2)) == 2


def test_an_empty_query_gets_a_clear_error(store, embed):
    with pytest.raises(ValueError, match="the query is empty"):
        store.query(VectorStoreQuery(query_str="", similarity_top_k=2))
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed)
    with pytest.raises(ValueError, match="the query is empty"):
        index.as_retriever().retrieve("")


def test_get_nodes_of_a_missing_collection_raises_as_qdrant_vector_store_does(client, embed):
    fresh = PosFairVectorStore("never-written", client=client, embed_model=embed)
    with pytest.raises(ValueError, match="Collection never-written not found"):
        fresh.get_nodes()


# ---------------------------------------------------------------------- an async-only store
async def test_a_store_with_only_an_async_client_reads_the_layout_on_its_first_async_call(store, client, embed):
    async_only = PosFairVectorStore("docs", aclient=AsyncStore(client))
    with pytest.raises(ValueError, match="has only an async client"):
        _ = async_only.layout
    assert sorted(n.node_id for n in await async_only.aget_nodes()) == ["bees-0", "bread-0", "tides-0"]
    assert async_only.layout == store.layout
    with pytest.raises(ValueError, match="query needs a synchronous client.*given only aclient="):
        async_only.query(_query(embed, "moon"))


@pytest.mark.parametrize("engine", ["edge", "local"])
async def test_a_store_with_only_an_async_client_writes_and_queries(engine, embed):
    store_ = open_store(":memory:")
    aclient = AsyncStore(store_) if engine == "edge" else AsyncQdrantClient(":memory:")
    try:
        async_only = PosFairVectorStore("docs", aclient=aclient, embed_model=embed)
        await async_only.async_add(_nodes(embed))
        got = await async_only.aquery(_query(embed, "why does the moon raise tidal bulges"))
        assert got.ids[0] == "tides-0" and len(got.ids) == 3
    finally:
        store_.close()
        if engine == "local":
            await aclient.close()


# ---------------------------------------------------------------------- BM25 over text without spaces
CJK = {
    "beijing": "北京是中国的首都，也是一座历史悠久的城市。",
    "shanghai": "上海是中国最大的经济中心和港口城市。",
    "tokyo": "東京の天気は晴れです。明日は雨が降るでしょう。",
}


@pytest.mark.parametrize(("question", "first"), [("首都", "beijing"), ("港口", "shanghai"), ("天気", "tokyo")])
def test_bm25_finds_a_chinese_or_japanese_word_inside_a_sentence(client, embed, question, first):
    cjk = PosFairVectorStore("cjk", client=client, embed_model=embed)
    cjk.add([TextNode(text=t, id_=k, embedding=embed.get_text_embedding(t)) for k, t in CJK.items()])
    got = cjk.query(_query(embed, question, mode=VectorStoreQueryMode.SPARSE))
    assert got.ids == [first]
