"""NodeLayout: the one description of how a collection's nodes are written."""

from __future__ import annotations

import dataclasses

import pytest

from qdrant_tools import NodeLayout
from qdrant_tools.driver import IngestSettings
from qdrant_tools.ingest import IngestConfig
from qdrant_tools.ray_ingest import RayIngestConfig
from qdrant_tools.search import SearchSettings
from qdrant_tools.subchunks import SubchunkConfig


def test_the_defaults_are_the_layout_posfair_ingest_writes():
    layout = NodeLayout()
    assert (layout.chunk_tokens, layout.overlap_tokens, layout.subchunks) == (None, None, SubchunkConfig(32, 0))
    assert (layout.subchunk_quantization, layout.subchunk_graph_m, layout.node_source) == (None, 0, "encoded")
    assert layout.fused_weight == SearchSettings().node_weight == 0.5 and layout.fused_quantization == "int8"
    assert layout.node_quantization == "int8" and layout.node_on_disk


@pytest.mark.parametrize(
    ("fields", "followers"),
    [
        ({"subchunks": None}, (None, None, True)),
        ({"fused_weight": None}, (None, None, True)),
        ({"fused_weight": 0.3}, (0.3, "int8", True)),
        ({"node_quantization": None}, (0.5, "int8", False)),
        ({"subchunks": None, "node_quantization": None}, (None, None, False)),
    ],
)
def test_the_defaults_that_follow_other_fields_follow_the_fields_given(fields, followers):
    layout = NodeLayout(**fields)
    assert (layout.fused_weight, layout.fused_quantization, layout.node_on_disk) == followers


def test_every_ingestion_config_holds_a_default_layout():
    assert IngestSettings().layout == IngestConfig().layout == RayIngestConfig().layout == NodeLayout()


def test_layout_is_frozen_and_keyword_only():
    layout = NodeLayout(chunk_tokens=128)
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout.chunk_tokens = 64  # type: ignore[misc]
    with pytest.raises(TypeError):
        NodeLayout(128)  # type: ignore[misc]


def test_replace_changes_one_field_and_checks_again():
    layout = NodeLayout(chunk_tokens=128, node_quantization=None)
    assert layout.replace(chunk_tokens=64) == NodeLayout(chunk_tokens=64, node_quantization=None)
    with pytest.raises(ValueError, match="fused_weight"):
        layout.replace(subchunks=None)


def test_equal_layouts_hash_alike():
    a, b = NodeLayout(subchunks=SubchunkConfig(24, 1)), NodeLayout(subchunks=SubchunkConfig(24, 1))
    assert a == b and len({a, b, NodeLayout()}) == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"chunk_tokens": 0}, "chunk_tokens must be a positive integer or None, got 0"),
        ({"chunk_tokens": True}, "chunk_tokens must be a positive integer or None, got True"),
        ({"overlap_tokens": -1}, "overlap_tokens must be an integer >= 0 or None, got -1"),
        ({"subchunk_graph_m": -1}, "subchunk_graph_m must be an integer >= 0, got -1"),
        ({"fused_weight": 1.0}, r"fused_weight must lie strictly between 0 and 1, got 1.0"),
        ({"fused_weight": 0.0}, r"fused_weight must lie strictly between 0 and 1, got 0.0"),
        ({"subchunks": {"max_tokens": 32}}, "subchunks must be a SubchunkConfig or None"),
        ({"node_quantization": True}, 'node_quantization must be "int8" or None, got True'),
        ({"subchunk_quantization": "binary"}, "subchunk_quantization must be \"int8\" or None, got 'binary'"),
        ({"node_source": "mean"}, 'node_source must be "encoded" or "subchunk-mean", got \'mean\''),
        ({"node_on_disk": "yes"}, "node_on_disk must be True or False, got 'yes'"),
    ],
)
def test_a_value_out_of_range_is_named(fields, message):
    with pytest.raises(ValueError, match=message):
        NodeLayout(**fields)


