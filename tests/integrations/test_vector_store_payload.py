"""PosFairVectorStore accepts what LlamaIndex apps send: any metadata key, dates, empty nodes; validates
before it writes; and LlamaIndex's own ``QdrantVectorStore`` reads what posfair writes (payload format 2)."""

from __future__ import annotations

import datetime as dt
import json
import logging

import pytest
from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from llama_index.vector_stores.qdrant import QdrantVectorStore

from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
from llamaindex_posfair.integrations.filters import to_qdrant_filter
from llamaindex_posfair.integrations.nodes import hit_to_node
from qdrant_tools.chunking import SourceDocument, content_hash
from qdrant_tools.ids import point_id
from qdrant_tools.ingest import IngestConfig, ingest_documents, ingest_path
from qdrant_tools.payload import posfair_fields
from qdrant_tools.search import Hit
from qdrant_tools.store import open_store

#: Metadata keys posfair's format-1 payload reserved, and LlamaIndex's record keys: all are stored and returned.
CLASHING = {
    "page_label": "iv",
    "page_number": 4,
    "source": "a web page",
    "doc_id": "the user's id",
    "version": 3,
    "text": "a user field named text",
    "chunk_index": "first",
    "encoder_fingerprints": ["x"],
    "_posfair": {"mine": True},
    "_node_content": "not a node",
    "ref_doc_id": "someone else's",
}


@pytest.fixture
def embed(make_fake):
    return PosFairEmbedding(encoder=make_fake(dimension=64, max_length=64, calibration=None))


def _node(embed, name, text, metadata=None, doc="doc"):
    node = TextNode(
        text=text,
        id_=name,
        metadata=dict(metadata or {}),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"{doc}-{name}")},
    )
    node.embedding = embed.get_text_embedding(text) if text.strip() else None
    return node


def _count(client, name="docs"):
    return client.count(name, exact=True).count if client.collection_exists(name) else 0


def test_metadata_on_any_key_is_stored_and_comes_back_as_given(client, embed):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    store.add([_node(embed, "a", "The moon raises two tidal bulges.", CLASHING)])
    (node,) = store.get_nodes()
    assert node.metadata == CLASHING and node.text == "The moon raises two tidal bulges."
    assert node.ref_doc_id == "doc-a"
    (point,) = client.scroll("docs", limit=10, with_payload=True)[0]
    assert point.payload["page_label"] == "iv" and point.payload["source"] == "a web page"  # top level, filterable
    assert point.payload["doc_id"] == "doc-a" and posfair_fields(point.payload)["doc_id"] == "doc-a"  # shadowed
    hit = store.query(VectorStoreQuery(query_embedding=embed.get_query_embedding("moon"), similarity_top_k=1))
    assert hit.nodes[0].metadata["page_label"] == "iv" and hit.nodes[0].metadata["_posfair"] == {"mine": True}


def test_a_filter_on_a_page_label_the_pdf_reader_set_selects_the_page(client, embed):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    store.add([_node(embed, f"p{i}", f"page {i} of the tide tables", {"page_label": str(i)}) for i in (1, 2, 3)])
    flt = MetadataFilters(filters=[MetadataFilter(key="page_label", value="2")])
    assert [n.node_id for n in store.get_nodes(filters=flt)] == ["p2"]


WHEN = {"jan": dt.datetime(2024, 1, 2, 9, 30), "feb": dt.date(2024, 2, 10), "mar": dt.datetime(2024, 3, 5)}


