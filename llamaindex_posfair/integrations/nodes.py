"""LlamaIndex nodes <-> posfair points: the payload a node is stored with, and the node a hit becomes.

Both writers plan every point with :func:`qdrant_tools.encoding.plan_chunk`, so ``posfair ingest`` (a document's
chunks) and :class:`~llamaindex_posfair.integrations.vector_store.PosFairVectorStore` (:func:`planned_nodes`) store
the same payload (format 2; its fields: docs/integration.md, "Collection layout"). Every reader turns a hit into a
node with :func:`hit_to_node`; points of payload format 1 (flat posfair fields) read as they did.

Example:
    >>> from qdrant_tools.search import Hit
    >>> node = hit_to_node(Hit("0b4d1f3e-6a41-4f2b-9a59-4e0d2b1c7f10", 0.5, {"text": "tides", "doc_id": "a.md"}))
    >>> node.node.ref_doc_id, node.node.text
    ('a.md', 'tides')
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from qdrant_tools import payload as P
from qdrant_tools.chunking import Chunk, SourceDocument
from qdrant_tools.encoding import PlannedChunk, PointEncoding, plan_chunk
from qdrant_tools.ids import node_point_id, point_id

__all__ = ["NODE_METADATA", "check_embeddings", "hit_to_node", "planned_nodes", "without_empty"]

logger = logging.getLogger(__name__)

#: Payload fields shown as node metadata of a point ``posfair ingest`` wrote in payload format 1.
NODE_METADATA = (P.DOC_ID, P.FILE_NAME, P.SOURCE, P.CHUNK_INDEX, P.START_CHAR, P.END_CHAR)
#: Metadata posfair adds to a returned node that stays out of LLM prompts and embeddings.
EVIDENCE_KEYS = ("evidence_start_char", "evidence_end_char")
#: Metadata of a returned node holding the value its dense and BM25 rankings were fused to (the node's
#: score is its relevance in [0, 1]; this is what ordered it).
FUSION_SCORE = "fusion_score"
_HIDDEN_FROM_LLM = (P.SOURCE, P.CHUNK_INDEX, P.START_CHAR, P.END_CHAR, *EVIDENCE_KEYS)
#: LlamaIndex's node record in a payload (llama-index-vector-stores-qdrant's field).
NODE_CONTENT = P.NODE_CONTENT
_FORMAT_1_KEYS = P.FORMAT_1_FIELDS | {P.FORMAT_1}


def _ingested_node(hit: Any) -> TextNode:
    """A point ``posfair ingest`` wrote in payload format 1: text, file metadata, the document and the
    neighbouring chunks."""
    payload = hit.payload
    fields = P.posfair_fields(payload)
    metadata = {k: v for k, v in payload.items() if k not in _FORMAT_1_KEYS or k in NODE_METADATA}
    relationships: dict[NodeRelationship, RelatedNodeInfo] = {}
    doc_id, version, index = fields.get(P.DOC_ID), fields.get(P.VERSION), fields.get(P.CHUNK_INDEX)
    if doc_id is not None:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=str(doc_id))
    if doc_id is not None and version is not None and isinstance(index, int):
        if index > 0:
            relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=point_id(doc_id, version, index - 1))
        if index + 1 < int(fields.get(P.N_CHUNKS, 0)):
            relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=point_id(doc_id, version, index + 1))
    return TextNode(
        id_=hit.id,
        text=str(fields.get(P.TEXT, "")),
        metadata=metadata,
        relationships=relationships,
        start_char_idx=fields.get(P.START_CHAR),
        end_char_idx=fields.get(P.END_CHAR),
        excluded_llm_metadata_keys=[k for k in _HIDDEN_FROM_LLM if k in metadata],
        excluded_embed_metadata_keys=list(metadata),
    )


def hit_to_node(hit: Any) -> NodeWithScore:
    """A search hit (or a scrolled record with ``score=None``) as a LlamaIndex node with its score.

    The node is the point's ``_node_content``: a node the vector store wrote comes back as it was
    given (id, metadata, relationships), a chunk ``posfair ingest`` wrote as a ``TextNode`` with
    its document's metadata. The evidence span, when the search returned one, is added to its
    metadata (``evidence_start_char`` / ``evidence_end_char``, document offsets), and so is the fusion value of a hybrid query (``fusion_score``),
    both hidden from the LLM and the embedding.
    """
    payload = hit.payload or {}
    if NODE_CONTENT in payload:
        fields = P.posfair_fields(payload)
        text = fields.get(P.TEXT) if fields.get(P.FORMAT) == 1 else None  # format 1 kept the text out of the record
        node = metadata_dict_to_node(payload, text=None if text is None else str(text))
    else:
        node = _ingested_node(hit)
    shown = dict(zip(EVIDENCE_KEYS, getattr(hit, "evidence", None) or ()))
    if getattr(hit, "fusion_score", None) is not None:
        shown[FUSION_SCORE] = hit.fusion_score
    if shown:
        node.metadata.update(shown)
        node.excluded_llm_metadata_keys = list({*node.excluded_llm_metadata_keys, *shown})
        node.excluded_embed_metadata_keys = list({*node.excluded_embed_metadata_keys, *shown})
    return NodeWithScore(node=node, score=getattr(hit, "score", None))


def without_empty(nodes: Sequence[BaseNode]) -> tuple[list[BaseNode], list[str]]:
    """``nodes`` that have text, and the ids of those without (empty or whitespace only: nothing to embed).

    Logs one warning naming how many were left out and the first few ids.
    """
    kept, empty = [], []
    for node in nodes:
        (kept if node.get_content(metadata_mode=MetadataMode.NONE).strip() else empty).append(node)
    empty_ids = [n.node_id for n in empty]
    if empty_ids:
        logger.warning(
            "skipped %d node(s) without text (empty or whitespace only), e.g. %s; %d stored",
            len(empty_ids),
            empty_ids[:3],
            len(kept),
        )
    return kept, empty_ids


def check_embeddings(nodes: Sequence[BaseNode], size: int, vector: str) -> None:
    """Refuse a node whose ``embedding`` is not ``size`` numbers (the collection's ``vector``).

    Raises:
        ValueError: names the node, the size received, the size expected and the fix.
    """
    for node in nodes:
        if node.embedding is not None and len(node.embedding) != size:
            raise ValueError(
                f"node {node.node_id!r} has an embedding of {len(node.embedding)} numbers, but the collection's "
                f"node vector {vector!r} has {size}; embed the nodes with the collection's embed model"
            )


def _doc_versions(nodes: Sequence[BaseNode], encoding: PointEncoding) -> dict[str, tuple[str, int]]:
    """Per document id, the version of its nodes in this call and how many there are."""
    hashes: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        hashes[_doc_id(node)].append(node.hash)
    return {
        doc: (encoding.version(hashlib.sha256("\n".join(h).encode()).hexdigest()), len(h)) for doc, h in hashes.items()
    }


def _doc_id(node: BaseNode) -> str:
    return node.ref_doc_id or node.node_id


def _node_record(node: BaseNode) -> dict[str, Any]:
    """LlamaIndex's record of ``node`` (its metadata JSON-safe, its JSON with the text).

    Raises:
        ValueError: metadata a payload cannot hold (names the node and the key).
    """
    try:
        P.json_metadata(node.metadata, f"metadata of node {node.node_id!r}")
        return node_to_metadata_dict(node, remove_text=False, flat_metadata=False)
    except ValueError:
        raise
    except Exception as exc:  # pydantic cannot serialise the node
        raise ValueError(f"node {node.node_id!r} cannot be stored as JSON: {exc}") from None


def planned_nodes(
    nodes: Sequence[BaseNode], encoding: PointEncoding, spans_fn: Any, count_tokens: Any
) -> list[PlannedChunk]:
    """``nodes`` as points to encode (:func:`qdrant_tools.encoding.plan_chunk`, as ``posfair ingest`` plans its
    chunks): deterministic ids from the node ids, the node's metadata top-level (where filters reach it),
    LlamaIndex's node record and posfair's fields.

    Raises:
        ValueError: a node without text (leave them out with :func:`without_empty`), or metadata a
            payload cannot hold.
    """
    versions = _doc_versions(nodes, encoding)
    texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
    empty = [n.node_id for n, t in zip(nodes, texts) if not t.strip()]
    if empty:
        raise ValueError(f"nodes {empty[:3]} have no text; leave them out first (nodes.without_empty)")
    records = [_node_record(n) for n in nodes]
    n_tokens = list(count_tokens(texts))
    seen: dict[str, int] = defaultdict(int)
    out = []
    for node, text, n, record in zip(nodes, texts, n_tokens, records):
        doc_id = _doc_id(node)
        version, n_chunks = versions[doc_id]
        start = node.start_char_idx if isinstance(node, TextNode) and node.start_char_idx is not None else 0
        chunk = Chunk(seen[doc_id], text, start, start + len(text), int(n))
        seen[doc_id] += 1
        doc = SourceDocument(doc_id, "", str(node.metadata.get("file_path", doc_id)), node.hash, metadata=node.metadata)
        planned = plan_chunk(
            doc,
            chunk,
            n_tokens=int(n),
            n_chunks=n_chunks,
            version=version,
            encoding=encoding,
            spans_fn=spans_fn,
            node_record=record,
            point_id=node_point_id(node.node_id),
        )
        out.append(planned)
    return out
