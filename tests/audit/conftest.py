"""Small documents and model-free embeddings for the audit's tests."""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field

DIM = 256


def made_up_words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ve", "tor", "sa", "ni", "pel", "ru", "dan", "ko", "fi", "zu", "mar", "te", "bo"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(3)))
    return sorted(words)


def make_documents(n_docs: int = 40, sentences: int = 24, seed: int = 0) -> dict[str, str]:
    """``n_docs`` documents of ``sentences`` sentences of 8 made-up words: every sentence is unique."""
    rng = random.Random(seed)
    vocab = made_up_words(3000, seed)
    docs = {}
    for d in range(n_docs):
        text = " ".join(" ".join(rng.choice(vocab) for _ in range(8)).capitalize() + "." for _ in range(sentences))
        docs[f"doc{d:02d}.txt"] = text
    return docs


class HashEmbedding(BaseEmbedding):
    """Bag of hashed words; ``max_words`` > 0 keeps only a text's first words (a truncating, position-blind model)."""

    max_words: int = Field(default=0, ge=0)

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def _vec(self, text: str) -> list[float]:
        words = [w.strip(".,?").lower() for w in text.split()]
        if self.max_words:
            words = words[: self.max_words]
        v = [0.0] * DIM
        for w in words:
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % DIM] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vec(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)


def splitter_target(name: str, max_words: int = 0, chunk_size: int = 1024) -> Any:
    """A built target: SentenceSplitter nodes embedded by :class:`HashEmbedding`."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter

    from llamaindex_posfair.audit.targets import BuiltTarget, node_id

    def build(docs: list[Any]) -> Any:
        nodes = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=0, id_func=node_id).get_nodes_from_documents(docs)
        return VectorStoreIndex(nodes, embed_model=HashEmbedding(max_words=max_words))

    return BuiltTarget(name, build)


@pytest.fixture(scope="session")
def documents() -> dict[str, str]:
    return make_documents()
