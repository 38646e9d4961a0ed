"""End to end, offline, on CPU: image folder → Qdrant (LlamaIndex multimodal index)
→ retrieve N images → rerank with the attention-guided calibrator.

Everything here is tiny and random so it runs anywhere in seconds: a
generated folder of coloured shapes, a random CLIP-shaped embedding
(``TinyRandomClipEmbedding``, ``tiny_embedding.py`` beside this file) and a random 4-layer Qwen2-VL
(``build_tiny_adapter``) with the real Qwen tokenizer. The *rankings* are
therefore meaningless; the code path is the production one. For real use
swap in a CLIP embedding and ``QwenVLAdapter.from_pretrained("Qwen/Qwen2.5-VL-3B-Instruct")``.

Run:  python examples/image_rerank.py [--n 4] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tiny_embedding.py, beside this file


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4, help="images retrieved and reranked (default 4)")
    ap.add_argument("--out", type=Path, default=None, help="working folder (default: a temporary one)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()

    from llama_index.core import StorageContext
    from llama_index.core.indices.multi_modal.base import MultiModalVectorStoreIndex
    from llama_index.core.schema import ImageDocument, QueryBundle
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient
    from tiny_embedding import TinyRandomClipEmbedding

    from llamaindex_posfair.multimodal.calibrator import AttentionGuidedCalibrator
    from llamaindex_posfair.multimodal.images import load_image
    from llamaindex_posfair.multimodal.rerank import PosFairImageRerank
    from llamaindex_posfair.multimodal.tiny import build_tiny_adapter, write_synthetic_image_folder
    from llamaindex_posfair.multimodal.types import Candidates

    work = args.out or Path(tempfile.mkdtemp(prefix="posfair-mm-"))
    folder = write_synthetic_image_folder(work / "images", count=12)
    coco = json.loads((folder / "captions.json").read_text())
    captions = {im["file_name"]: a["caption"] for im, a in zip(coco["images"], coco["annotations"])}

    # 1. image folder -> Qdrant through LlamaIndex's multimodal index
    client = QdrantClient(location=":memory:")
    embed = TinyRandomClipEmbedding(dim=32)
    storage = StorageContext.from_defaults(
        vector_store=QdrantVectorStore(client=client, collection_name="text"),
        image_store=QdrantVectorStore(client=client, collection_name="images"),
    )
    docs = [ImageDocument(image_path=str(folder / f), metadata={"caption": c}) for f, c in captions.items()]
    index = MultiModalVectorStoreIndex.from_documents(
        docs, storage_context=storage, embed_model=embed, image_embed_model=embed
    )

    # 2. the MLLM adapter and a calibration fitted on 5 labelled samples x N cyclic shifts
    adapter = build_tiny_adapter("qwen2_vl")
    files = sorted(captions)
    rng = random.Random(0)
    samples = []
    for _ in range(5):
        pick = rng.sample(files, args.n)
        samples.append(Candidates(captions[pick[0]], tuple(load_image(folder / f) for f in pick), answer=0))
    state = AttentionGuidedCalibrator().fit(adapter, samples)
    cal_path = state.save(work / "calibration.safetensors")

    # 3. retrieve N and rerank with the calibrated MLLM
    rerank = PosFairImageRerank(scorer=adapter, calibration=cal_path, top_n=3)
    query = "a red circle on a blue background"
    retrieved = index.as_retriever(image_similarity_top_k=args.n).text_to_image_retrieve(query)
    reranked = rerank.postprocess_nodes(retrieved, query_bundle=QueryBundle(query))

    print(f"query: {query!r}")
    print("retrieved (Qdrant order):")
    for n in retrieved:
        print(f"  {Path(n.node.image_path).name}  retrieval={n.score:.3f}")
    print("reranked (calibrated probability):")
    for n in reranked:
        print(
            f"  {Path(n.node.image_path).name}  p={n.score:.3f}  "
            f"retrieval={n.node.metadata['retrieval_score']:.3f}  caption={n.node.metadata['caption']!r}"
        )
    print(f"calibration state: {cal_path}  ({time.perf_counter() - t0:.1f}s total)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
