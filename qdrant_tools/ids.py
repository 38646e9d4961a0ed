"""Deterministic point ids and document versions.

A point id is ``uuid5(POINT_NAMESPACE, f"{doc_id}\\n{version}\\n{chunk_index}")``;
a document's *version* hashes its content, the chunking settings and the
fingerprint of every encoder whose vector is stored. Re-ingesting unchanged
input therefore rewrites the same ids (idempotent), while a changed file, a
changed chunking or a changed encoder produces fresh ids, so the new chunks
can be written before the stale ones are deleted.

Any other ingestion path (e.g. a distributed one) must use these functions to
produce identical ids.

Example:
    >>> from qdrant_tools.ids import document_version, point_id
    >>> v = document_version("ab" * 32, "tokens=256;overlap=32", {"calibrated": "f00d"})
    >>> point_id("notes/a.md", v, 0) == point_id("notes/a.md", v, 0)
    True
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping

#: Fixed namespace of every posfair point id (never change it: ids would move).
POINT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://llamaindex-posfair/qdrant-point-id/v1")


def document_version(content_hash: str, chunking_key: str, fingerprints: Mapping[str, str]) -> str:
    """Short stable hash of what determines a document's stored points.

    Args:
        content_hash: SHA-256 of the document text.
        chunking_key: :meth:`qdrant_tools.chunking.ChunkingConfig.key`.
        fingerprints: vector name -> encoder fingerprint, for every stored vector.
    """
    blob = json.dumps(
        {"content": content_hash, "chunking": chunking_key, "vectors": dict(sorted(fingerprints.items()))},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]


def point_id(doc_id: str, version: str, chunk_index: int) -> str:
    """Deterministic UUID string of one chunk of one document version."""
    if chunk_index < 0:
        raise ValueError(f"chunk_index must be >= 0, got {chunk_index}")
    return str(uuid.uuid5(POINT_NAMESPACE, f"{doc_id}\n{version}\n{chunk_index}"))


def node_point_id(node_id: str) -> str:
    """The point id of a LlamaIndex node: its id when that is a UUID (LlamaIndex's default), else a
    deterministic ``uuid5`` of it, so a node is written to the same point on every run.

    Example:
        >>> node_point_id("0b4d1f3e-6a41-4f2b-9a59-4e0d2b1c7f10")
        '0b4d1f3e-6a41-4f2b-9a59-4e0d2b1c7f10'
        >>> node_point_id("guide.md#3") == node_point_id("guide.md#3")
        True
    """
    try:
        return str(uuid.UUID(node_id))
    except (ValueError, AttributeError, TypeError):
        return str(uuid.uuid5(POINT_NAMESPACE, f"node\n{node_id}"))