def test_dates_are_stored_as_iso_strings_on_every_backend(client, embed):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    store.add([_node(embed, k, f"notes of {k}", {"when": v}) for k, v in WHEN.items()])
    got = {n.node_id: n.metadata["when"] for n in store.get_nodes()}
    assert got == {"jan": "2024-01-02T09:30:00", "feb": "2024-02-10", "mar": "2024-03-05T00:00:00"}


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        (FilterOperator.GTE, "2024-02-01", {"feb", "mar"}),
        (FilterOperator.GT, "2024-02-10T00:00:00", {"mar"}),
        (FilterOperator.LT, "2024-02-10", {"jan"}),
        (FilterOperator.LTE, "2024-02-10", {"jan", "feb"}),
    ],
)
def test_a_date_range_filter_returns_the_nodes_in_range(client, embed, op, value, expected):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    store.add([_node(embed, k, f"notes of {k}", {"when": v}) for k, v in WHEN.items()])
    flt = MetadataFilters(filters=[MetadataFilter(key="when", value=value, operator=op)])
    assert {n.node_id for n in store.get_nodes(filters=flt)} == expected
    query = VectorStoreQuery(query_embedding=embed.get_query_embedding("notes"), similarity_top_k=3, filters=flt)
    assert set(store.query(query).ids) and {n.node_id for n in store.query(query).nodes} == expected


def test_a_date_or_datetime_value_translates_to_a_datetime_range():
    for value in (dt.date(2024, 2, 1), dt.datetime(2024, 2, 1)):
        f = MetadataFilter.model_construct(key="when", value=value, operator=FilterOperator.GTE)
        cond = to_qdrant_filter(MetadataFilters.model_construct(filters=[f], condition=None)).must[0]
        assert cond.range.gte == dt.datetime(2024, 2, 1) and type(cond.range).__name__ == "DatetimeRange"


def test_empty_nodes_are_skipped_with_one_warning_and_counted(client, embed, caplog):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    nodes = [_node(embed, "empty", ""), _node(embed, "blank", "  \n\t "), _node(embed, "a", "Bees dance.")]
    with caplog.at_level(logging.WARNING, logger="llamaindex_posfair.integrations.nodes"):
        ids = store.add(nodes)
    warnings = [r for r in caplog.records if "without text" in r.getMessage()]
    assert ids == ["a"] and len(warnings) == 1 and "2 node(s)" in warnings[0].getMessage()
    assert store.empty_nodes_skipped == 2 and [n.node_id for n in store.get_nodes()] == ["a"]


def test_only_empty_nodes_write_nothing(client, embed):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    assert store.add([_node(embed, "empty", " ")]) == [] and _count(client) == 0


@pytest.mark.parametrize("bad", ["embedding", "metadata"])
def test_a_bad_node_in_the_second_batch_leaves_nothing_written(client, embed, bad):
    store = PosFairVectorStore("docs", client=client, embed_model=embed, batch_size=2)
    nodes = [_node(embed, f"n{i}", f"sentence number {i} about tides") for i in range(4)]
    if bad == "embedding":
        nodes[3].embedding = nodes[3].embedding[:10]
        match = r"node 'n3' has an embedding of 10 numbers.*has 64"
    else:
        nodes[3].metadata["obj"] = object()
        match = r"metadata of node 'n3'\['obj'\] is a object"
    with pytest.raises(ValueError, match=match):
        store.add(nodes)
    assert _count(client) == 0
    nodes[3] = _node(embed, "n3", "sentence number 3 about tides")
    assert store.add(nodes) == ["n0", "n1", "n2", "n3"] and _count(client) == 4  # fixed: stored once


async def test_async_add_validates_before_it_writes(client, embed):
    store = PosFairVectorStore("docs", client=client, embed_model=embed, batch_size=1)
    nodes = [_node(embed, "a", "Bees dance."), _node(embed, "b", "Tides turn.")]
    nodes[1].embedding = [0.0] * 3
    with pytest.raises(ValueError, match="embedding of 3 numbers"):
        await store.async_add(nodes)
    assert _count(client) == 0


