"""A tiny, random, CLIP-shaped image/text embedding for the offline example ``image_rerank.py``.

Images: 8×8 RGB thumbnail → fixed random projection; text: hashed bag of
words → another fixed random projection; both L2-normalised into the same
``dim``. It has no semantics (retrieval order is arbitrary) — it only lets
LlamaIndex's ``MultiModalVectorStoreIndex`` and Qdrant run end to end
without downloading CLIP. Swap in a real CLIP embedding in production.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import torch
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.embeddings.multi_modal_base import MultiModalEmbedding

from llamaindex_posfair.multimodal.images import load_image

__all__ = ["TinyRandomClipEmbedding"]


class TinyRandomClipEmbedding(MultiModalEmbedding):
    """Random CLIP-style embedding (see the module docstring).

    Example:
        >>> emb = TinyRandomClipEmbedding(dim=16)
        >>> len(emb.get_text_embedding("a red circle"))
        16
    """

    dim: int = Field(default=32, gt=0, description="Embedding dimension.")
    seed: int = Field(default=0, description="Seed of the random projections.")
    _img_proj: Any = PrivateAttr()
    _txt_proj: Any = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("model_name", "tiny-random-clip")
        super().__init__(**kwargs)
        g = torch.Generator().manual_seed(self.seed)
        self._img_proj = torch.randn(8 * 8 * 3, self.dim, generator=g)
        self._txt_proj = torch.randn(512, self.dim, generator=g)

    @classmethod
    def class_name(cls) -> str:
        return "TinyRandomClipEmbedding"

    def _norm(self, v: torch.Tensor) -> list[float]:
        return (v / v.norm().clamp_min(1e-12)).tolist()

    def _get_image_embedding(self, img_file_path: Any) -> list[float]:
        img = load_image(img_file_path).resize((8, 8))
        x = torch.tensor(list(img.getdata()), dtype=torch.float32).flatten() / 255.0 - 0.5
        return self._norm(x @ self._img_proj)

    async def _aget_image_embedding(self, img_file_path: Any) -> list[float]:
        return self._get_image_embedding(img_file_path)

    def _get_text_embedding(self, text: str) -> list[float]:
        x = torch.zeros(512)
        for w in re.findall(r"\w+", text.lower()):
            x[int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little") % 512] += 1.0
        return self._norm(x @ self._txt_proj)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)
