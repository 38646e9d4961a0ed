"""What an audit measures: a retriever, seen as ``query -> ranked node texts``.

Two sorts of target (docs/audit.md, "Targets"): **existing** ones (:class:`RetrieverTarget`: a LlamaIndex retriever
or index, a ``QdrantVectorStore`` collection, a ``posfair ingest`` collection) must already hold the audited
documents, so planted probes cannot be used on them; **built** ones (:class:`BuiltTarget`) are recipes the audit
indexes over the documents itself, in memory. Whether a node holds a probe's evidence is decided from its text
(:func:`~llamaindex_posfair.audit.probes.evidence_in`), so the audit needs no document ids in common with a target.

Example:
    >>> from llamaindex_posfair.audit.targets import RetrieverTarget
    >>> # target = RetrieverTarget("my index", index)          # a VectorStoreIndex, or index.as_retriever()
    >>> # target = llamaindex_default(embed_model)             # SentenceSplitter 1024/200, built in memory
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field, PrivateAttr

from .probes import AuditInputError

__all__ = [
    "AuditTarget",
    "BuiltTarget",
    "OpenAICompatibleEmbedding",
    "Retrieved",
    "RetrieverTarget",
    "bundled_embedding",
    "check_text_payloads",
    "llamaindex_default",
    "node_id",
    "openai_endpoint",
    "posfair_collection",
    "posfair_store",
    "qdrant_collection",
]


@dataclass(frozen=True)
class Retrieved:
    """One retrieved node: its text (metadata left out), its source document and its score."""

    text: str
    doc_id: str | None = None
    score: float | None = None


class AuditTarget(ABC):
    """A retriever under audit.

    Attributes:
        name: the row label in the report.
        builds_index: whether the audit indexes the documents into it (then planted probes can be used).
    """

    name: str
    builds_index: bool = False

    def prepare(self, documents: Mapping[str, str], show_progress: bool = False) -> None:  # noqa: B027
        """Index ``documents`` (id -> text) when the target builds its own index; existing targets do nothing."""

    @abstractmethod
    def retrieve(self, query: str, top_k: int) -> list[Retrieved]:
        """The target's nodes for ``query``, best first (at most ``top_k`` are used)."""

    def close(self) -> None:  # noqa: B027
        """Release what the target opened."""


def _to_retrieved(nodes: Sequence[Any]) -> list[Retrieved]:
    from llama_index.core.schema import MetadataMode

    out = []
    for nws in nodes:
        node = getattr(nws, "node", nws)
        doc = node.ref_doc_id or (node.metadata or {}).get("file_path") or (node.metadata or {}).get("file_name")
        out.append(Retrieved(node.get_content(metadata_mode=MetadataMode.NONE), doc, getattr(nws, "score", None)))
    return out


class RetrieverTarget(AuditTarget):
    """A LlamaIndex retriever (``BaseRetriever``) or index (anything with ``as_retriever``), queried as it is.

    Args:
        name: the row label.
        retriever: a retriever, or an index (a retriever of ``similarity_top_k=top_k`` is made from it).
        on_close: called by :meth:`close` (e.g. to close a client the target opened).

    Raises:
        TypeError: ``retriever`` has neither ``retrieve`` nor ``as_retriever``.

    Example:
        >>> from llama_index.core import Document, VectorStoreIndex
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> index = VectorStoreIndex.from_documents([Document(text="hello")], embed_model=MockEmbedding(embed_dim=8))
        >>> [r.text for r in RetrieverTarget("mock", index).retrieve("hi", 3)]
        ['hello']
    """

    def __init__(self, name: str, retriever: Any, on_close: Callable[[], None] | None = None) -> None:
        if not (hasattr(retriever, "as_retriever") or hasattr(retriever, "retrieve")):
            raise TypeError(
                f"target {name!r}: expected a LlamaIndex retriever or index, got {type(retriever).__name__}; pass "
                "index.as_retriever(similarity_top_k=20) or the index itself"
            )
        self.name = name
        self._source = retriever
        self._by_k: dict[int, Any] = {}
        self._on_close = on_close

    def _retriever(self, top_k: int) -> Any:
        if not hasattr(self._source, "as_retriever"):
            return self._source
        if top_k not in self._by_k:
            self._by_k[top_k] = self._source.as_retriever(similarity_top_k=top_k)
        return self._by_k[top_k]

    def retrieve(self, query: str, top_k: int) -> list[Retrieved]:
        return _to_retrieved(self._retriever(top_k).retrieve(query))[:top_k]

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()
            self._on_close = None