class _FlakyAsync:
    """An async client whose first ``upsert`` fails with a transient error."""

    def __init__(self, inner):
        self.inner, self.upserts = inner, 0

    async def upsert(self, *args, **kwargs):
        self.upserts += 1
        if self.upserts == 1:
            raise ConnectionError("connection reset")
        return await self.inner.upsert(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


async def test_async_add_upserts_through_the_writers_retries(client, embed):
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    flaky = _FlakyAsync(store.aclient)
    store._aclient = flaky
    store._chunk_encoder()
    store._writer.retry = type(store._writer.retry)(max_attempts=3, base_delay=0.0, max_delay=0.0)
    assert await store.async_add([_node(embed, "a", "Bees dance."), _node(embed, "e", "")]) == ["a"]
    assert flaky.upserts == 2 and [n.node_id for n in store.get_nodes()] == ["a"]


def test_a_folder_with_an_empty_init_file_stores_the_other_files(client, embed, tmp_path):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "tides.md").write_text("The moon raises two tidal bulges in the ocean.")
    (tmp_path / "bees.txt").write_text("Honeybees dance to share the direction of flowers.")
    docs = SimpleDirectoryReader(str(tmp_path)).load_data()
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    VectorStoreIndex.from_documents(docs, storage_context=StorageContext.from_defaults(vector_store=store),
                                    embed_model=embed)  # fmt: skip
    assert sorted(n.metadata["file_name"] for n in store.get_nodes()) == ["bees.txt", "tides.md"]
    assert store.empty_nodes_skipped == 1


def _qdrant_store(client, name, vector):
    return QdrantVectorStore(client=client, collection_name=name, dense_vector_name=vector)


def test_qdrant_vector_store_reads_what_posfair_vector_store_wrote(embed):
    client = open_store(":memory:", engine="local")  # a QdrantClient in local mode
    try:
        store = PosFairVectorStore("docs", client=client, embed_model=embed)
        store.add([_node(embed, "a", "The moon raises two tidal bulges.", {"page_label": "7", "when": dt.date(2024, 1, 2)}),
                   _node(embed, "b", "Honeybees dance to share flowers.", {"topic": "bees"})])  # fmt: skip
        reader = _qdrant_store(client, "docs", store._node_vector())
        got = {n.node_id: n for n in reader.get_nodes()}
        assert got["a"].text == "The moon raises two tidal bulges." and got["a"].ref_doc_id == "doc-a"
        assert got["a"].metadata == {"page_label": "7", "when": "2024-01-02"} and got["b"].metadata == {"topic": "bees"}
        query = VectorStoreQuery(query_embedding=embed.get_query_embedding("honeybees dance"), similarity_top_k=1)
        result = reader.query(query)
        assert [n.node_id for n in result.nodes] == ["b"] and result.nodes[0].text.startswith("Honeybees")
    finally:
        client.close()


def _doc(doc_id, text, metadata, pages=()):
    return SourceDocument(doc_id, text, f"/data/{doc_id}", content_hash(text, metadata, pages), metadata, pages)


