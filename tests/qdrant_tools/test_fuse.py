"""``fuse_collection``: a collection copied into the fused layout from its stored vectors, encoding nothing."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from subchunk_layouts import BM25, DATA, FUSED, PLAIN, QUERY
from subchunk_layouts import nodes as _nodes

from qdrant_tools.encoding import build_point_encoding, fused_chunking_key, subchunk_source_of
from qdrant_tools.fuse import FuseError, fuse_collection
from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.metadata import FUSED_WEIGHT_KEY, RECIPE_KEY, read_metadata
from qdrant_tools.search import SearchSettings, collection_vectors, search
from qdrant_tools.subchunks import FUSED_VECTOR, SUBCHUNK_VECTOR, SubchunkConfig


@pytest.fixture
def plain(client, encoder):
    """A collection of the layout without fused rows (as written before it was the default)."""
    ingest_path(client, "plain", DATA, {"calibrated": encoder}, PLAIN)
    return client


def test_the_copy_holds_every_point_with_fused_rows_and_records_the_weight(plain):
    n = fuse_collection(plain, "plain", "fused", 0.4)
    assert n == plain.count("plain").count == plain.count("fused").count
    vectors = collection_vectors(plain, "fused")
    assert (vectors.fused, vectors.fused_weight) == (FUSED_VECTOR, 0.4)
    assert read_metadata(plain, "fused")[FUSED_WEIGHT_KEY] == 0.4


def _recorded(weight):
    """A collection's record of its layout (the part of a recipe qdrant_tools reads) with fused rows at ``weight``."""
    return {RECIPE_KEY: {"layout": {"fused_weight": weight}}}


def test_a_copy_whose_record_holds_the_weight_is_not_given_the_key(client, encoder):
    ingest_path(client, "plain", DATA, {"calibrated": encoder}, replace(PLAIN, metadata=_recorded(None)))
    fuse_collection(client, "plain", "fused", 0.4, metadata=_recorded(0.4))
    assert read_metadata(client, "fused") == _recorded(0.4)
    assert collection_vectors(client, "fused").fused_weight == 0.4


def test_a_copy_whose_record_would_contradict_its_rows_is_refused_before_any_write(client, encoder):
    ingest_path(client, "plain", DATA, {"calibrated": encoder}, replace(PLAIN, metadata=_recorded(None)))
    with pytest.raises(FuseError, match="records a recipe .* whose layout has fused weight None, not 0.4"):
        fuse_collection(client, "plain", "fused", 0.4)
    assert not client.collection_exists("fused")


def test_a_collection_recording_the_weight_twice_as_earlier_versions_did_is_read_and_copied_once(plain):
    fuse_collection(plain, "plain", "fused", 0.4)
    plain.update_collection("fused", metadata=_recorded(0.4))  # the recipe beside the key: how it was written
    assert read_metadata(plain, "fused") == {FUSED_WEIGHT_KEY: 0.4, **_recorded(0.4)}
    fuse_collection(plain, "fused", "compact", 0.4, fused_quantization="int8", metadata=_recorded(0.4))
    assert read_metadata(plain, "compact") == _recorded(0.4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"node_quantization": "binary"}, "node_quantization must be \"int8\" or None, got 'binary'"),
        ({"fused_quantization": "scalar"}, 'fused_quantization must be "int8", "binary" or None, got \'scalar\''),
    ],
)
def test_a_bad_quantization_is_named_before_any_write(plain, kwargs, message):
    with pytest.raises(FuseError, match=message):
        fuse_collection(plain, "plain", "fused", 0.4, **kwargs)
    assert not plain.collection_exists("fused")


def test_the_copy_is_what_ingestion_of_the_fused_layout_writes(plain, encoder):
    fuse_collection(plain, "plain", "copied", 0.4)
    ingest_path(plain, "ingested", DATA, {"calibrated": encoder}, FUSED)
    copied, ingested = (
        {p.id: p for p in plain.scroll(c, limit=1000, with_payload=True, with_vectors=True)[0]}
        for c in ("copied", "ingested")
    )
    assert copied.keys() == ingested.keys()  # the same ids: the same versions
    for pid, p in copied.items():
        assert p.payload == ingested[pid].payload
        np.testing.assert_allclose(p.vector[FUSED_VECTOR], ingested[pid].vector[FUSED_VECTOR], atol=1e-5)


def test_ingesting_the_same_files_into_the_copy_encodes_nothing(plain, make_encoder):
    fuse_collection(plain, "plain", "fused", 0.4)
    report = ingest_path(plain, "fused", DATA, {"calibrated": make_encoder(fail_on_call=True)}, FUSED)
    assert report.chunks_written == 0


