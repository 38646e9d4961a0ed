"""Node vectors derived from the sub-chunk vectors (``node_source="subchunk-mean"``): no node pass at ingestion."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from qdrant_tools.encoding import subchunk_mean
from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.subchunks import SubchunkConfig

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
CFG = IngestConfig(
    show_progress=False,
    layout=NodeLayout(
        chunk_tokens=120, overlap_tokens=10, subchunks=SubchunkConfig(24, 0), node_source="subchunk-mean"
    ),
)


def _points(client):
    return client.scroll("c", limit=10_000, with_vectors=True)[0]


def test_the_node_vector_is_the_normalised_mean_of_its_stored_sub_chunk_vectors(client, encoder):
    ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    pts = _points(client)
    assert len(pts) > 10
    for p in pts:
        subs = np.asarray(p.vector["subchunks"], dtype=np.float64)
        want = subs.mean(axis=0) / np.linalg.norm(subs.mean(axis=0))
        np.testing.assert_allclose(p.vector["calibrated"], want, atol=1e-5)


def test_ingestion_encodes_only_the_sub_chunks(client, make_encoder):
    plain, derived = make_encoder(), make_encoder()
    ingest_path(client, "c", DATA, {"calibrated": derived}, CFG)
    encoded = replace(CFG, layout=CFG.layout.replace(node_source="encoded"))
    ingest_path(client, "d", DATA, {"calibrated": plain}, encoded)
    count = sum(c.count for c in derived.calls if c.role == "document")
    nodes = client.count("c", exact=True).count
    assert count == sum(c.count for c in plain.calls if c.role == "document") - nodes


def test_switching_node_vectors_re_embeds_every_document(client, encoder):
    first = ingest_path(
        client, "c", DATA, {"calibrated": encoder}, replace(CFG, layout=CFG.layout.replace(node_source="encoded"))
    )
    again = ingest_path(client, "c", DATA, {"calibrated": encoder}, CFG)
    assert len(again.changed) == len(first.new)
    assert client.count("c", exact=True).count == again.chunks_written


def test_derived_node_vectors_need_sub_chunks(encoder):
    with pytest.raises(ValueError, match="need sub-chunks; pass subchunks="):
        NodeLayout(subchunks=None, node_source="subchunk-mean").point_encoding({"calibrated": encoder})


@settings(max_examples=50, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 6), st.just(8)), elements=st.floats(-1, 1, width=32)))
def test_subchunk_mean_is_a_unit_vector_along_the_mean_and_ignores_row_order(rows):
    mean = rows.astype(np.float64).mean(axis=0)
    got = subchunk_mean(rows)
    if np.linalg.norm(mean) < 1e-3:
        return  # a (near-)zero mean has no direction to check
    np.testing.assert_allclose(np.linalg.norm(got), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, mean / np.linalg.norm(mean), atol=1e-4)
    np.testing.assert_allclose(subchunk_mean(rows[::-1]), got, atol=1e-5)
