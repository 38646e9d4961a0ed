"""Qdrant tooling for llamaindex-posfair: chunking, point ids, payloads, schema checks, ingestion.

Modules (each importable on its own):
    chunking  read files, token-aware chunks with character offsets
    ids       deterministic point ids and document versions
    payload   the per-chunk payload (also the per-document ingestion record)
    schema    named-vector schema check before any write
    ingest    the idempotent ingestion orchestrator

Example:
    >>> from qdrant_client import QdrantClient
    >>> from qdrant_tools import IngestConfig, ingest_path
    >>> report = ingest_path(QdrantClient(":memory:"), "demo", "examples/data",
    ...                      {"calibrated": encoder}, IngestConfig())  # doctest: +SKIP
"""

from qdrant_tools.chunking import Chunk, ChunkingConfig, SkippedFile, SourceDocument, chunk_text, load_document
from qdrant_tools.ids import document_version, point_id
from qdrant_tools.ingest import Encoder, IngestConfig, IngestReport, ingest_documents, ingest_path
from qdrant_tools.schema import SchemaMismatchError, VectorSpec, check_collection, ensure_collection

__all__ = [
    "Chunk",
    "ChunkingConfig",
    "Encoder",
    "IngestConfig",
    "IngestReport",
    "SchemaMismatchError",
    "SkippedFile",
    "SourceDocument",
    "VectorSpec",
    "check_collection",
    "chunk_text",
    "document_version",
    "ensure_collection",
    "ingest_documents",
    "ingest_path",
    "load_document",
    "point_id",
]
