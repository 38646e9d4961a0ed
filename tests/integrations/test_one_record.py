"""One record of a collection: ``posfair ingest`` records the types' defaults, each fact once, and reads old records."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.spec import EncoderSpec
from llamaindex_posfair.integrations.recipe import RECORDED_FIELDS, Recipe, read_recipe
from qdrant_tools.layout import EARLIER_NAMES, NodeLayout
from qdrant_tools.metadata import FUSED_WEIGHT_KEY, RECIPE_KEY
from qdrant_tools.search import SearchSettings

#: ``Recipe.default().metadata()[RECIPE_KEY]`` as recorded before the defaults moved onto the types (float32, the
#: bundled model's weights hash left out), and before each layout choice had one spelling (``node_int8``,
#: ``subchunk_int8``, ``node_from_subchunks``): the default pipeline must record, and so rank, exactly as before.
BEFORE = {
    "bm25": {
        "ascii_folding": False,
        "avg_len": 256.0,
        "b": 0.75,
        "cjk_bigrams": True,
        "k": 1.2,
        "language": "english",
        "lowercase": True,
        "model": "bm25",
        "tokenizer": "word",
    },
    "format": 1,
    "layout": {
        "chunk_tokens": None,
        "fused_quantization": "int8",
        "fused_weight": 0.5,
        "node_from_subchunks": False,
        "node_int8": True,
        "node_on_disk": True,
        "overlap_tokens": None,
        "subchunk_graph_m": 0,
        "subchunk_int8": False,
        "subchunks": {"max_tokens": 32, "overlap_sentences": 0},
    },
    "search": {
        "evidence": False,
        "evidence_limit": None,
        "exact_up_to": 5000,
        "fusion": "dbsf",
        "fusion_limit": 100,
        "limit": 5,
        "node_weight": 0.5,
        "prefetch_limit": 300,
        "prefetch_max": 2000,
        "rrf_k": None,
        "sparse": True,
        "sparse_limit": None,
        "sparse_weight": 1.0,
        "subchunk_candidates": 300,
        "subchunks": True,
        "vector": None,
    },
    "vectors": {
        "vanilla": {
            "calibration": None,
            "document_prompt": None,
            "dtype": "float32",
            "dump_tokens": None,
            "max_length": None,
            "model": "bundled:all-MiniLM-L6-v2",
            "normalize": True,
            "pooling": None,
            "query_prompt": None,
            "runtime": "torch",
            "weights": "707f563058cc13d5b1cfd7bb",
        }
    },
}

#: The layout fields of the record, each under its one name.
CANONICAL_LAYOUT = {f.name for f in dataclasses.fields(NodeLayout)}

#: The search of a recipe that records none, as it was read before the defaults moved onto the types.
BARE_SEARCH = SearchSettings(
    prefetch_limit=100, prefetch_max=None, exact_up_to=10_000, node_weight=0.0, fusion="rrf", fusion_limit=50
)


def _unpinned(record: dict) -> dict:
    """``record`` without the weights hash of its vectors' model (a fact of the model files, not of the recipe)."""
    vectors = {n: {k: v for k, v in s.items() if k != "weights"} for n, s in record["vectors"].items()}
    return {**record, "vectors": vectors}


