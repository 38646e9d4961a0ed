"""Qdrant tooling for llamaindex-posfair: chunking, point ids, payloads, schema checks, ingestion.

Modules (each importable on its own):
    chunking  read files, token-aware chunks with character offsets
    ids       deterministic point ids and document versions
    payload   the per-chunk payload (also the per-document ingestion record); build_payload, its one builder
    schema    named-vector schema check before any write
    spec      declarative collection specs (vectors, HNSW, payload indexes ...)
    plan      pure ingestion planning: new / changed / partial / cleanup / unchanged
    writer    QdrantWriter, the one writer of every ingestion path
    layout    NodeLayout: node size, sub-chunks, fused rows, quantization
    encoding  Encoder protocol, point encoding, plan_chunk (one point's id and payload, for both writers),
              documents -> encoded point batches
    report    IngestReport (one JSON shape for every path)
    driver    the steps both ingestion paths share
    ingest    single-process ingestion
    ray_ingest  distributed ingestion on Ray Data
    store     open_store: the embedded Qdrant Edge store, a server client, or local mode
    compat    may this writer or reader use this collection (the compatibility checks)
    metadata  what a collection records about how it was written
    search    the one query_points request of a query, and its hits' relevance scores
    scroll    every point of a collection, a page at a time (the one scroll loop)
    sparse    the BM25 sparse vector
    subchunks sentence-aligned sub-chunks and the fused multivector
    fuse      a collection's fused rows built from its stored vectors
    snapshots sha256-verified snapshots
    retry     bounded retries of transient storage errors
    text      sentence spans

Example:
    >>> from qdrant_tools import IngestConfig, ingest_path
    >>> from qdrant_tools.store import open_store
    >>> report = ingest_path(open_store("./.posfair/qdrant"), "demo", "examples/data",
    ...                      {"calibrated": encoder}, IngestConfig())  # doctest: +SKIP
"""

from qdrant_tools.chunking import Chunk, ChunkingConfig, SkippedFile, SourceDocument, chunk_text, load_document
from qdrant_tools.compat import check_writable
from qdrant_tools.encoding import Encoder
from qdrant_tools.ids import document_version, point_id
from qdrant_tools.ingest import IngestConfig, ingest_documents, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.plan import IngestionPlan, plan_ingestion
from qdrant_tools.report import IngestReport
from qdrant_tools.schema import ensure_collection
from qdrant_tools.spec import CollectionMismatchError, VectorConfig
from qdrant_tools.writer import PointBatch, QdrantWriter

__all__ = [
    "Chunk",
    "ChunkingConfig",
    "CollectionMismatchError",
    "Encoder",
    "IngestConfig",
    "IngestReport",
    "IngestionPlan",
    "NodeLayout",
    "PointBatch",
    "QdrantWriter",
    "SkippedFile",
    "SourceDocument",
    "VectorConfig",
    "check_writable",
    "chunk_text",
    "document_version",
    "ensure_collection",
    "ingest_documents",
    "ingest_path",
    "load_document",
    "plan_ingestion",
    "point_id",
]