@dataclass
class BuiltTarget(AuditTarget):
    """A recipe the audit indexes over the documents: ``build(documents) -> retriever or index``.

    Args:
        name: the row label.
        build: takes LlamaIndex ``Document`` objects (``id_`` = document id, no metadata) and returns a
            retriever or an index.

    Example:
        >>> from llama_index.core import VectorStoreIndex
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> t = BuiltTarget("mock", lambda docs: VectorStoreIndex(docs, embed_model=MockEmbedding(embed_dim=8)))
        >>> t.prepare({"a.txt": "hello"}); [r.doc_id for r in t.retrieve("hi", 5)]
        ['a.txt']
    """

    name: str
    build: Callable[[list[Any]], Any]
    builds_index: bool = True
    _inner: RetrieverTarget | None = field(default=None, init=False, repr=False)

    def prepare(self, documents: Mapping[str, str], show_progress: bool = False) -> None:
        from llama_index.core import Document

        docs = [Document(text=text, id_=doc_id) for doc_id, text in documents.items()]
        self._inner = RetrieverTarget(self.name, self.build(docs))

    def retrieve(self, query: str, top_k: int) -> list[Retrieved]:
        if self._inner is None:
            raise RuntimeError(f"target {self.name!r} is not built yet; call prepare(documents) first")
        return self._inner.retrieve(query, top_k)


# ------------------------------------------------------------------ built recipes
def node_id(i: int, doc: Any) -> str:
    """A node's id from its document and its place (``"a.txt#3"``): a rebuilt index breaks score ties the same way."""
    return f"{doc.id_}#{i}"


def bundled_embedding(model_name: str | None = None, **kwargs: Any) -> Any:
    """A model loaded as a LlamaIndex user loads it: ``HuggingFaceEmbedding`` (default: the bundled all-MiniLM-L6-v2).

    Raises:
        ImportError: ``llama-index-embeddings-huggingface`` is not installed (the ``bench`` extra).
    """
    try:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    except ImportError as exc:
        raise ImportError(
            "auditing LlamaIndex's default pipeline needs llama-index-embeddings-huggingface; "
            "pip install 'llamaindex-posfair[bench]'"
        ) from exc
    from llamaindex_posfair.encoders.models import BUNDLED_MINILM, resolve_model_path

    return HuggingFaceEmbedding(model_name=model_name or resolve_model_path(BUNDLED_MINILM), **kwargs)


def llamaindex_default(
    embed_model: Any = None, chunk_size: int = 1024, chunk_overlap: int = 200, name: str | None = None
) -> BuiltTarget:
    """LlamaIndex's default pipeline: ``SentenceSplitter(chunk_size, chunk_overlap)`` into a ``VectorStoreIndex``.

    Args:
        embed_model: a LlamaIndex embedding (default :func:`bundled_embedding`, which truncates at the model's
            own window: 256 tokens for all-MiniLM-L6-v2).
        chunk_size / chunk_overlap: the splitter's sizes (LlamaIndex's defaults: 1024/200).
    """

    def build(docs: list[Any]) -> Any:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.node_parser import SentenceSplitter

        splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap, id_func=node_id)
        nodes = splitter.get_nodes_from_documents(docs)
        return VectorStoreIndex(nodes, embed_model=embed_model or bundled_embedding(), show_progress=False)

    return BuiltTarget(name or f"llamaindex-default (SentenceSplitter {chunk_size}/{chunk_overlap})", build)


def posfair_store(name: str = "posfair (PosFairVectorStore)", spec: Any = None) -> BuiltTarget:
    """Posfair's default pipeline through LlamaIndex: ``PosFairNodeParser`` nodes in a ``VectorStoreIndex`` over
    :class:`~llamaindex_posfair.PosFairVectorStore` (embedded, in memory).

    Args:
        spec: the encoder (an ``EncoderSpec``; default: the default recipe's, as ``posfair ingest`` uses).
    """

    def build(docs: list[Any]) -> Any:
        from llama_index.core import StorageContext, VectorStoreIndex

        from llamaindex_posfair.integrations.embedding import PosFairEmbedding
        from llamaindex_posfair.integrations.node_parser import PosFairNodeParser
        from llamaindex_posfair.integrations.recipe import Recipe
        from llamaindex_posfair.integrations.vector_store import PosFairVectorStore
        from qdrant_tools.store import open_store

        encoder = (spec or Recipe.default().encoder_spec()).load()
        embed = PosFairEmbedding(encoder=encoder, embed_batch_size=64)
        nodes = PosFairNodeParser.from_embed_model(embed).get_nodes_from_documents(docs)
        store = PosFairVectorStore("audit", client=open_store(":memory:"), embed_model=embed)
        context = StorageContext.from_defaults(vector_store=store)
        return VectorStoreIndex(nodes, storage_context=context, embed_model=embed, show_progress=False)

    return BuiltTarget(name, build)