@pytest.mark.slow
def test_posfair_ingest_without_flags_records_the_defaults_of_the_types(tmp_path, capsys):
    from llamaindex_posfair.cli import main
    from qdrant_tools.store import open_store

    folder, store = tmp_path / "docs", str(tmp_path / "q")
    folder.mkdir()
    (folder / "tides.txt").write_text("The tide rises twice a day. The moon pulls the ocean towards it.")
    rc = main(["ingest", str(folder), "--collection", "c", "--path", store, "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    with open_store(store) as client:
        metadata = client.get_collection("c").config.metadata
        recipe, record = read_recipe(client, "c"), metadata[RECIPE_KEY]
    assert recipe.layout == NodeLayout() and recipe.search == SearchSettings() and recipe.bm25 is not None
    assert "node_weight" not in record["search"] and record["layout"]["fused_weight"] == 0.5  # recorded once
    assert set(metadata) == {RECIPE_KEY}  # the fused weight is not written again beside the recipe
    assert set(record["layout"]) == CANONICAL_LAYOUT and not set(record["layout"]) & set(EARLIER_NAMES)
    layout = record["layout"]
    assert (layout["node_source"], layout["node_quantization"], layout["subchunk_quantization"]) == (
        "encoded",
        "int8",
        None,
    )
    spec, bare = recipe.vectors["vanilla"], EncoderSpec().pinned()  # pinned: the dtype resolved, the weights hashed
    assert [f for f in RECORDED_FIELDS if getattr(spec, f) != getattr(bare, f)] == []  # EncoderSpec() is what ships
    assert spec.calibration is None and spec.fingerprint() == bare.fingerprint()


def test_the_default_recipe_records_encoder_spec_in_every_recorded_field():
    spec, bare = Recipe.default().vectors["vanilla"], EncoderSpec().resolved()
    assert {f: getattr(spec, f) for f in RECORDED_FIELDS if f != "weights"} == {
        f: getattr(bare, f) for f in RECORDED_FIELDS if f != "weights"
    }
    assert bare.calibration is None


def _canonical(layout: dict) -> dict:
    """``layout`` (a record of :data:`BEFORE`'s time) with each choice under its one name, as recorded now."""
    out = {k: v for k, v in layout.items() if k not in EARLIER_NAMES}
    out["node_source"] = "subchunk-mean" if layout["node_from_subchunks"] else "encoded"
    out["node_quantization"] = "int8" if layout["node_int8"] else None
    out["subchunk_quantization"] = "int8" if layout["subchunk_int8"] else None
    return out


def test_the_default_recipe_is_recorded_as_before_but_for_the_fused_weight_recorded_once_and_one_name_each():
    before = _unpinned(copy.deepcopy(BEFORE))
    assert before["search"].pop("node_weight") == before["layout"]["fused_weight"] == 0.5
    before["layout"] = _canonical(before["layout"])
    assert _unpinned(Recipe.default().metadata()[RECIPE_KEY]) == before


def test_the_record_of_the_default_recipe_uses_only_the_canonical_names():
    metadata = Recipe.default().metadata()
    assert set(metadata) == {RECIPE_KEY} and FUSED_WEIGHT_KEY not in metadata
    assert set(metadata[RECIPE_KEY]["layout"]) == CANONICAL_LAYOUT


def test_a_record_of_the_earlier_names_reads_as_the_default_recipe():
    recipe = Recipe.from_record(copy.deepcopy(BEFORE))
    assert recipe.layout == NodeLayout() and recipe.search == SearchSettings()
    assert recipe.metadata()[RECIPE_KEY]["layout"] == _canonical(BEFORE["layout"])


@pytest.mark.parametrize(
    ("earlier", "now"),
    [
        ({"node_int8": False}, {"node_quantization": None, "node_on_disk": False}),
        ({"subchunk_int8": True}, {"subchunk_quantization": "int8"}),
        ({"node_from_subchunks": True}, {"node_source": "subchunk-mean"}),
    ],
)
def test_each_earlier_name_reads_as_its_canonical_field(earlier, now):
    record = copy.deepcopy(BEFORE)
    if "node_int8" in earlier:
        record["layout"]["node_on_disk"] = False  # memory-mapped node vectors need the int8 copy
    record["layout"].update(earlier)
    assert Recipe.from_record(record).layout == NodeLayout().replace(**now)


def test_a_record_of_both_weights_reads_as_the_recipe_it_records():
    recipe = Recipe.default()
    old = recipe.model_dump(mode="json")  # the search's node weight beside the layout's fused weight
    assert "node_weight" in old["search"] and Recipe.from_record(old) == recipe


def test_a_search_weight_other_than_the_fused_rows_is_recorded_and_read_back():
    recipe = Recipe.default().model_copy(update={"search": SearchSettings(node_weight=0.3)})
    record = recipe.metadata()[RECIPE_KEY]
    assert record["search"]["node_weight"] == 0.3 and Recipe.from_record(record) == recipe


def test_a_layout_recorded_before_compact_storage_reads_without_it():
    record = Recipe.default().model_dump(mode="json")
    del record["layout"]["node_on_disk"], record["layout"]["fused_quantization"]
    layout = Recipe.from_record(record).layout
    assert (layout.node_on_disk, layout.fused_quantization, layout.fused_weight) == (False, None, 0.5)


def test_a_recipe_recording_no_layout_nor_search_reads_as_the_bare_types_of_its_time():
    record = Recipe.default().model_dump(mode="json")
    del record["layout"], record["search"]
    recipe = Recipe.from_record(record)
    assert recipe.layout == NodeLayout(fused_weight=None, node_quantization=None) and recipe.search == BARE_SEARCH


#: A vector of a recipe recorded by a version whose ``EncoderSpec()`` calibrated: the calibration written out in full.
CALIBRATED_BEFORE = {
    **BEFORE["vectors"]["vanilla"],
    "calibration": {
        "basket_layout": "fixed",
        "basket_size": 128,
        "basket_weighting": "equal",
        "calibrate_documents": True,
        "calibrate_queries": True,
        "isolate": None,
        "isolated_policy": [],
        "layers": "last_half",
        "length_reference": None,
        "pooling": None,
        "skip_single_basket": True,
        "strength": 0.5,
        "strength_schedule": "constant",
    },
}


def test_records_of_either_calibration_read_as_written():
    record = {**BEFORE, "vectors": {"vanilla": BEFORE["vectors"]["vanilla"], "calibrated": CALIBRATED_BEFORE}}
    vectors = Recipe.from_record(record).vectors
    assert vectors["vanilla"].calibration is None and vectors["calibrated"].calibration == CalibrationConfig()


@pytest.mark.parametrize("calibration", [None, CalibrationConfig(), CalibrationConfig(strength=0.7)])
def test_the_record_writes_the_calibration_out_so_it_never_depends_on_the_default(calibration):
    recipe = Recipe.for_encoder(EncoderSpec(calibration=calibration))
    (vector,) = recipe.metadata()[RECIPE_KEY]["vectors"].values()
    assert "calibration" in vector and (vector["calibration"] is None) == (calibration is None)
    assert Recipe.from_record(recipe.metadata()[RECIPE_KEY]) == recipe


def test_an_encoder_recorded_without_calibration_reads_as_calibrated_as_then():
    record = copy.deepcopy(BEFORE)
    del record["vectors"]["vanilla"]["calibration"]  # no recipe was written so; were one, the default then calibrated
    assert Recipe.from_record(record).vectors["vanilla"].calibration == CalibrationConfig()


def test_a_collection_written_before_recipes_is_searched_as_then():
    from llamaindex_posfair.integrations.recipe import recorded_search

    then = recorded_search(None)
    assert (then.fusion, then.fusion_limit, then.node_weight) == ("rrf", 50, 0.0)
    assert (then.prefetch_limit, then.prefetch_max, then.exact_up_to) == (100, None, 10_000)
    assert then != SearchSettings()
    assert recorded_search(Recipe.default()) == SearchSettings()


def test_a_plain_calibration_survives_the_embedded_stores_record_on_disk(tmp_path):
    from qdrant_client import models

    from qdrant_tools.store import open_store

    with open_store(str(tmp_path / "q")) as client:  # collection.json is written without None fields at its top
        vectors = {"vanilla": models.VectorParams(size=4, distance=models.Distance.COSINE)}
        client.create_collection("c", vectors_config=vectors, metadata=Recipe.default().metadata())
    with open_store(str(tmp_path / "q")) as client:
        vector = client.get_collection("c").config.metadata[RECIPE_KEY]["vectors"]["vanilla"]
    assert "calibration" in vector and vector["calibration"] is None
