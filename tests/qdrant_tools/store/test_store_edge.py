"""The Edge store's own behaviour: configuration round trips, MaxSim, persistence, refusals, index building."""

from __future__ import annotations

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools.store import EdgeStore, StoreError, UnsupportedCallError, open_store
from tests.qdrant_tools.store.conftest import DIM, fill, make_points, point_id, vectors_config


def test_get_collection_reports_the_vectors_as_created_including_multivector_and_quantization(tmp_path):
    with open_store(tmp_path / "s") as store:
        fill(store, quantized=True)
    with open_store(tmp_path / "s") as store:
        vectors = store.get_collection("c").config.params.vectors
    assert vectors == vectors_config(quantized=True)
    assert vectors["subchunks"].multivector_config.comparator == models.MultiVectorComparator.MAX_SIM


def test_get_collection_counts_points_and_lists_payload_indexes(edge):
    edge.create_payload_index("c", "doc_id", models.PayloadSchemaType.KEYWORD)
    edge.create_payload_index("c", "chunk_index", field_schema="integer")
    info = edge.get_collection("c")
    assert info.points_count == 60
    assert {k: (v.data_type, v.points) for k, v in info.payload_schema.items()} == {
        "doc_id": (models.PayloadSchemaType.KEYWORD, 60),
        "chunk_index": (models.PayloadSchemaType.INTEGER, 60),
    }


def test_maxsim_score_is_the_best_cosine_over_the_subchunks(edge, query_vector):
    q = np.asarray(query_vector) / np.linalg.norm(query_vector)
    batch = make_points()
    best = {}
    for pid, subs in zip(batch.ids, batch.vectors["subchunks"]):
        m = np.asarray(subs) / np.linalg.norm(subs, axis=1, keepdims=True)
        best[pid] = float((m @ q).max())
    got = edge.query_points("c", query=[query_vector], using="subchunks", limit=60).points
    assert [p.id for p in got] == sorted(best, key=best.get, reverse=True)
    assert np.allclose([p.score for p in got], sorted(best.values(), reverse=True), atol=1e-5)


def test_a_single_vector_query_on_a_multivector_equals_the_one_row_multivector(edge, query_vector):
    flat = edge.query_points("c", query=query_vector, using="subchunks", limit=5).points
    nested = edge.query_points("c", query=[query_vector], using="subchunks", limit=5).points
    assert [(p.id, p.score) for p in flat] == [(p.id, p.score) for p in nested]


def test_quantized_subchunks_keep_the_maxsim_ranking(tmp_path, query_vector):
    with open_store(tmp_path / "q") as quant, open_store(tmp_path / "f") as full:
        fill(quant, quantized=True)
        fill(full)
        quant.build_index("c")
        args = {"prefetch": models.Prefetch(query=query_vector, using="node", limit=20), "using": "subchunks"}
        got = quant.query_points("c", query=[query_vector], limit=5, **args).points
        want = full.query_points("c", query=[query_vector], limit=5, **args).points
    assert [p.id for p in got] == [p.id for p in want]


def test_a_bool_match_is_refused_instead_of_matching_nothing(edge):
    flt = models.Filter(must=[models.FieldCondition(key="flag", match=models.MatchValue(value=True))])
    with pytest.raises(UnsupportedCallError, match="bool value True of field 'flag'.*keyword"):
        edge.count("c", count_filter=flt)


def test_an_unsupported_client_method_names_itself_and_the_alternative(edge):
    with pytest.raises(UnsupportedCallError, match="create_snapshot is not supported.*copy its folder"):
        edge.create_snapshot("c")


def test_methods_older_clients_had_point_to_their_successor(edge):
    with pytest.raises(UnsupportedCallError, match="search is not supported.*query_points"):
        edge.search("c", query_vector=[0.0] * DIM)


def test_names_that_are_not_client_methods_stay_missing(edge):
    assert not hasattr(edge, "no_such_method") and not hasattr(edge, "_client")


def test_prefetch_without_a_query_is_refused_with_the_fix(edge, query_vector):
    with pytest.raises(ValueError, match="prefetch but no query"):
        edge.query_points("c", prefetch=models.Prefetch(query=query_vector, using="node"))


def test_points_survive_close_and_reopen(tmp_path, query_vector):
    with open_store(tmp_path / "s") as store:
        fill(store)
        before = store.query_points("c", query=query_vector, using="node").points
    with open_store(tmp_path / "s") as store:
        after = store.query_points("c", query=query_vector, using="node").points
        assert store.count("c").count == 60
    assert [(p.id, p.payload) for p in after] == [(p.id, p.payload) for p in before]


def test_a_moved_folder_opens_with_its_points(tmp_path):
    with open_store(tmp_path / "a") as store:
        fill(store)
    (tmp_path / "a").rename(tmp_path / "b")
    with open_store(tmp_path / "b", must_exist=True) as store:
        assert store.count("c").count == 60


