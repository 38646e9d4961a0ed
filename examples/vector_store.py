"""Position-fair retrieval in a plain LlamaIndex app: swap in PosFairVectorStore.

Runs offline with the bundled all-MiniLM-L6-v2 and the embedded Qdrant Edge store::

    python examples/vector_store.py [DATA_DIR] [--store DIR]

1. reads a folder with LlamaIndex's ``SimpleDirectoryReader``;
2. indexes it with ``VectorStoreIndex`` over ``PosFairVectorStore`` (posfair's nodes, sub-chunks and BM25);
3. retrieves, with and without ``MetadataFilters``, and shows each hit's evidence sentence;
4. re-runs an ``IngestionPipeline`` with a docstore: nothing is written twice;
5. deletes one document with ``index.delete_ref_doc``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
QUESTION = "How far can the water level change in the Bay of Fundy?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", default=str(HERE / "data"), help="folder of documents")
    parser.add_argument("--store", default=None, help="embedded storage folder (default: a temporary one)")
    args = parser.parse_args(argv)

    from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
    from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
    from llama_index.core.storage.docstore import SimpleDocumentStore
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters

    from llamaindex_posfair import PosFairEmbedding, PosFairNodeParser, PosFairVectorStore

    folder = args.store or tempfile.mkdtemp(prefix="posfair-example-")
    embed = PosFairEmbedding()  # the bundled all-MiniLM-L6-v2, plain: the shipped default
    store = PosFairVectorStore("docs", path=folder, embed_model=embed)
    docs = SimpleDirectoryReader(args.data, filename_as_id=True).load_data()

    docstore = SimpleDocumentStore()
    pipeline = IngestionPipeline(
        transformations=[PosFairNodeParser.from_embed_model(embed), embed],
        vector_store=store,
        docstore=docstore,
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )
    written = pipeline.run(documents=docs)
    print(f"indexed {len(docs)} documents as {len(written)} nodes into {folder}")
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed)

    for hit in index.as_retriever(similarity_top_k=3).retrieve(QUESTION):
        meta = hit.node.metadata
        start = meta["evidence_start_char"] - hit.node.start_char_idx
        evidence = " ".join(hit.node.text[start : start + 90].split())  # the best sub-chunk's opening words
        print(f"{hit.score:.4f}  {meta['file_name']:<15} …{evidence}…")  # score: the best sub-chunk's cosine

    only = MetadataFilters(filters=[MetadataFilter(key="file_name", value="lighthouse.md")])
    files = {
        h.node.metadata["file_name"] for h in index.as_retriever(similarity_top_k=3, filters=only).retrieve(QUESTION)
    }
    print(f"with a filter on file_name: {sorted(files)}")

    again = IngestionPipeline(
        transformations=[PosFairNodeParser.from_embed_model(embed), embed],
        vector_store=store,
        docstore=docstore,
        docstore_strategy=DocstoreStrategy.UPSERTS,
    ).run(documents=docs)
    print(f"re-run of the pipeline: {len(again)} nodes written")

    tides = next(d.doc_id for d in docs if d.metadata["file_name"] == "tides.md")
    index.delete_ref_doc(tides)
    left = {n.metadata["file_name"] for n in store.get_nodes()}
    print(f"after delete_ref_doc(tides.md): {len(left)} files left, tides.md among them: {'tides.md' in left}")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
