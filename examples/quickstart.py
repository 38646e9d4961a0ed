"""End to end, the idempotent way: ingest examples/data, retrieve in a LlamaIndex query engine, rerank another index.

Runs offline on CPU in about a minute with the bundled all-MiniLM-L6-v2:

    HF_HUB_OFFLINE=1 python examples/quickstart.py

1. ``qdrant_tools.ingest_path`` (the ingestion library under ``posfair ingest``; the command also reads
   PDF, Word and HTML through LlamaIndex's readers and records its recipe) writes a sub-chunk layout into the
   embedded Qdrant Edge store: one point per 254-token
   node with its node vector and its sentence-aligned sub-chunk vectors. Point
   ids are deterministic, so the second run writes nothing.
2. ``PosFairRetriever`` answers through that collection (node vector and best
   sub-chunk, one ``query_points`` call; each hit scored by its best sub-chunk's
   cosine) inside LlamaIndex's ``RetrieverQueryEngine`` (a ``MockLLM`` here: plug
   in yours).
3. Rerank-only mode for an index built with plain LlamaIndex: deterministic node
   ids (so re-running does not duplicate hits), then ``PosFairRerank``
   scoring each candidate by its best sub-chunk. Every store is closed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parent / "data"
QUERY = "How far can the water level change in the Bay of Fundy?"


def show(title: str, nodes) -> None:
    print(f"\n{title}")
    for i, n in enumerate(nodes, 1):
        md = n.node.metadata
        text = " ".join(n.node.get_content().split())
        print(f"  {i}. {n.score:.4f}  {md.get('file_name', md.get('doc_id', '?'))}  {text[:80]}...")


def stable_id(i: int, doc) -> str:
    """Node ids from the document id and position: re-running the pipeline overwrites, never duplicates."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{doc.id_}#{i}"))


def main() -> int:
    from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
    from llama_index.core.llms import MockLLM
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from llamaindex_posfair import (
        BUNDLED_MINILM,
        PosFairEmbedding,
        PosFairEncoder,
        PosFairRerank,
        PosFairRetriever,
    )
    from qdrant_tools import IngestConfig, ingest_path
    from qdrant_tools.store import open_store

    encoder = PosFairEncoder(BUNDLED_MINILM)  # the default pipeline's encoder: plain (sub-chunks, uncalibrated)
    with tempfile.TemporaryDirectory() as tmp:
        client = open_store(os.path.join(tmp, "qdrant"))  # embedded Qdrant Edge, on disk
        try:
            for run in (1, 2):
                report = ingest_path(
                    client, "quickstart", DATA, {"vanilla": encoder}, IngestConfig(show_progress=False)
                )
                print(f"run {run}: {report.chunks_written} nodes written, {len(report.unchanged)} files unchanged")
            with PosFairRetriever(client, "quickstart", encoder=encoder, similarity_top_k=3) as retriever:
                engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
                show(f"query engine sources for {QUERY!r}:", engine.query(QUERY).source_nodes)
        finally:
            client.close()

        # Rerank-only: an index built by plain LlamaIndex, with ids that make re-running idempotent.
        docs = SimpleDirectoryReader(str(DATA), filename_as_id=True).load_data()
        client = open_store(os.path.join(tmp, "llamaindex"))
        try:
            store = QdrantVectorStore(client=client, collection_name="docs")
            for _ in (1, 2):
                index = VectorStoreIndex.from_documents(
                    docs,
                    embed_model=PosFairEmbedding(encoder=encoder),
                    transformations=[SentenceSplitter(chunk_size=250, chunk_overlap=25, id_func=stable_id)],
                    storage_context=StorageContext.from_defaults(vector_store=store),
                )
            print(f"\nLlamaIndex collection after two runs: {client.count('docs').count} points (no duplicates)")
            candidates = index.as_retriever(similarity_top_k=10).retrieve(QUERY)
            rerank = PosFairRerank(top_n=3, encoder=encoder, scoring="subchunks")
            show(
                "PosFairRerank(scoring='subchunks') over its top 10:",
                rerank.postprocess_nodes(candidates, query_str=QUERY),
            )
        finally:
            client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