def test_qdrant_vector_store_reads_what_posfair_ingest_wrote(fake_encoder):
    texts = {
        "tides.md": "The moon raises two tidal bulges in the ocean. " * 3,
        "bees.txt": "Honeybees dance to share the direction of flowers. " * 3,
    }
    meta = {"team": "docs", "when": dt.date(2024, 1, 2), "doc_id": "the user's"}
    docs = [_doc(k, v, meta) for k, v in texts.items()]
    client = open_store(":memory:", engine="local")
    try:
        ingest_documents(client, "demo", docs, {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
        reader = _qdrant_store(client, "demo", "calibrated")
        nodes = reader.get_nodes()
        assert {n.ref_doc_id for n in nodes} == set(texts)
        for n in nodes:
            assert texts[n.ref_doc_id][n.start_char_idx : n.end_char_idx] == n.text
            assert n.metadata == {
                "team": "docs",
                "when": "2024-01-02",
                "doc_id": "the user's",
                "file_name": n.ref_doc_id,
            }
        query = VectorStoreQuery(query_embedding=fake_encoder.encode_queries(["honeybees dance"])[0].tolist(),
                                 similarity_top_k=1)  # fmt: skip
        assert reader.query(query).nodes[0].ref_doc_id == "bees.txt"
    finally:
        client.close()


def test_an_ingested_chunk_rebuilds_as_the_text_node_of_its_record(client, fake_encoder, tmp_path):
    text = " ".join(f"Sentence {i} about the harbour and its ships." for i in range(30))
    (tmp_path / "port.md").write_text(text)
    ingest_path(client, "demo", tmp_path, {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
    points, _ = client.scroll("demo", limit=100, with_payload=True)
    by_index = {posfair_fields(p.payload)["chunk_index"]: p for p in points}
    assert len(by_index) >= 3
    p = by_index[1]
    fields = posfair_fields(p.payload)
    node = metadata_dict_to_node(p.payload)
    assert isinstance(node, TextNode) and node.node_id == str(p.id) == point_id("port.md", fields["version"], 1)
    assert node.text == fields["text"] == text[node.start_char_idx : node.end_char_idx]
    assert node.ref_doc_id == "port.md" and node.metadata == {"file_name": "port.md"}
    assert node.prev_node.node_id == point_id("port.md", fields["version"], 0)
    assert node.next_node.node_id == point_id("port.md", fields["version"], 2)
    assert hit_to_node(Hit(str(p.id), 0.5, p.payload)).node.model_dump() == node.model_dump()


def test_an_ingested_paged_document_keeps_its_page_fields_as_metadata(client, fake_encoder):
    pages = ["alpha beta gamma delta.", "epsilon zeta eta theta.", "iota kappa lambda mu."]
    text = "\n\n".join(pages)
    starts = [text.index(p) for p in pages]
    doc = _doc("a.pdf", text, {"author": "x"}, tuple(zip(starts, ["i", "1", "2"])))
    ingest_documents(client, "c", [doc], {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
    points, _ = client.scroll("c", limit=10, with_payload=True)
    for p in points:
        node = hit_to_node(Hit(str(p.id), 0.0, p.payload)).node
        fields = posfair_fields(p.payload)
        assert node.metadata["page_label"] == p.payload["page_label"] == fields["page_label"]
        assert node.metadata["page_labels"] == fields["page_labels"] and node.metadata["author"] == "x"


def test_a_format_1_point_still_reads():
    ingested = {"text": "tides", "doc_id": "a.md", "source": "/d/a.md", "chunk_index": 0, "n_chunks": 2,
                "start_char": 4, "end_char": 9, "version": "v", "lang": "en", "posfair_payload_format": 1}  # fmt: skip
    node = hit_to_node(Hit("0b4d1f3e-6a41-4f2b-9a59-4e0d2b1c7f10", 0.5, ingested)).node
    assert node.text == "tides" and node.ref_doc_id == "a.md" and node.next_node.node_id == point_id("a.md", "v", 1)
    assert node.metadata["lang"] == "en" and node.metadata["doc_id"] == "a.md" and "version" not in node.metadata
    stored_node = TextNode(id_="n1", text="", metadata={"k": 1})
    from llama_index.core.vector_stores.utils import node_to_metadata_dict

    record = node_to_metadata_dict(stored_node, remove_text=True)
    written = {**record, "text": "the text", "doc_id": "n1", "posfair_payload_format": 1}
    back = hit_to_node(Hit("x", 0.1, written)).node
    assert back.node_id == "n1" and back.text == "the text" and back.metadata == {"k": 1}
    assert posfair_fields(written)["text"] == "the text" and json.loads(written["_node_content"])["id_"] == "n1"


def test_the_pdf_readers_pages_are_stored_and_a_hit_says_its_page(client, embed, tmp_path):
    pytest.importorskip("pypdf")
    from mixed_folder import PDF_PAGES, minimal_pdf

    (tmp_path / "tides.pdf").write_bytes(minimal_pdf(PDF_PAGES))
    docs = SimpleDirectoryReader(str(tmp_path)).load_data()  # LlamaIndex's PDFReader: one Document per page
    assert [d.metadata["page_label"] for d in docs] == ["1", "2", "3"]
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    index = VectorStoreIndex.from_documents(
        docs, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    hit = index.as_retriever(similarity_top_k=1).retrieve("neap tides at the quarter moons harbour master")[0]
    assert hit.node.metadata["page_label"] == "2" and "quarter moons" in hit.node.get_content()
    assert hit.node.metadata["file_name"] == "tides.pdf"