@pytest.mark.parametrize(
    ("field", "value", "fix"),
    [
        ("node_source", "subchunk-mean", 'pass node_source="encoded"'),
        ("fused_weight", 0.5, "drop fused_weight"),
        ("subchunk_quantization", "int8", "drop subchunk_quantization"),
    ],
)
def test_a_sub_chunk_setting_without_sub_chunks_names_the_fix(field, value, fix):
    with pytest.raises(ValueError, match=rf"need(s)? sub-chunks; pass subchunks=SubchunkConfig\(\.\.\.\) or {fix}"):
        NodeLayout(subchunks=None, **{field: value})


def test_the_single_vector_layout_takes_node_settings():
    layout = NodeLayout(chunk_tokens=254, overlap_tokens=0, subchunks=None, node_quantization="int8")
    assert layout.subchunks is None and layout.node_quantization == "int8"


def test_point_encoding_follows_the_layout(encoder):
    single = NodeLayout(chunk_tokens=20, overlap_tokens=4, subchunks=None).point_encoding({"vanilla": encoder})
    fused = NodeLayout(chunk_tokens=20, overlap_tokens=4, fused_weight=0.5).point_encoding({"vanilla": encoder})
    assert (single.layout.subchunks, single.chunking.chunk_tokens, single.chunking.overlap_tokens) == (None, 20, 4)
    assert fused.layout.subchunks == SubchunkConfig() and fused.layout.fused_weight == 0.5
    assert fused.chunking_key.startswith(single.chunking_key) and ";fused=0.5" in fused.chunking_key


def test_ingest_settings_plan_through_their_layout(encoder):
    layout = NodeLayout(chunk_tokens=20, subchunks=SubchunkConfig(8, 0))
    via_settings = IngestConfig(layout=layout).point_encoding({"vanilla": encoder})
    assert via_settings == layout.point_encoding({"vanilla": encoder})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fused_weight": None, "fused_quantization": "int8"}, "needs the fused multivector; pass fused_weight"),
        ({"fused_weight": 0.5, "fused_quantization": "int4"}, 'must be "int8", "binary" or None'),
        ({"node_quantization": None, "node_on_disk": True}, 'need their int8 copy in RAM.*node_quantization="int8"'),
    ],
)
def test_a_compact_storage_setting_names_what_it_needs(changes, message):
    with pytest.raises(ValueError, match=message):
        NodeLayout(**changes)


def test_compact_storage_keeps_the_quantized_copies_in_ram_and_maps_the_originals(encoder):
    layout = NodeLayout(fused_weight=0.5, fused_quantization="int8", node_quantization="int8", node_on_disk=True)
    encoding = layout.point_encoding({"vanilla": encoder})
    configs = {v.name: v for v in encoding.vector_configs()}
    assert configs["subchunks_fused"].on_disk and configs["subchunks_fused"].quantization.kind == "int8"
    assert configs["vanilla"].on_disk and configs["vanilla"].quantization.kind == "int8"


def test_a_sub_chunk_quantization_keeps_an_int8_copy_of_the_sub_chunks(encoder):
    layout = NodeLayout(subchunk_quantization="int8")
    configs = {v.name: v for v in layout.point_encoding({"vanilla": encoder}).vector_configs()}
    assert configs["subchunks"].quantization.kind == "int8" and configs["subchunks"].quantization.quantile == 0.99
    assert NodeLayout().point_encoding({"vanilla": encoder}).vector_configs()[1].quantization is None


def test_a_layout_recorded_with_the_earlier_names_reads_as_the_same_layout():
    from qdrant_tools.layout import layout_fields

    earlier = {"chunk_tokens": 254, "node_int8": False, "subchunk_int8": True, "node_from_subchunks": True}
    assert layout_fields(earlier) == {
        "chunk_tokens": 254,
        "node_quantization": None,
        "subchunk_quantization": "int8",
        "node_source": "subchunk-mean",
    }
    want = NodeLayout(
        chunk_tokens=254, node_quantization=None, subchunk_quantization="int8", node_source="subchunk-mean"
    )
    assert NodeLayout.from_record(earlier) == want
    assert NodeLayout.from_record({"node_int8": True, "node_quantization": None}).node_quantization is None  # today's