def test_one_arm_on_the_copy_ranks_as_the_two_arm_formula_on_the_source(plain, encoder):
    fuse_collection(plain, "plain", "fused", 0.4)
    q = encoder.encode_queries([QUERY])[0]
    s = SearchSettings(limit=6, node_weight=0.4, sparse=False)
    one, two = (search(plain, c, q, s) for c in ("fused", "plain"))
    assert _nodes(one) == _nodes(two)
    assert [h.score for h in one] == pytest.approx([h.score for h in two], abs=1e-5)


def test_the_copy_keeps_an_int8_node_copy_and_memory_maps_the_plain_sub_chunks(plain):
    fuse_collection(plain, "plain", "fused", 0.4)
    vectors = plain.get_collection("fused").config.params.vectors
    assert vectors[SUBCHUNK_VECTOR].on_disk is True
    assert vectors["calibrated"].quantization_config is not None


def test_a_rerun_completes_an_interrupted_copy(plain):
    fuse_collection(plain, "plain", "fused", 0.4)
    first = plain.scroll("fused", limit=1000)[0]
    plain.delete("fused", [p.id for p in first[: len(first) // 2]], wait=True)  # as if the copy had stopped
    assert fuse_collection(plain, "plain", "fused", 0.4) == len(first)


def test_the_source_is_left_unchanged(plain):
    before = plain.scroll("plain", limit=1000, with_payload=True, with_vectors=True)[0]
    fuse_collection(plain, "plain", "fused", 0.4)
    assert plain.scroll("plain", limit=1000, with_payload=True, with_vectors=True)[0] == before
    assert FUSED_VECTOR not in plain.get_collection("plain").config.params.vectors


@pytest.mark.parametrize("weight", [0.0, 1.0, -0.5, True, "0.5"])
def test_a_bad_weight_is_named_before_any_write(plain, weight):
    with pytest.raises(FuseError, match="strictly between 0 and 1"):
        fuse_collection(plain, "plain", "fused", weight)
    assert not plain.collection_exists("fused")


def test_a_collection_already_fused_is_refused(plain):
    fuse_collection(plain, "plain", "fused", 0.4)
    with pytest.raises(FuseError, match="already holds fused rows"):
        fuse_collection(plain, "fused", "again", 0.4)


def test_a_target_of_another_layout_is_refused(plain):
    with pytest.raises(FuseError, match="pass a new --to name"):
        fuse_collection(plain, "plain", "plain", 0.4)


def test_a_collection_without_sub_chunks_is_refused(client, encoder):
    ingest_path(
        client,
        "nodes",
        DATA,
        {"calibrated": encoder},
        IngestConfig(show_progress=False, layout=NodeLayout(chunk_tokens=120, subchunks=None)),
    )
    with pytest.raises(FuseError, match="no sub-chunk multivector"):
        fuse_collection(client, "nodes", "fused", 0.4)


def test_a_missing_collection_is_named(client):
    with pytest.raises(FuseError, match="'nope' does not exist"):
        fuse_collection(client, "nope", "fused", 0.4)


def test_the_fused_key_is_the_one_ingestion_writes(encoder):
    layout = NodeLayout(subchunks=SubchunkConfig(24, 0), fused_weight=None)
    plain_key = layout.point_encoding({"calibrated": encoder}, sparse=BM25).chunking_key
    fused_key = build_point_encoding({"calibrated": encoder}, layout.replace(fused_weight=0.4), BM25).chunking_key
    assert fused_chunking_key(plain_key, 0.4) == fused_key
    assert subchunk_source_of(plain_key) == "calibrated"


def test_a_fused_collection_is_copied_into_compact_storage(plain, encoder):
    fuse_collection(plain, "plain", "fused", 0.4)
    n = fuse_collection(plain, "fused", "compact", 0.4, fused_quantization="int8", node_on_disk=True)
    vectors = plain.get_collection("compact").config.params.vectors
    assert n == plain.count("fused", exact=True).count
    assert vectors[FUSED_VECTOR].on_disk and vectors[FUSED_VECTOR].quantization_config is not None
    assert vectors["calibrated"].on_disk
    q = encoder.encode_queries([QUERY])[0]
    s = SearchSettings(limit=5, node_weight=0.4, sparse=False)
    want, got = (search(plain, c, q, s) for c in ("fused", "compact"))
    assert [h.id for h in got] == [h.id for h in want]  # the rows and their keys are copied as they are


def test_fused_rows_of_another_weight_are_not_copied(plain):
    fuse_collection(plain, "plain", "fused", 0.4)
    with pytest.raises(FuseError, match="pass --fused-weight 0.4"):
        fuse_collection(plain, "fused", "compact", 0.5, fused_quantization="int8")
