"""LlamaIndex's ``QdrantVectorStore`` tests, ported to ``PosFairVectorStore`` (README.md: source, licence, changes).

Each test keeps its upstream name and what it asserts; the fixtures (conftest.py) build the
store over Qdrant Edge and over qdrant-client's local mode. Tests of ``QdrantVectorStore``'s
private methods, its own options and of sharding are kept as named skips with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from qdrant_client import AsyncQdrantClient, QdrantClient

from llamaindex_posfair import PosFairVectorStore
from qdrant_tools.store import open_store
from qdrant_tools.store.async_store import AsyncStore

from .conftest import IDS, close_async, pad

SHARDING = "not applicable: custom sharding (shard keys, shard_identifier) is a QdrantVectorStore option; "
SHARDING += "posfair writes one shard per collection, and these tests need a Qdrant cluster"
PRIVATE = "not applicable: tests a private method of QdrantVectorStore"
PAYLOAD_INDEXES = "not applicable: QdrantVectorStore's payload_indexes option and its private collection helpers; "
PAYLOAD_INDEXES += "posfair creates its own payload indexes, and these tests need a Qdrant server"
SPARSE_NAMES = "not applicable: QdrantVectorStore's sparse_vector_name and its detection of legacy vector names; "
SPARSE_NAMES += "a posfair collection records its vector names in its layout"


def test_class() -> None:
    names_of_base_classes = [b.__name__ for b in PosFairVectorStore.__mro__]
    assert BasePydanticVectorStore.__name__ in names_of_base_classes


def test_delete__and_get_nodes(vector_store: PosFairVectorStore) -> None:
    vector_store.delete_nodes(node_ids=[IDS[0]])
    assert len(vector_store.get_nodes(node_ids=list(IDS))) == 2


def test_clear(vector_store: PosFairVectorStore) -> None:
    vector_store.clear()
    with pytest.raises(ValueError, match="Collection test not found"):
        vector_store.get_nodes(node_ids=list(IDS))


async def test_adelete_and_aget(vector_store: PosFairVectorStore) -> None:
    await vector_store.adelete_nodes(node_ids=[IDS[0]])
    assert len(await vector_store.aget_nodes(node_ids=list(IDS))) == 2


async def test_aclear(vector_store: PosFairVectorStore) -> None:
    await vector_store.aclear()
    with pytest.raises(ValueError, match="Collection test not found"):
        await vector_store.aget_nodes(node_ids=list(IDS))


@pytest.mark.skip(
    reason="not applicable: parse_to_query_result converts QdrantVectorStore's own payload format and reads its "
    "dense_vector_name attribute; it is no part of LlamaIndex's vector-store interface"
)
def test_parse_query_result() -> None: ...


async def test_get_with_embedding(vector_store: PosFairVectorStore) -> None:
    existing_nodes = await vector_store.aget_nodes(node_ids=list(IDS))
    assert all(node.embedding is not None for node in existing_nodes)


@pytest.mark.skip(reason=f"{PRIVATE} (_build_subfilter, on a mocked client)")
def test_filter_conditions() -> None: ...


def test_filters_with_types(vector_store: PosFairVectorStore) -> None:
    def count(value: list, operator: FilterOperator) -> int:
        flt = MetadataFilters(filters=[MetadataFilter(key="some_key", value=value, operator=operator)])
        return len(vector_store.get_nodes(filters=flt))

    assert count([1, 2], FilterOperator.IN) == 2
    assert count([1, 2], FilterOperator.NIN) == 1
    assert count(["3"], FilterOperator.IN) == 1


def test_hybrid_vector_store_query(hybrid_vector_store: PosFairVectorStore) -> None:
    query = VectorStoreQuery(
        query_embedding=pad([0.0, 0.0]),
        query_str="test1",
        similarity_top_k=1,
        sparse_top_k=1,
        hybrid_top_k=2,
        mode=VectorStoreQueryMode.HYBRID,
    )
    results = hybrid_vector_store.query(query)
    assert len(results.nodes) == 2

    # upstream then sets enable_hybrid = False; a posfair collection always stores BM25, so only the mode changes
    query.mode = VectorStoreQueryMode.DEFAULT
    results = hybrid_vector_store.query(query)
    assert len(results.nodes) == 1


@pytest.mark.skip(reason=SHARDING)
def test_shard_vector_store_async() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_shard_vector_store_sync() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_validate_custom_sharding() -> None: ...


@pytest.mark.skip(reason=f"{SHARDING}; {PRIVATE} (_generate_shard_key_selector)")
def test_generate_shard_key_selector_none() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_generate_shard_key_selector_custom() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_shard_keys_created() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_shard_keys_created_sync() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_shard_vector_store_aquery() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_shard_vector_store_query() -> None: ...


@pytest.mark.skip(reason=PAYLOAD_INDEXES)
def test_payload_indexes_created() -> None: ...


@pytest.mark.skip(reason=PAYLOAD_INDEXES)
def test_payload_indexes_created_sync() -> None: ...


@pytest.mark.skip(reason=PAYLOAD_INDEXES)
def test_payload_indexes_created_on_existing_collection() -> None: ...


@pytest.mark.skip(reason=PAYLOAD_INDEXES)
def test_payload_indexes_created_on_existing_collection_sync() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_arecreate_shard_keys() -> None: ...


@pytest.mark.skip(reason=SHARDING)
def test_recreate_shard_keys() -> None: ...


@pytest.mark.skip(reason=f"{PRIVATE} (_acreate_shard_keys); {SHARDING}")
def test_acreate_shard_keys_returns_early_when_no_shard_keys() -> None: ...


@pytest.mark.skip(reason=f"{PRIVATE} (_create_shard_keys); {SHARDING}")
def test_create_shard_keys_returns_early_when_no_shard_keys() -> None: ...


@pytest.mark.skip(reason=f"{PRIVATE} (_acreate_payload_indexes)")
def test_acreate_payload_indexes_returns_early_when_no_payload_indexes() -> None: ...


@pytest.mark.skip(reason=f"{PRIVATE} (_create_payload_indexes)")
def test_create_payload_indexes_returns_early_when_no_payload_indexes() -> None: ...


@pytest.mark.skip(reason=SPARSE_NAMES)
def test_sparse_vector_name_detection_switches_to_legacy() -> None: ...


@pytest.mark.skip(reason=SPARSE_NAMES)
def test_sparse_vector_name_detection_keeps_new() -> None: ...


@pytest.mark.skip(reason=SPARSE_NAMES)
def test_sparse_vector_name_respects_user_specified() -> None: ...


def _write_hello(backend: str, folder: Path, collection_name: str, embed) -> None:
    """The collection upstream creates with raw client calls, written by posfair instead (a collection
    posfair did not write is refused: it records no layout), then closed."""
    client = open_store(folder) if backend == "edge" else QdrantClient(path=str(folder))
    try:
        writer = PosFairVectorStore(collection_name, client=client, embed_model=embed)
        writer.add([TextNode(text="hello", id_=IDS[0], embedding=pad([1.0, 0.0]))])
    finally:
        client.close()


async def test_async_query_initializes_with_async_client_only(backend: str, embed, tmp_path: Path) -> None:
    """With only an async client and an existing collection, ``aquery`` reads the layout and answers."""
    collection_name = "async_init_test"
    _write_hello(backend, tmp_path, collection_name, embed)
    aclient = AsyncStore(open_store(tmp_path)) if backend == "edge" else AsyncQdrantClient(path=str(tmp_path))
    try:
        store = PosFairVectorStore(collection_name=collection_name, aclient=aclient)

        query = VectorStoreQuery(query_embedding=pad([1.0, 0.0]), similarity_top_k=1)
        result = await store.aquery(query)

        assert result is not None
        assert len(result.nodes) == 1
        assert getattr(result.nodes[0], "text", None) == "hello"
    finally:
        await close_async(aclient)
