"""LlamaIndex nodes <-> posfair points: the payload a node is stored with, and the node a hit becomes.

Both writers produce the same payload fields (:mod:`qdrant_tools.payload`): ``posfair
ingest`` through :func:`qdrant_tools.encoding.prepare_document`, and
:class:`~llamaindex_posfair.integrations.vector_store.PosFairVectorStore` through
:func:`planned_nodes`, which adds LlamaIndex's own node record (``_node_content``,
``_node_type``, ``ref_doc_id``: what llama-index-vector-stores-qdrant stores), so a node
round-trips with its id, metadata and relationships. Every reader turns a hit into a
node with :func:`hit_to_node`; a point written by ``posfair ingest`` gets its document
as ``ref_doc_id`` and its neighbouring chunks as prev / next.

Example:
    >>> from qdrant_tools.search import Hit
    >>> node = hit_to_node(Hit("0b4d1f3e-6a41-4f2b-9a59-4e0d2b1c7f10", 0.5, {"text": "tides", "doc_id": "a.md"}))
    >>> node.node.ref_doc_id, node.node.text
    ('a.md', 'tides')
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from qdrant_tools import payload as P
from qdrant_tools.chunking import Chunk, SourceDocument
from qdrant_tools.encoding import PlannedChunk, PointEncoding, subchunk_spans
from qdrant_tools.ids import document_version, node_point_id, point_id

__all__ = ["NODE_METADATA", "hit_to_node", "planned_nodes"]

#: Payload fields shown as node metadata of a point written by ``posfair ingest``.
NODE_METADATA = (P.DOC_ID, P.FILE_NAME, P.SOURCE, P.CHUNK_INDEX, P.START_CHAR, P.END_CHAR)
#: Metadata posfair adds to a returned node that stays out of LLM prompts and embeddings.
EVIDENCE_KEYS = ("evidence_start_char", "evidence_end_char")
#: Metadata of a returned node holding the value its dense and BM25 rankings were fused to (the node's
#: score is its relevance in [0, 1]; this is what ordered it).
FUSION_SCORE = "fusion_score"
_HIDDEN_FROM_LLM = (P.SOURCE, P.CHUNK_INDEX, P.START_CHAR, P.END_CHAR, *EVIDENCE_KEYS)
#: LlamaIndex's node record in a payload (llama-index-vector-stores-qdrant's field).
NODE_CONTENT = "_node_content"


def _ingested_node(hit: Any) -> TextNode:
    """A point written by ``posfair ingest``: text, file metadata, the document and the neighbouring chunks."""
    payload = hit.payload
    metadata = {k: v for k, v in payload.items() if k not in P.RESERVED_FIELDS or k in NODE_METADATA}
    relationships: dict[NodeRelationship, RelatedNodeInfo] = {}
    doc_id, version, index = payload.get(P.DOC_ID), payload.get(P.VERSION), payload.get(P.CHUNK_INDEX)
    if doc_id is not None:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=str(doc_id))
    if doc_id is not None and version is not None and isinstance(index, int):
        if index > 0:
            relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=point_id(doc_id, version, index - 1))
        if index + 1 < int(payload.get(P.N_CHUNKS, 0)):
            relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=point_id(doc_id, version, index + 1))
    return TextNode(
        id_=hit.id,
        text=str(payload.get(P.TEXT, "")),
        metadata=metadata,
        relationships=relationships,
        start_char_idx=payload.get(P.START_CHAR),
        end_char_idx=payload.get(P.END_CHAR),
        excluded_llm_metadata_keys=[k for k in _HIDDEN_FROM_LLM if k in metadata],
        excluded_embed_metadata_keys=list(metadata),
    )


def hit_to_node(hit: Any) -> NodeWithScore:
    """A search hit (or a scrolled record with ``score=None``) as a LlamaIndex node with its score.

    A node the vector store wrote comes back as it was given (id, metadata, relationships);
    the evidence span, when the search returned one, is added to its metadata
    (``evidence_start_char`` / ``evidence_end_char``, document offsets), and so is the fusion value of a
    hybrid query (``fusion_score``), both hidden from the LLM and the embedding.
    """
    payload = hit.payload or {}
    if NODE_CONTENT in payload:
        node = metadata_dict_to_node(payload, text=str(payload.get(P.TEXT, "")))
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


def _doc_versions(nodes: Sequence[BaseNode], encoding: PointEncoding) -> dict[str, tuple[str, int]]:
    """Per document id, the version of its nodes in this call and how many there are."""
    hashes: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        hashes[_doc_id(node)].append(node.hash)
    return {
        doc: (
            document_version(
                hashlib.sha256("\n".join(h).encode()).hexdigest(), encoding.chunking_key, encoding.fingerprints
            ),
            len(h),
        )
        for doc, h in hashes.items()
    }


def _doc_id(node: BaseNode) -> str:
    return node.ref_doc_id or node.node_id


def planned_nodes(
    nodes: Sequence[BaseNode], encoding: PointEncoding, spans_fn: Any, count_tokens: Any
) -> list[PlannedChunk]:
    """``nodes`` as points to encode: deterministic ids from the node ids, posfair's payload (with the
    node's metadata top-level, where filters reach it) and LlamaIndex's node record.

    Raises:
        ValueError: a node without text, or metadata that uses a reserved payload key.
    """
    versions = _doc_versions(nodes, encoding)
    texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
    empty = [n.node_id for n, t in zip(nodes, texts) if not t.strip()]
    if empty:
        raise ValueError(f"nodes {empty[:3]} have no text; PosFairVectorStore stores text nodes, drop empty ones")
    n_tokens = list(count_tokens(texts))
    seen: dict[str, int] = defaultdict(int)
    out = []
    for node, text, n in zip(nodes, texts, n_tokens):
        doc_id = _doc_id(node)
        version, n_chunks = versions[doc_id]
        start = node.start_char_idx if isinstance(node, TextNode) and node.start_char_idx is not None else 0
        chunk = Chunk(seen[doc_id], text, start, start + len(text), int(n))
        seen[doc_id] += 1
        source = str(node.metadata.get("file_path", doc_id))
        doc = SourceDocument(doc_id, "", source, node.hash, metadata=node.metadata)
        subchunks = encoding.layout.subchunks
        spans = None if subchunks is None else subchunk_spans(chunk, subchunks, spans_fn)
        payload = P.build_payload(
            doc,
            chunk,
            n_chunks=n_chunks,
            version=version,
            fingerprints=encoding.fingerprints,
            n_tokens=n,
            truncated=n > encoding.max_length,
            chunking_key=encoding.chunking_key,
            subchunk_spans=spans,
        )
        record = node_to_metadata_dict(node, remove_text=True, flat_metadata=False)
        out.append(PlannedChunk(doc_id, node_point_id(node.node_id), text, {**record, **payload}))
    return out
