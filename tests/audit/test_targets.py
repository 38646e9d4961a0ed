"""Targets: an existing LlamaIndex Qdrant collection audited as it is; collections the audit cannot use."""

from __future__ import annotations

import pytest
from qdrant_client import QdrantClient, models

from llamaindex_posfair.audit import AuditInputError, ProbeConfig, build_probes, run_audit
from llamaindex_posfair.audit.targets import RetrieverTarget, qdrant_collection

from .conftest import HashEmbedding, splitter_target


def _write_llamaindex_collection(path: str, documents: dict[str, str]) -> int:
    """Index ``documents`` as a LlamaIndex user does (QdrantVectorStore, SentenceSplitter); return the point count."""
    from llama_index.core import Document, StorageContext, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    client = QdrantClient(path=path)
    store = QdrantVectorStore(collection_name="docs", client=client)
    docs = [Document(text=t, id_=d) for d, t in documents.items()]
    nodes = SentenceSplitter(chunk_size=1024, chunk_overlap=0).get_nodes_from_documents(docs)
    VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=HashEmbedding()
    )
    count = client.count("docs").count
    client.close()
    return count


def test_an_existing_qdrant_collection_is_audited_without_reindexing(tmp_path, documents):
    path = str(tmp_path / "qdrant")
    count = _write_llamaindex_collection(path, documents)
    probes = build_probes(documents, ProbeConfig(per_group=6, seed=2))
    target = qdrant_collection("docs", HashEmbedding(), path=path)
    report = run_audit(documents, [target, splitter_target("built in memory")], probes, top_k=10)
    existing, built = report.results
    assert existing.ndcg() == pytest.approx(built.ndcg())
    assert min(report.summary(existing)["ndcg@10"].values()) > 0.6
    client = QdrantClient(path=path)
    assert client.count("docs").count == count  # nothing written
    client.close()


def test_a_collection_without_text_payloads_is_a_clear_error(tmp_path):
    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection("bare", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE))
    client.upsert("bare", [models.PointStruct(id=1, vector=[1.0, 0, 0, 0], payload={"title": "a"})])
    with pytest.raises(AuditInputError, match=r"holds no node text in its payloads .*\['title'\]"):
        qdrant_collection("bare", HashEmbedding(), client=client)
    with pytest.raises(AuditInputError, match="no collection 'missing'"):
        qdrant_collection("missing", HashEmbedding(), client=client)
    client.close()


def test_an_empty_collection_is_a_clear_error(tmp_path):
    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection("empty", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE))
    with pytest.raises(AuditInputError, match="holds no points"):
        qdrant_collection("empty", HashEmbedding(), client=client)
    client.close()


def test_a_retriever_target_needs_a_retriever():
    with pytest.raises(TypeError, match="expected a LlamaIndex retriever or index, got int"):
        RetrieverTarget("x", 3)


def test_an_openai_compatible_endpoint_is_called_with_the_texts(monkeypatch):
    import httpx

    from llamaindex_posfair.audit.targets import OpenAICompatibleEmbedding

    calls = []

    def post(url, json, headers, timeout):
        calls.append((url, json["model"], list(json["input"]), headers))
        data = [{"index": i, "embedding": HashEmbedding()._vec(t)} for i, t in reversed(list(enumerate(json["input"])))]
        return httpx.Response(200, json={"data": data})

    monkeypatch.setattr(httpx, "post", post)
    embed = OpenAICompatibleEmbedding(url="http://host/v1/", model_name="m", api_key="k")
    vectors = embed.get_text_embedding_batch(["a b", "c"])
    assert vectors == [HashEmbedding()._vec("a b"), HashEmbedding()._vec("c")]
    assert calls == [("http://host/v1/embeddings", "m", ["a b", "c"], {"Authorization": "Bearer k"})]


def test_an_endpoint_error_names_the_status(monkeypatch):
    import httpx

    from llamaindex_posfair.audit.targets import OpenAICompatibleEmbedding

    monkeypatch.setattr(httpx, "post", lambda *a, **k: httpx.Response(404, text="no such model"))
    with pytest.raises(AuditInputError, match="answered 404: no such model"):
        OpenAICompatibleEmbedding(url="http://host/v1", model_name="m").get_query_embedding("q")


def test_a_posfair_ingest_collection_is_audited_as_stored(tmp_path, fake_encoder_factory):
    from pathlib import Path

    from llamaindex_posfair.audit.run import read_documents
    from llamaindex_posfair.audit.targets import posfair_collection
    from qdrant_tools.ingest import IngestConfig, ingest_path
    from qdrant_tools.store import open_store

    fake_encoder = fake_encoder_factory(max_length=32)
    example_data = Path(__file__).resolve().parents[2] / "examples" / "data"
    path = str(tmp_path / "store")
    client = open_store(path)
    ingest_path(client, "demo", example_data, {"calibrated": fake_encoder}, IngestConfig(show_progress=False))
    count = client.count("demo").count
    client.close()
    texts = read_documents(example_data)
    probes = build_probes(texts, ProbeConfig(per_group=2, seed=0, min_words=4))
    target = posfair_collection("demo", path=path, encoder=fake_encoder)
    report = run_audit(texts, [target], probes, top_k=10)
    (result,) = report.results
    assert set(result.outcomes) == {p.id for p in probes.probes}
    assert sum(o.rank is not None for o in result.outcomes.values()) >= len(probes.probes) // 2
    client = open_store(path)
    assert client.count("demo").count == count
    client.close()
    with pytest.raises(AuditInputError, match="posfair collection 'nope'"):
        posfair_collection("nope", path=path, encoder=fake_encoder)
