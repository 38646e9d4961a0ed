"""PosFairVectorStore: the LlamaIndex vector-store contract on Qdrant Edge and on qdrant-client's local mode."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
from llamaindex_posfair.integrations.filters import UnsupportedFilterError
from qdrant_tools.payload import posfair_fields
from qdrant_tools.spec import CollectionMismatchError
from qdrant_tools.store import open_store

TEXTS = {
    "bees": "Honeybees dance to share the direction of flowers. The waggle run points at the sun.",
    "tides": "The moon raises two tidal bulges in the ocean. Spring tides follow the new moon.",
    "bread": "A sourdough starter is flour, water, yeast and bacteria. It rises overnight.",
}
META = {
    "bees": {"topic": "insects", "year": 2019, "score": 0.5, "tags": ["nature", "insects"]},
    "tides": {"topic": "ocean", "year": 2021, "score": 1.5, "tags": ["nature", "sea"]},
    "bread": {"topic": "baking", "year": 2023, "score": 2.5, "tags": ["food"]},
}


@pytest.fixture
def embed(make_fake):
    return PosFairEmbedding(encoder=make_fake(dimension=64, max_length=64, calibration=None))


def _nodes(embed, names=tuple(TEXTS), text=None):
    out = []
    for name in names:
        node = TextNode(
            text=text or TEXTS[name],
            id_=f"{name}-0",
            metadata=dict(META[name]),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc-{name}")},
        )
        node.embedding = embed.get_text_embedding(node.text)
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


def _names(result):
    return [n.metadata["topic"] for n in result.nodes]


def test_add_returns_the_node_ids_and_get_nodes_round_trips_them(store, embed):
    got = {n.node_id: n for n in store.get_nodes()}
    assert sorted(got) == ["bees-0", "bread-0", "tides-0"]
    node = got["tides-0"]
    assert node.text == TEXTS["tides"]
    assert node.ref_doc_id == "doc-tides"
    assert node.metadata["tags"] == ["nature", "sea"]


def test_adding_the_same_nodes_again_stores_each_once(store, embed, client):
    store.add(_nodes(embed))
    assert client.count("docs", exact=True).count == 3


def test_query_ranks_the_matching_node_first_with_its_evidence(store, embed):
    result = store.query(_query(embed, "why does the moon raise tidal bulges"))
    assert _names(result)[0] == "ocean"
    assert result.similarities == sorted(result.similarities, reverse=True)
    start, end = result.nodes[0].metadata["evidence_start_char"], result.nodes[0].metadata["evidence_end_char"]
    assert "moon" in TEXTS["tides"][start:end]
    assert "evidence_start_char" in result.nodes[0].excluded_llm_metadata_keys


def test_similarity_top_k_bounds_the_hits(store, embed):
    assert len(store.query(_query(embed, "flour water yeast", k=2)).nodes) == 2


def test_sparse_mode_ranks_by_bm25_alone(store, embed):
    result = store.query(_query(embed, "sourdough", mode=VectorStoreQueryMode.SPARSE))
    assert _names(result) == ["baking"]  # only one node holds the word


def test_an_unsupported_query_mode_is_refused(store, embed):
    with pytest.raises(ValueError, match="not supported by PosFairVectorStore"):
        store.query(_query(embed, "moon", mode=VectorStoreQueryMode.SVM))


def _f(key, value, op=FilterOperator.EQ):
    return MetadataFilter(key=key, value=value, operator=op)


FILTERS = [
    ("eq str", MetadataFilters(filters=[_f("topic", "ocean")]), {"ocean"}),
    ("eq int", MetadataFilters(filters=[_f("year", 2023)]), {"baking"}),
    ("eq float", MetadataFilters(filters=[_f("score", 1.5)]), {"ocean"}),
    ("ne str", MetadataFilters(filters=[_f("topic", "ocean", FilterOperator.NE)]), {"insects", "baking"}),
    ("ne float", MetadataFilters(filters=[_f("score", 1.5, FilterOperator.NE)]), {"insects", "baking"}),
    ("gt", MetadataFilters(filters=[_f("year", 2019, FilterOperator.GT)]), {"ocean", "baking"}),
    ("gte", MetadataFilters(filters=[_f("year", 2021, FilterOperator.GTE)]), {"ocean", "baking"}),
    ("lt", MetadataFilters(filters=[_f("score", 1.5, FilterOperator.LT)]), {"insects"}),
    ("lte", MetadataFilters(filters=[_f("score", 1.5, FilterOperator.LTE)]), {"insects", "ocean"}),
    ("in", MetadataFilters(filters=[_f("topic", ["ocean", "baking"], FilterOperator.IN)]), {"ocean", "baking"}),
    ("in csv", MetadataFilters(filters=[_f("topic", "ocean,baking", FilterOperator.IN)]), {"ocean", "baking"}),
    ("nin", MetadataFilters(filters=[_f("topic", ["ocean"], FilterOperator.NIN)]), {"insects", "baking"}),
    ("any", MetadataFilters(filters=[_f("tags", ["sea", "food"], FilterOperator.ANY)]), {"ocean", "baking"}),
    ("all", MetadataFilters(filters=[_f("tags", ["nature", "sea"], FilterOperator.ALL)]), {"ocean"}),
    ("contains", MetadataFilters(filters=[_f("tags", "nature", FilterOperator.CONTAINS)]), {"insects", "ocean"}),
    ("text_match", MetadataFilters(filters=[_f("topic", "ocean", FilterOperator.TEXT_MATCH)]), {"ocean"}),
    (
        "is_empty",
        MetadataFilters(filters=[_f("missing", None, FilterOperator.IS_EMPTY)]),
        {"insects", "ocean", "baking"},
    ),
    (
        "or",
        MetadataFilters(filters=[_f("year", 2019), _f("year", 2023)], condition=FilterCondition.OR),
        {"insects", "baking"},
    ),
    ("not", MetadataFilters(filters=[_f("topic", "ocean")], condition=FilterCondition.NOT), {"insects", "baking"}),
    (
        "nested",
        MetadataFilters(
            filters=[
                _f("tags", "nature", FilterOperator.CONTAINS),
                MetadataFilters(
                    filters=[_f("year", 2019), _f("score", 2.0, FilterOperator.GT)], condition=FilterCondition.OR
                ),
            ]
        ),
        {"insects"},
    ),
]


@pytest.mark.parametrize(("name", "filters", "expected"), FILTERS, ids=[f[0] for f in FILTERS])
def test_filters_restrict_every_arm_of_the_query(store, embed, name, filters, expected):
    got = set(_names(store.query(_query(embed, "moon tides flour bees", k=3, filters=filters))))
    assert got == expected


@pytest.mark.parametrize(("name", "filters", "expected"), FILTERS[:6], ids=[f[0] for f in FILTERS[:6]])
def test_filters_restrict_the_bm25_only_query(store, embed, name, filters, expected):
    query = _query(embed, "the", k=3, filters=filters, mode=VectorStoreQueryMode.SPARSE)
    assert set(_names(store.query(query))) <= expected


def test_filters_select_nodes_to_get(store):
    nodes = store.get_nodes(filters=MetadataFilters(filters=[_f("year", 2020, FilterOperator.GT)]))
    assert sorted(n.node_id for n in nodes) == ["bread-0", "tides-0"]


def test_a_range_on_a_string_is_refused_naming_the_filter(store, embed):
    with pytest.raises(UnsupportedFilterError, match="'topic'"):
        store.query(_query(embed, "bees", filters=MetadataFilters(filters=[_f("topic", "ocean", FilterOperator.GT)])))


def test_doc_ids_and_node_ids_of_a_query_restrict_it(store, embed):
    assert _names(store.query(_query(embed, "moon", doc_ids=["doc-bread"]))) == ["baking"]
    assert _names(store.query(_query(embed, "moon", node_ids=["bees-0"]))) == ["insects"]


def test_delete_removes_every_node_of_one_document(store, client):
    store.delete("doc-tides")
    assert sorted(n.node_id for n in store.get_nodes()) == ["bees-0", "bread-0"]


def test_delete_nodes_by_id_and_by_filter(store):
    store.delete_nodes(node_ids=["bees-0"])
    store.delete_nodes(filters=MetadataFilters(filters=[_f("topic", "baking")]))
    assert [n.node_id for n in store.get_nodes()] == ["tides-0"]


def test_delete_nodes_without_a_selection_is_refused_and_deletes_nothing(store):
    with pytest.raises(ValueError, match="clear"):
        store.delete_nodes()
    assert len(store.get_nodes()) == 3


def test_clear_drops_the_collection_and_the_next_add_recreates_it(store, embed, client):
    store.clear()
    assert not client.collection_exists("docs")
    assert store.query(_query(embed, "moon")).nodes == []
    store.add(_nodes(embed, ["bees"]))
    assert [n.node_id for n in store.get_nodes()] == ["bees-0"]


def test_another_embed_model_is_refused_naming_both_and_nothing_is_lost(store, client, make_fake):
    other = PosFairEmbedding(encoder=make_fake(dimension=64, max_length=64, calibration=None, model_id="other-model"))
    with pytest.raises(CollectionMismatchError, match="other-model"):
        PosFairVectorStore("docs", client=client, embed_model=other)
    assert client.count("docs", exact=True).count == 3


def test_a_collection_not_written_by_posfair_is_refused_with_the_migrate_command(client, embed):
    from qdrant_client import models

    client.create_collection("li", vectors_config=models.VectorParams(size=64, distance=models.Distance.COSINE))
    with pytest.raises(ValueError, match="storage migrate --from-llamaindex li"):
        PosFairVectorStore("li", client=client, embed_model=embed)


def test_a_reopened_store_reads_the_layout_and_queries_without_an_embed_model(store, client, embed, monkeypatch):
    # without an embed model, the store checks the first query's embedding with the collection's encoder
    monkeypatch.setattr("llamaindex_posfair.encoders.spec.EncoderSpec.load", lambda self, *a, **k: embed.encoder)
    reader = PosFairVectorStore("docs", client=client)
    assert reader.layout == store.layout
    assert _names(reader.query(_query(embed, "sourdough starter flour")))[0] == "baking"


def test_search_overrides_change_the_fusion_of_every_query(store, client, embed):
    rrf = PosFairVectorStore("docs", client=client, embed_model=embed, search_overrides={"fusion": "rrf"})
    q = _query(embed, "why does the moon raise tidal bulges")
    assert _names(rrf.query(q))[0] == "ocean"
    fusion = {
        name: [n.metadata["fusion_score"] for n in s.query(q).nodes] for name, s in (("rrf", rrf), ("dbsf", store))
    }
    assert fusion["rrf"] != fusion["dbsf"]  # DBSF sums normalised scores, RRF ranks
    assert rrf.query(q).similarities == pytest.approx(store.query(q).similarities)  # both score relevance


def test_a_bad_search_override_is_refused_and_nothing_is_lost(store, client):
    with pytest.raises(ValueError, match='fusion must be "rrf" or "dbsf"'):
        PosFairVectorStore("docs", client=client, search_overrides={"fusion": "max"})
    assert client.count("docs", exact=True).count == 3


def test_nodes_without_embeddings_are_embedded_by_the_store(client, embed):
    s = PosFairVectorStore("docs", client=client, embed_model=embed)
    nodes = _nodes(embed, ["bread"])
    nodes[0].embedding = None
    s.add(nodes)
    assert _names(s.query(_query(embed, "sourdough flour"))) == ["baking"]


async def test_async_add_query_and_delete(client, embed):
    s = PosFairVectorStore("docs", client=client, embed_model=embed)
    await s.async_add(_nodes(embed))
    result = await s.aquery(_query(embed, "moon tidal bulges"))
    assert _names(result)[0] == "ocean"
    await s.adelete("doc-tides")
    await s.adelete_nodes(node_ids=["bees-0"])
    assert [n.node_id for n in await s.aget_nodes()] == ["bread-0"]
    await s.aclear()
    assert not client.collection_exists("docs")


async def test_concurrent_async_queries_answer_as_sequential_ones(store, embed):
    queries = [_query(embed, t) for t in ("moon tides", "flour yeast", "bees dance", "ocean", "bread rises")]
    sequential = [store.query(q) for q in queries]
    concurrent = await asyncio.gather(*(store.aquery(q) for q in queries))
    assert [r.ids for r in concurrent] == [r.ids for r in sequential]
    for got, want in zip(concurrent, sequential):
        assert got.similarities == pytest.approx(want.similarities)


def test_edge_and_local_mode_answer_alike(embed):
    answers = []
    for engine in ("edge", "local"):
        c = open_store(":memory:", engine=engine)
        s = PosFairVectorStore("docs", client=c, embed_model=embed)
        s.add(_nodes(embed))
        modes = (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.SPARSE)
        answers.append([s.query(_query(embed, "moon tides flour bees", mode=m)) for m in modes])
        c.close()
    for edge, local in zip(*answers):
        assert edge.ids == local.ids
        assert edge.similarities == pytest.approx(local.similarities, rel=1e-5)


def _embed_in(make_fake, dtype):
    from llamaindex_posfair import EncoderSpec

    spec = EncoderSpec(model="fake", calibration=None, dtype=dtype)
    return PosFairEmbedding(encoder=make_fake(dimension=64, max_length=64, spec=spec))


def test_an_embed_model_in_another_precision_queries_with_one_notice(client, make_fake, caplog, monkeypatch):
    import logging

    from llamaindex_posfair.encoders import precision

    monkeypatch.setattr(precision, "_noticed", set())
    bf16 = _embed_in(make_fake, "bfloat16")
    PosFairVectorStore("p", client=client, embed_model=bf16).add(_nodes(bf16))
    fp32 = _embed_in(make_fake, "float32")
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        reader = PosFairVectorStore("p", client=client, embed_model=fp32)
        PosFairVectorStore("p", client=client, embed_model=fp32)
    assert reader.query(_query(fp32, "moon")).nodes[0].node_id == "tides-0"
    assert sum("rankings agree" in r.getMessage() for r in caplog.records) == 1


def test_an_embed_model_in_another_precision_adds_no_nodes(client, make_fake):
    bf16 = _embed_in(make_fake, "bfloat16")
    PosFairVectorStore("p", client=client, embed_model=bf16).add(_nodes(bf16, ["bees"]))
    fp32 = _embed_in(make_fake, "float32")
    with pytest.raises(CollectionMismatchError, match="written in bfloat16, but the embed model computes float32"):
        PosFairVectorStore("p", client=client, embed_model=fp32).add(_nodes(fp32, ["tides"]))
    assert client.count("p", exact=True).count == 1


def test_a_new_collection_records_the_embed_models_precision(client, make_fake):
    bf16 = _embed_in(make_fake, "bfloat16")
    assert PosFairVectorStore("p", client=client, embed_model=bf16).layout.encoder_spec().dtype == "bfloat16"


def test_a_node_longer_than_the_window_gets_a_node_vector_of_its_whole_text(client, embed):
    import numpy as np

    from qdrant_tools.encoding import subchunk_mean

    long_text = " ".join(f"Sentence {i} tells of the harbour and its ships." for i in range(40))
    short, long = _nodes(embed, ["bees"])[0], _nodes(embed, ["tides"], text=long_text)[0]
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    store.add([short, long])
    name = store._node_vector()
    points = {
        posfair_fields(p.payload)["text"] == long_text: p for p in client.scroll("docs", limit=10, with_vectors=True)[0]
    }
    assert posfair_fields(points[True].payload)["truncated"] and not posfair_fields(points[False].payload)["truncated"]
    want = subchunk_mean(np.asarray(points[True].vector["subchunks"], dtype=np.float32))
    np.testing.assert_allclose(points[True].vector[name], want, atol=1e-4)
    np.testing.assert_allclose(points[False].vector[name], short.embedding, atol=1e-4)
