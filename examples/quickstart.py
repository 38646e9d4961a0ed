"""End to end: ingest examples/data into the embedded Qdrant store, query with and without the reranker.

Runs offline on CPU in well under a minute with the bundled all-MiniLM-L6-v2:

    HF_HUB_OFFLINE=1 python examples/quickstart.py

1. ``qdrant_tools.ingest_path`` writes a "vanilla" and a "calibrated" named
   vector per chunk into one collection of the embedded store
   (``qdrant_tools.store.open_store``: Qdrant Edge in a folder; idempotent: run
   it twice, nothing is written the second time).
2. LlamaIndex retrieves through ``QdrantVectorStore`` + ``PosFairEmbedding``:
   first on the vanilla vector, then the same candidates re-scored by
   ``PositionFairRerank`` (position fairness without re-indexing), then
   directly on the calibrated vector.
3. A constructed case where position matters (the same evidence at the start
   or the end of a passage): the plain model ranks the late-evidence passage
   third, the calibrated reranker first.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parent / "data"
QUERY = "Who was the last keeper of the Gull Rock light, and for how long?"


def show(title: str, nodes) -> None:
    print(f"\n{title}")
    for i, n in enumerate(nodes, 1):
        md = n.node.metadata
        text = " ".join(n.node.get_content().split())
        print(f"  {i}. {n.score:.4f}  {md['doc_id']} [{md['start_char']}:{md['end_char']}]  {text[:90]}...")


def main() -> int:
    from llama_index.core import VectorStoreIndex
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from llamaindex_posfair import (
        BUNDLED_MINILM,
        CalibrationConfig,
        PosFairEmbedding,
        PosFairEncoder,
        PositionFairRerank,
    )
    from llamaindex_posfair.integrations import CalibrationView
    from qdrant_tools import IngestConfig, ingest_path
    from qdrant_tools.store import open_store

    encoder = PosFairEncoder(BUNDLED_MINILM, calibration=CalibrationConfig(basket_size=128, strength=0.5))
    plain = CalibrationView(encoder, None)  # same loaded model, calibration off

    with tempfile.TemporaryDirectory() as tmp:
        client = open_store(os.path.join(tmp, "qdrant"))  # embedded Qdrant Edge, on disk
        vectors = {"vanilla": plain, "calibrated": encoder}
        report = ingest_path(client, "quickstart", DATA, vectors, IngestConfig(show_progress=False))
        print(report.summary())
        again = ingest_path(client, "quickstart", DATA, vectors, IngestConfig(show_progress=False))
        print(f"second run: {again.chunks_written} chunks written, {len(again.unchanged)} files unchanged")

        def retriever(vector: str, enc, k: int):
            # QdrantVectorStore takes the embedded store where it expects a QdrantClient (sync calls)
            store = QdrantVectorStore(client=client, collection_name="quickstart", dense_vector_name=vector)
            index = VectorStoreIndex.from_vector_store(store, embed_model=PosFairEmbedding(encoder=enc))
            return index.as_retriever(similarity_top_k=k)

        print(f"\nquery: {QUERY!r}")
        candidates = retriever("vanilla", plain, 6).retrieve(QUERY)
        show("vanilla vector (no reranker):", candidates[:3])
        rerank = PositionFairRerank(top_n=3, encoder=encoder, keep_retrieval_score=True)
        show("vanilla vector + PositionFairRerank:", rerank.postprocess_nodes(candidates, query_str=QUERY))
        show("calibrated vector:", retriever("calibrated", encoder, 3).retrieve(QUERY))
        client.close()

    # A constructed case where position matters: the same evidence at the start or the end of a passage.
    from llama_index.core.schema import NodeWithScore, TextNode

    filler = " ".join((DATA / "sourdough.txt").read_text().split()[:110])
    bees = (DATA / "honeybees.txt").read_text().split()
    needle = (
        "The last resident keeper of the Gull Rock lighthouse was Ada Pennock, who kept the light for nineteen years."
    )
    passages = {
        "evidence-first": f"{needle} {filler}",
        "evidence-last": f"{filler} {needle}",
        "distractor-1": "Gull Rock lighthouse stands on a granite island off the northern coast. "
        + " ".join(bees[:110]),
        "distractor-2": "Lighthouse keepers once trimmed wicks and wound clockwork every night. "
        + " ".join(bees[20:130]),
    }
    question = "Who was the last keeper of the Gull Rock lighthouse?"
    for label, enc in [("plain model", plain), ("position-fair (calibrated)", encoder)]:
        nodes = [NodeWithScore(node=TextNode(text=t, id_=k)) for k, t in passages.items()]
        ranked = PositionFairRerank(top_n=4, encoder=enc).postprocess_nodes(nodes, query_str=question)
        print(f"\nrerank with {label}: " + ", ".join(f"{n.node.node_id} {n.score:.3f}" for n in ranked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
