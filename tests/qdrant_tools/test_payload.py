"""Payload format 2: metadata flat and JSON-safe, LlamaIndex's record beside it, posfair's fields in ``_posfair``;
one reader for both formats; the nested keys posfair filters and indexes work on both embedded engines."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import numpy as np
import pytest
from qdrant_client import models

from qdrant_tools import payload as P
from qdrant_tools.chunking import Chunk, SourceDocument
from qdrant_tools.ids import point_id
from qdrant_tools.spec import CollectionSpec, VectorConfig
from qdrant_tools.store.protocol import store_traits
from qdrant_tools.writer import PointBatch, QdrantWriter


def _payload(metadata, pages=(), index=1, n_chunks=3):
    doc = SourceDocument("sub/a.pdf", "x" * 100, "/data/sub/a.pdf", "h", metadata=metadata, pages=pages)
    chunk = Chunk(index, "chunk text", 10, 20, 3)
    fields = P.posfair_record(doc, chunk, n_chunks=n_chunks, version="v1", fingerprints={"calibrated": "f"},
                              n_tokens=5, truncated=False, chunking_key="k")  # fmt: skip
    return P.build_payload(doc, fields)


def test_metadata_is_flat_and_posfair_fields_are_nested():
    p = _payload({"lang": "en", "when": dt.date(2024, 1, 2)}, pages=((0, "i"), (15, "1")))
    assert p["lang"] == "en" and p["when"] == "2024-01-02" and p["file_name"] == "a.pdf"
    assert (p["page_label"], p["page_number"], p["page_labels"]) == ("i", 1, ["i", "1"])
    assert p["doc_id"] == p["document_id"] == p["ref_doc_id"] == "sub/a.pdf" and p["_node_type"] == "TextNode"
    fields = P.posfair_fields(p)
    assert fields["format"] == 2 and fields["text"] == "chunk text" == json.loads(p["_node_content"])["text"]
    assert "text" not in p["_posfair"] and {**p["_posfair"], "text": "chunk text"} == fields  # the text once
    assert (fields["chunk_index"], fields["n_chunks"], fields["start_char"], fields["end_char"]) == (1, 3, 10, 20)
    assert fields["source"] == "/data/sub/a.pdf" and fields["version"] == "v1" and fields["page_label"] == "i"
    json.dumps(p)  # a payload is plain JSON


def test_a_metadata_key_named_like_a_record_key_is_shadowed_at_the_top_and_kept_in_the_node():
    given = {"doc_id": "mine", "_posfair": 1, "_node_content": "x", "page_label": "iv", "file_name": "orig.pdf"}
    p = _payload(given, pages=((0, "1"),))
    assert p["doc_id"] == "sub/a.pdf" and P.posfair_fields(p)["doc_id"] == "sub/a.pdf"
    assert p["page_label"] == "iv" and p["file_name"] == "orig.pdf"  # the document's own win over derived ones
    node = json.loads(p["_node_content"])
    assert node["metadata"] == given and node["text"] == "chunk text"


def test_the_node_record_names_the_point_the_document_and_the_neighbours():
    node = json.loads(_payload({})["_node_content"])
    assert node["id_"] == point_id("sub/a.pdf", "v1", 1) and node["class_name"] == "TextNode"
    rel = {k: v["node_id"] for k, v in node["relationships"].items()}
    assert rel == {"1": "sub/a.pdf", "2": point_id("sub/a.pdf", "v1", 0), "3": point_id("sub/a.pdf", "v1", 2)}
    first_and_only = json.loads(_payload({}, index=0, n_chunks=1)["_node_content"])
    assert set(first_and_only["relationships"]) == {"1"}


def test_format_1_points_read_through_the_same_reader():
    old = {"text": "t", "doc_id": "a.md", "chunk_index": 2, "version": "v", "lang": "en", "posfair_payload_format": 1}
    assert P.posfair_fields(old) == {"text": "t", "doc_id": "a.md", "chunk_index": 2, "version": "v", "format": 1}
    assert P.posfair_fields({"_posfair": {"doc_id": "user's", "format": 7}, "doc_id": "a"}) == {"doc_id": "a"}
    assert P.posfair_fields(None) == {}


def test_the_text_of_a_format_2_point_is_selected_through_its_node_record():
    assert P.payload_fields("text", "doc_id") == [
        "text", "doc_id", "posfair_payload_format", "_node_content", "_posfair.doc_id", "_posfair.format"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05"),
        (dt.date(2024, 1, 2), "2024-01-02"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (("a", 1), ["a", 1]),
        ({"nested": dt.date(2020, 5, 6)}, {"nested": "2020-05-06"}),
    ],
)
def test_json_metadata_makes_values_json(value, stored):
    assert P.json_metadata({"k": value}) == {"k": stored}


def test_json_metadata_refuses_what_json_cannot_hold_naming_the_key():
    with pytest.raises(ValueError, match=r"metadata\['obj'\] is a object"):
        P.json_metadata({"obj": object()})
    with pytest.raises(ValueError, match="keys must be strings"):
        P.json_metadata({1: "x"})


def test_rekeyed_moves_an_ingested_chunk_to_its_new_version():
    p = _payload({"lang": "en"})
    moved = P.rekeyed(p, "k2", "v2")
    fields = P.posfair_fields(moved)
    node = json.loads(moved["_node_content"])
    assert (fields["version"], fields["chunking"]) == ("v2", "k2") and node["id_"] == point_id("sub/a.pdf", "v2", 1)
    assert node["relationships"]["3"]["node_id"] == point_id("sub/a.pdf", "v2", 2) and node["metadata"] == {
        "lang": "en",
        "file_name": "a.pdf",
    }
    assert P.posfair_fields(p)["version"] == "v1"  # the input is not changed


def test_nested_keys_are_indexed_filtered_and_selected_on_both_engines(client):
    writer = QdrantWriter(client, CollectionSpec(name="c", vectors=[VectorConfig(name="v", size=2)]))
    writer.ensure()
    payloads = [_payload({"version": "user"}, index=i) for i in range(3)]
    payloads[2]["_posfair"]["version"] = "v2"
    writer.upsert(PointBatch(ids=[point_id("a", "x", i) for i in range(3)], payloads=payloads,
                             vectors={"v": np.ones((3, 2), np.float32)}))  # fmt: skip
    if store_traits(client).keeps_payload_indexes:  # Qdrant Edge (local mode keeps none)
        schema = client.get_collection("c").payload_schema
        assert {"doc_id", "_posfair.version", "_posfair.format"} <= set(schema)
    flt = models.Filter(must=[models.FieldCondition(key="_posfair.version", match=models.MatchValue(value="v2"))])
    points, _ = client.scroll("c", scroll_filter=flt, with_payload=P.payload_fields("chunk_index", "version"))
    assert [P.posfair_fields(p.payload) for p in points] == [{"chunk_index": 2, "version": "v2", "format": 2}]
    assert set(writer.read_state()["sub/a.pdf"]) == {"v1", "v2"}
    assert writer.delete_stale("sub/a.pdf", "v2") == 2 and client.count("c").count == 1