class OpenAICompatibleEmbedding(BaseEmbedding):
    """Embeddings from an OpenAI-compatible ``POST {url}/embeddings`` endpoint (TEI, vLLM, ``posfair serve``, ...).

    Args:
        url: the API base, e.g. ``http://localhost:8080/v1``.
        model_name: the ``model`` field sent.
        api_key: sent as a bearer token (optional).
        timeout_s: seconds per request.

    Example:
        >>> e = OpenAICompatibleEmbedding(url="http://localhost:8080/v1", model_name="m")
        >>> e.class_name()
        'OpenAICompatibleEmbedding'
    """

    url: str = Field(description="API base URL; requests go to {url}/embeddings.")
    timeout_s: float = Field(default=60.0, gt=0, description="Seconds per request.")
    _api_key: str | None = PrivateAttr(default=None)

    def __init__(self, url: str, model_name: str, api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(url=url.rstrip("/"), model_name=model_name, **kwargs)
        self._api_key = api_key

    @classmethod
    def class_name(cls) -> str:
        return "OpenAICompatibleEmbedding"

    def _post(self, texts: list[str]) -> list[list[float]]:
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        response = httpx.post(
            f"{self.url}/embeddings",
            json={"model": self.model_name, "input": texts},
            headers=headers,
            timeout=self.timeout_s,
        )
        if response.status_code != 200:
            raise AuditInputError(
                f"embeddings endpoint {self.url}/embeddings answered {response.status_code}: {response.text[:200]}"
            )
        rows = sorted(response.json()["data"], key=lambda r: r["index"])
        return [r["embedding"] for r in rows]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._post([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._post([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._post(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def openai_endpoint(
    url: str, model_name: str, chunk_size: int = 1024, chunk_overlap: int = 200, api_key: str | None = None
) -> BuiltTarget:
    """An OpenAI-compatible embeddings endpoint with a ``SentenceSplitter`` chunking recipe, built in memory."""
    embed = OpenAICompatibleEmbedding(url=url, model_name=model_name, api_key=api_key)
    return llamaindex_default(
        embed, chunk_size, chunk_overlap, name=f"{model_name} @ {url} ({chunk_size}/{chunk_overlap})"
    )


# ------------------------------------------------------------------ existing collections
def _payload_text(payload: Mapping[str, Any]) -> str | None:
    content = payload.get("_node_content")
    if isinstance(content, str):
        try:
            text = json.loads(content).get("text")
        except (json.JSONDecodeError, AttributeError):
            text = None
        if text:
            return str(text)
    text = payload.get("text")
    return str(text) if text else None


def check_text_payloads(client: Any, collection: str, sample: int = 8) -> None:
    """Raise unless the first points of ``collection`` carry their node text (LlamaIndex's ``_node_content``).

    Raises:
        AuditInputError: the collection is empty, or none of ``sample`` points holds text.
    """
    records, _ = client.scroll(collection, limit=sample, with_payload=True, with_vectors=False)
    if not records:
        raise AuditInputError(f"collection {collection!r} holds no points; index your documents into it first")
    if not any(_payload_text(r.payload or {}) for r in records):
        keys = sorted({k for r in records for k in (r.payload or {})})
        raise AuditInputError(
            f"collection {collection!r} holds no node text in its payloads (first {len(records)} points, payload keys "
            f"{keys}); the audit reads each hit's text to see whether it holds the evidence. Write the collection "
            "with LlamaIndex's QdrantVectorStore, which stores the text (stores_text=True), or audit the index object"
        )


def qdrant_collection(
    collection: str,
    embed_model: Any,
    *,
    path: str | None = None,
    url: str | None = None,
    api_key: str | None = None,
    client: Any = None,
    name: str | None = None,
) -> RetrieverTarget:
    """An existing collection written by LlamaIndex's ``QdrantVectorStore``, queried as it is (no re-indexing).

    Args:
        collection: its name.
        embed_model: the LlamaIndex embedding it was written with (queries are embedded with it).
        path / url / api_key: a local ``qdrant-client`` folder or a server; or pass ``client``.

    Raises:
        AuditInputError: the collection does not exist, is empty, or stores no text.
    """
    from llama_index.core import VectorStoreIndex
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    if client is None:
        if (path is None) == (url is None):
            raise ValueError(f"pass one of path= and url= (got path={path!r}, url={url!r}), or client=")
        key = api_key or os.environ.get("QDRANT_API_KEY")
        client = QdrantClient(path=path) if path else QdrantClient(url=url, api_key=key)
        owned = client
    else:
        owned = None
    try:
        if not client.collection_exists(collection):
            names = sorted(c.name for c in client.get_collections().collections)
            raise AuditInputError(f"no collection {collection!r} at {path or url or 'the client'}; it has {names}")
        check_text_payloads(client, collection)
        store = QdrantVectorStore(collection_name=collection, client=client)
        index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    return RetrieverTarget(name or f"qdrant:{collection}", index, on_close=owned.close if owned else None)


def posfair_collection(
    collection: str, *, path: str | None = None, url: str | None = None, name: str | None = None, **kwargs: Any
) -> RetrieverTarget:
    """A collection written by ``posfair ingest`` (or ``PosFairVectorStore``), searched with its recorded recipe.

    ``kwargs``: further :class:`~llamaindex_posfair.PosFairRetriever` keywords (``spec``, ``endpoint``, ...).

    Raises:
        AuditInputError: the storage or the collection does not exist.
    """
    from llamaindex_posfair.integrations.retriever import PosFairRetriever

    try:
        retriever = PosFairRetriever.from_path(path or "", collection, url=url, similarity_top_k=100, **kwargs)
    except LookupError as exc:
        raise AuditInputError(f"posfair collection {collection!r}: {exc}") from None
    return RetrieverTarget(name or f"posfair:{collection}", retriever, on_close=retriever.close)
