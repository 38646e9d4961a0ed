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
