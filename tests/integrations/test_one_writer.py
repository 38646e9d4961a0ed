"""One writer: a chunk ``posfair ingest`` writes and the same text added as a node to ``PosFairVectorStore`` are
planned by one function (``qdrant_tools.encoding.plan_chunk``) into payloads built by one function
(``qdrant_tools.payload.build_payload``), with the same posfair fields but for the version."""

from __future__ import annotations

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
from qdrant_tools import payload as P
from qdrant_tools.chunking import SourceDocument
from qdrant_tools.ingest import IngestConfig, ingest_documents

TEXT = (
    "The moon raises two tidal bulges in the ocean. Honeybees dance to share the direction of flowers. "
    "Harbours silt up where rivers slow down. Lighthouses warn ships away from the reefs. "
    "Fishing boats return at dusk with the tide."
)
METADATA = {"file_path": "/data/tides.md", "file_name": "tides.md", "team": "docs"}


def _scrolled(client, collection):
    points, _ = client.scroll(collection, limit=10, with_payload=True)
    return [p.payload for p in points]


@pytest.mark.parametrize("engine", ["edge", "local"])
def test_a_chunk_ingested_and_the_same_text_added_as_a_node_get_one_payload_shape(make_fake, monkeypatch, engine):
    from qdrant_tools.store import open_store

    built = []
    build_payload = P.build_payload

    def spy(*args, **kwargs):
        built.append(build_payload(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(P, "build_payload", spy)
    embed = PosFairEmbedding(encoder=make_fake(dimension=64, max_length=64, calibration=None))
    node = TextNode(id_="n1", text=TEXT, metadata=dict(METADATA), start_char_idx=0, end_char_idx=len(TEXT))
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="tides.md")
    node.embedding = embed.get_text_embedding(TEXT)
    client = open_store(":memory:", engine=engine)
    try:
        store = PosFairVectorStore("nodes", client=client, embed_model=embed)
        store.add([node])
        encoder = store._encoder  # the store's encoders and point encoding: the ingestion writes the same layout
        config = IngestConfig(show_progress=False, layout=encoder.encoding.layout, sparse=encoder.encoding.sparse)
        doc = SourceDocument("tides.md", TEXT, "/data/tides.md", node.hash, metadata=dict(METADATA))
        ingest_documents(client, "chunks", [doc], encoder.vectors, config)
        [added], [ingested] = _scrolled(client, "nodes"), _scrolled(client, "chunks")
    finally:
        client.close()
    assert built == [added, ingested]  # both payloads come from the one builder, as stored
    fields = P.posfair_fields(added)
    assert fields[P.SUBCHUNK_SPANS] and len(fields[P.SUBCHUNK_SPANS]) > 1 and fields[P.N_TOKENS] > 0
    assert fields[P.VERSION] != P.posfair_fields(ingested)[P.VERSION]
    same = {**P.posfair_fields(ingested), P.VERSION: fields[P.VERSION]}
    assert same == fields  # every posfair field but the version: offsets, tokens, truncation, spans, key, prints
    assert list(added) == list(ingested)  # the same top-level keys: metadata flat, node record, _posfair
    assert {k: added[k] for k in METADATA} == {k: ingested[k] for k in METADATA} == METADATA
    assert added[P.DOC_ID] == added[P.REF_DOC_ID] == ingested[P.DOC_ID] == ingested[P.REF_DOC_ID] == "tides.md"
