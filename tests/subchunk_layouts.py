"""Ingestion settings shared by the fused-layout tests (``tests/qdrant_tools/test_fused_search.py``, ``test_fuse.py``).

``PLAIN``: small nodes with sub-chunks and BM25, no fused rows; ``FUSED``: the same with fused rows at 0.4.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from qdrant_tools.ingest import IngestConfig
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import posfair_fields
from qdrant_tools.sparse import Bm25Sparse
from qdrant_tools.subchunks import SubchunkConfig

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
BM25 = Bm25Sparse()
PLAIN = IngestConfig(
    show_progress=False,
    sparse=BM25,
    layout=NodeLayout(
        chunk_tokens=120, overlap_tokens=10, subchunks=SubchunkConfig(24, 0), fused_weight=None, node_quantization=None
    ),
)
FUSED = replace(PLAIN, layout=PLAIN.layout.replace(fused_weight=0.4))
QUERY = "how do spring tides form when the moon and sun align"


def nodes(hits):
    """Hits as (document, chunk): point ids differ between layouts (the layout is part of the version)."""
    return [(posfair_fields(h.payload)["doc_id"], posfair_fields(h.payload)["chunk_index"]) for h in hits]