def test_a_temporary_store_is_removed_on_close():
    store = open_store(":memory:")
    folder = store.path
    fill(store)
    store.close()
    assert not folder.exists()


def test_a_closed_store_says_so(tmp_path):
    store = open_store(tmp_path / "s")
    fill(store)
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.count("c")


def test_creating_an_existing_collection_is_refused(edge):
    with pytest.raises(ValueError, match="already exists"):
        edge.create_collection("c", vectors_config=vectors_config())


def test_deleted_collection_is_gone_and_can_be_recreated(edge):
    assert edge.delete_collection("c") and not edge.collection_exists("c")
    assert edge.get_collections().collections == []
    fill(edge)
    assert edge.count("c").count == 60


def test_a_collection_name_that_is_a_path_is_refused(edge):
    with pytest.raises(ValueError, match="collection name"):
        edge.create_collection("../x", vectors_config=vectors_config())


def test_custom_sharding_is_refused_with_the_alternative(edge):
    with pytest.raises(UnsupportedCallError, match="custom sharding.*server"):
        edge.create_collection("s", vectors_config=vectors_config(), sharding_method=models.ShardingMethod.CUSTOM)


def test_an_unnamed_vector_collection_answers_like_qdrant_client(edge):
    edge.create_collection("u", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
    edge.upsert("u", models.Batch(ids=[1, 2], vectors=[[1.0, 0.0], [0.0, 2.0]]))
    hit = edge.query_points("u", query=[0.0, 1.0], with_vectors=True).points[0]
    assert (hit.id, hit.score, hit.vector) == (2, 2.0, [0.0, 2.0])
    assert edge.get_collection("u").config.params.vectors.size == 2


def dense_store(tmp_path, n=3000):
    """A collection small enough for a test, with an indexing threshold low enough to get an HNSW index."""
    store = open_store(tmp_path / "idx")
    store.create_collection(
        "d",
        vectors_config={"v": models.VectorParams(size=16, distance=models.Distance.COSINE)},
        optimizers_config=models.OptimizersConfigDiff(indexing_threshold=10),
    )
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, 4)) @ rng.normal(size=(4, 16)) + 0.05 * rng.normal(size=(n, 16))
    store.upsert("d", models.Batch(ids=list(range(n)), vectors={"v": x.tolist()}))
    return store, x / np.linalg.norm(x, axis=1, keepdims=True)


def exact_top(x, q, k=10):
    return list(np.argsort(-(x @ (q / np.linalg.norm(q))))[:k])


def test_queries_before_the_index_is_built_are_exact(tmp_path):
    store, x = dense_store(tmp_path)
    q = x[7] + 0.3 * x[99]
    with store:
        assert store.get_collection("d").indexed_vectors_count == 0
        got = [p.id for p in store.query_points("d", query=q.tolist(), using="v", limit=10).points]
    assert got == exact_top(x, q)


def test_build_index_indexes_every_point_and_exact_search_stays_exact(tmp_path):
    store, x = dense_store(tmp_path)
    q = x[3] - 0.2 * x[50]
    with store:
        seconds = store.build_index("d")
        assert store.get_collection("d").indexed_vectors_count == 3000 and seconds > 0
        exact = models.SearchParams(exact=True)
        got = [p.id for p in store.query_points("d", query=q.tolist(), using="v", limit=10, search_params=exact).points]
        approx = [p.id for p in store.query_points("d", query=q.tolist(), using="v", limit=10).points]
    assert got == exact_top(x, q) and len(set(approx) & set(got)) >= 9


def test_points_written_after_the_index_are_found(tmp_path):
    store, _ = dense_store(tmp_path)
    with store:
        store.build_index("d")
        store.upsert("d", models.Batch(ids=[point_id(1)], vectors={"v": [[1.0] * 16]}, payloads=[{"late": "yes"}]))
        hit = store.query_points("d", query=[1.0] * 16, using="v", limit=1).points[0]
    assert hit.id == point_id(1) and hit.payload == {"late": "yes"}


def test_upload_points_writes_every_point_in_batches(edge):
    pts = [models.PointStruct(id=1000 + i, vector={"node": [1.0] * DIM, "subchunks": [[1.0] * DIM]}) for i in range(5)]
    edge.upload_points("c", pts, batch_size=2)
    assert edge.count("c").count == 65


def test_edge_store_is_what_open_store_gives_for_a_folder(tmp_path):
    with open_store(tmp_path / "s") as store:
        assert isinstance(store, EdgeStore) and store.path == tmp_path / "s"


def test_payload_index_params_objects_create_an_index_of_their_type(edge):
    edge.create_payload_index("c", "doc_id", field_schema=models.KeywordIndexParams(type="keyword", is_tenant=True))
    assert edge.get_collection("c").payload_schema["doc_id"].data_type == models.PayloadSchemaType.KEYWORD


def test_an_unclosed_temporary_store_is_removed_when_collected():
    import gc

    store = open_store(":memory:")
    folder = store.path
    del store
    gc.collect()
    assert not folder.exists()
