"""A folder of the user's text as training passages: the nodes the default pipeline would store.

Files are read and cut by the code ``posfair ingest`` uses (:func:`qdrant_tools.chunking.load_folder`,
:func:`qdrant_tools.chunking.chunk_text`), into passages that do not overlap: a neighbour is a hard negative
(docs/dump.md, "Label-free training from your own text").

Example:
    >>> corpus = read_corpus("my_docs/")                                   # doctest: +SKIP
    >>> passages = corpus_passages(corpus.train, model.tokenizer, 254)     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from llamaindex_posfair.dump.pairs import Passage, split_documents
from qdrant_tools.chunking import DEFAULT_EXTENSIONS, ChunkingConfig, SourceDocument, chunk_text, load_folder
from qdrant_tools.chunking import tokenizer_spans as _tokenizer_spans
from qdrant_tools.chunking import whitespace_spans as _whitespace_spans
from qdrant_tools.encoding import resolve_chunking

__all__ = ["SplitCorpus", "corpus_passages", "node_tokens", "read_corpus"]


@dataclass(frozen=True)
class SplitCorpus:
    """The documents of a folder, split by document into train and dev."""

    train: list[SourceDocument]
    dev: list[SourceDocument]
    skipped: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "train_documents": [d.doc_id for d in self.train],
            "dev_documents": [d.doc_id for d in self.dev],
            "skipped_files": self.skipped,
        }


def read_corpus(
    path: str | Path, dev_fraction: float, seed: int = 0, extensions: Iterable[str] = DEFAULT_EXTENSIONS
) -> SplitCorpus:
    """Read every .txt/.md file under ``path`` and split the documents into train and dev.

    Raises:
        ValueError: ``path`` is not a folder or file, or holds no readable document.
    """
    if not Path(path).exists():
        raise ValueError(f"--corpus {str(path)!r} does not exist; pass a folder of .txt/.md files")
    docs, skipped, _ = load_folder(path, tuple(extensions))
    docs = [d for d in docs if d.text.strip()]
    if not docs:
        raise ValueError(f"--corpus {str(path)!r} holds no readable .txt/.md file with text")
    train_ids, dev_ids = split_documents([d.doc_id for d in docs], dev_fraction, seed)
    by_id = {d.doc_id: d for d in docs}
    return SplitCorpus([by_id[i] for i in train_ids], [by_id[i] for i in dev_ids], [s.source for s in skipped])


class _TokenCounter:
    """What :func:`resolve_chunking` reads off an encoder, from a SentenceTransformer."""

    def __init__(self, model: Any) -> None:
        self.max_length = int(model.max_seq_length)
        self._tokenizer = model.tokenizer

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self._tokenizer(list(texts), add_special_tokens=True)["input_ids"]]


def node_tokens(model: Any) -> int:
    """The node size ``posfair ingest`` uses for ``model`` (a SentenceTransformer): 254 for MiniLM."""
    return resolve_chunking(_TokenCounter(model)).chunk_tokens


def corpus_passages(
    documents: Sequence[SourceDocument], tokenizer: Any, passage_tokens: int, show_progress: bool = False
) -> list[Passage]:
    """Cut documents into non-overlapping passages of ``passage_tokens`` tokens (special tokens not counted).

    Args:
        documents: The documents.
        tokenizer: A fast Hugging Face tokenizer (chunks follow its tokens); ``None`` = whitespace words.
        passage_tokens: Tokens per passage.
        show_progress: tqdm over documents.

    Raises:
        ValueError: ``passage_tokens`` is not a positive integer.
    """
    config = ChunkingConfig(chunk_tokens=passage_tokens, overlap_tokens=0)
    spans = _tokenizer_spans(tokenizer) if getattr(tokenizer, "is_fast", False) else _whitespace_spans
    out: list[Passage] = []
    for doc in tqdm(documents, desc="passages", unit="doc", disable=not show_progress):
        for chunk in chunk_text(doc.text, config, spans):
            if chunk.text.strip():
                out.append(Passage(doc.doc_id, chunk.index, chunk.text))
    return out
