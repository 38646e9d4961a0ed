"""The collection is the recipe: ingestion records it, every reader uses it, a contradiction is named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.spec import EncoderSet, EncoderSpec
from llamaindex_posfair.integrations.recipe import Recipe, read_recipe
from qdrant_tools.layout import NodeLayout
from qdrant_tools.metadata import RECIPE_KEY
from qdrant_tools.search import RRF_SEARCH, SearchSettings
from qdrant_tools.spec import CollectionMismatchError
from qdrant_tools.subchunks import SubchunkConfig


def run(capsys, *argv):
    from llamaindex_posfair.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _doc(doc_id, text):
    import hashlib

    from qdrant_tools.chunking import SourceDocument

    return SourceDocument(doc_id, text, doc_id, hashlib.sha256(text.encode()).hexdigest())


def _open(store):
    from qdrant_tools.store import open_store

    return open_store(store)


def test_default_recipe_is_the_default_pipeline_uncalibrated_with_32_token_subchunks():
    r = Recipe.default()
    assert list(r.vectors) == ["vanilla"] and r.node_vector() == "vanilla"
    assert r.encoder_spec().calibration is None and r.layout.subchunks.max_tokens == 32
    assert r.encoder_spec().weights is not None  # pinned: a changed model folder is refused at load
    assert r.sparse_encoder() is not None and (r.search.node_weight, r.search.fusion) == (0.5, "dbsf")


def test_recipe_records_no_run_time_fields():
    spec = EncoderSpec(calibration=None, device="cuda", batch_size=7, trust_remote_code=True)
    recorded = Recipe.build(EncoderSet.single(spec)).vectors["vanilla"]
    assert (recorded.device, recorded.batch_size, recorded.trust_remote_code) == (None, 32, False)
    assert recorded.fingerprint() == spec.fingerprint()


def test_a_contradicting_setting_names_both_values():
    r = Recipe.default()
    with pytest.raises(CollectionMismatchError, match="written with calibration none, but cal gives"):
        r.encoder_spec(given={"calibration": CalibrationConfig()}, names={"calibration": "cal"})


def test_agreeing_and_run_time_settings_are_applied():
    spec = Recipe.default().encoder_spec(given={"calibration": None, "device": "cpu", "batch_size": 4})
    assert (spec.device, spec.batch_size, spec.calibration) == ("cpu", 4, None)


def test_layout_conflict_is_named():
    r = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None)), NodeLayout(subchunks=SubchunkConfig(48, 0)))
    r.check_layout({"subchunks": SubchunkConfig(48, 0), "node_quantization": "int8"})
    with pytest.raises(CollectionMismatchError, match=r"subchunks SubchunkConfig\(max_tokens=48, .*, but subs gives"):
        r.check_layout({"subchunks": SubchunkConfig(32, 0)}, {"subchunks": "subs"})


def test_a_contradicting_bm25_setting_names_both_sides():
    with pytest.raises(CollectionMismatchError, match="written with a BM25 vector, but --no-bm25 gives no BM25 vector"):
        Recipe.default().check_bm25(False, "--no-bm25")
    without = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None)))
    with pytest.raises(CollectionMismatchError, match="written with no BM25 vector, but bm25 gives a BM25 vector"):
        without.check_bm25(True)


def test_a_contradicting_vector_name_names_both_sides():
    with pytest.raises(
        CollectionMismatchError, match=r"written with vectors \['vanilla'\], but --vector-name gives \['calibrated'\]"
    ):
        Recipe.default().check_vectors(["calibrated"], "--vector-name")


def test_repeating_the_recorded_vectors_and_bm25_is_accepted():
    both = Recipe.build(EncoderSet.single(EncoderSpec(calibration=CalibrationConfig()), both=True))
    both.check_vectors(["vanilla", "calibrated"], "--both-vectors")
    both.check_bm25(False)
    Recipe.default().check_bm25(True)
    Recipe.default().check_vectors(None)
    Recipe.default().check_bm25(None)


def test_rerank_settings_derive_node_vectors_as_the_collection_did():
    layout = NodeLayout(node_source="subchunk-mean")
    recipe = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None)), layout, SearchSettings(node_weight=0.5))
    assert recipe.rerank_settings()["node_source"] == "subchunk-mean"
    assert Recipe.build(EncoderSet.single(EncoderSpec())).rerank_settings()["node_source"] == "encoded"


def test_a_recipe_without_the_node_source_field_reads_as_encoded_nodes():
    data = Recipe.default().model_dump(mode="json")
    del data["layout"]["node_source"]
    assert Recipe.from_record(data).layout.node_source == "encoded"


@pytest.mark.parametrize(("earlier", "source"), [(True, "subchunk-mean"), (False, "encoded")])
def test_a_recipe_recording_node_from_subchunks_reads_as_its_node_source(earlier, source):
    data = Recipe.default().model_dump(mode="json")
    del data["layout"]["node_source"]
    data["layout"]["node_from_subchunks"] = earlier
    recipe = Recipe.from_record(data)
    assert recipe.layout.node_source == source and recipe.rerank_settings()["node_source"] == source
    assert recipe.layout == NodeLayout(node_source=source)


def test_derived_node_vectors_need_sub_chunks():
    with pytest.raises(ValueError, match="need sub-chunks"):
        NodeLayout(subchunks=None, node_source="subchunk-mean")


def test_rerank_settings_follow_the_layout():
    fused = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None)), search=SearchSettings(node_weight=0.3))
    assert fused.rerank_settings()["scoring"] == "weighted" and fused.rerank_settings()["node_weight"] == 0.3
    single = Recipe.build(EncoderSet.single(EncoderSpec()), NodeLayout(subchunks=None))
    assert single.rerank_settings()["scoring"] == "node"


def test_the_default_search_is_dbsf_at_node_weight_one_half():
    s = Recipe.default().search
    assert (s.fusion, s.sparse_weight, s.rrf_k, s.node_weight) == ("dbsf", 1.0, None, 0.5)


def test_a_search_recorded_as_its_former_fields_still_reads():
    data = Recipe.default().model_dump(mode="json")
    data["search"] = {"vector": None, "node_weight": 0.5, "fusion": "rrf", "fusion_limit": 100, "sparse_weight": 1.5}
    data["search"].update(rrf_k=60, prefetch_limit=300, prefetch_max=2000, exact_up_to=5000)
    assert Recipe.from_record(data).search == RRF_SEARCH


def test_a_recipe_round_trips_through_its_metadata():
    recipe = Recipe.default()
    assert Recipe.from_record(recipe.metadata()[RECIPE_KEY]) == recipe


def test_a_recipe_reads_back_equal_from_its_metadata_json():
    layout = NodeLayout(chunk_tokens=120, subchunks=SubchunkConfig(24, 1), subchunk_graph_m=8, fused_weight=0.4)
    recipe = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None)), layout, SearchSettings(node_weight=0.4))
    stored = json.loads(json.dumps(recipe.metadata()[RECIPE_KEY]))
    assert stored["layout"]["subchunks"] == {"max_tokens": 24, "overlap_sentences": 1}
    assert Recipe.from_record(stored) == recipe


def test_a_recorded_chunking_reads_as_the_same_layout():
    recipe = Recipe.default()
    data = recipe.model_dump(mode="json")
    layout = data.pop("layout")
    sub = layout.pop("subchunks")
    data["chunking"] = {**layout, "subchunk_tokens": sub["max_tokens"], "subchunk_overlap": sub["overlap_sentences"]}
    assert Recipe.from_record(data) == recipe


def test_a_recorded_chunking_without_sub_chunks_reads_as_the_single_vector_layout():
    data = Recipe.default().model_dump(mode="json")
    del data["layout"]
    data["chunking"] = {"chunk_tokens": 254, "subchunk_tokens": None, "subchunk_overlap": 0, "node_int8": True}
    want = NodeLayout(chunk_tokens=254, subchunks=None, node_quantization="int8", node_on_disk=False)  # as then
    assert Recipe.from_record(data).layout == want


def test_query_names_the_flag_of_a_bad_bm25_weight(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    assert run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")[0] == 0
    rc, _, err = run(capsys, "query", "bees", "--collection", "demo", "--path", store, "--bm25-weight", "0")
    assert rc == 2 and "--bm25-weight must be > 0" in err


def test_query_names_the_flag_of_a_bad_exact_up_to(capsys):
    from llamaindex_posfair.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["query", "bees", "--collection", "demo", "--exact-up-to", "-1"])
    assert exit_.value.code == 2 and "--exact-up-to: expected an integer >= 0, got -1" in capsys.readouterr().err


def test_ingest_records_the_recipe_and_query_reads_it(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    rc, _, err = run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    assert rc == 0, err
    client = _open(store)
    recipe = read_recipe(client, "demo")
    client.close()
    assert recipe is not None and recipe.encoder_spec().calibration is None and recipe.layout.subchunks.max_tokens == 32
    rc, _, err = run(capsys, "query", "Bay of Fundy water level", "--collection", "demo", "--path", store, "--json")
    assert rc == 0, err
    used = fake_cli.encoders[-1].spec  # the fake keeps the spec it was loaded from, with fake weights
    assert used.calibration is None and used.model == recipe.encoder_spec().model


def test_subchunk_graph_flag_writes_the_graph_and_the_recipe_keeps_it(tmp_path, capsys, fake_cli, example_data):
    from qdrant_tools.search import collection_vectors

    store = str(tmp_path / "q")
    base = ("ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    assert run(capsys, *base, "--subchunk-graph-m", "8")[0] == 0
    assert run(capsys, *base)[0] == 0  # a rerun without the flag keeps the recipe
    client = _open(store)
    recipe, vectors = read_recipe(client, "demo"), collection_vectors(client, "demo")
    client.close()
    assert recipe.layout.subchunk_graph_m == 8 and vectors.subchunk_graph
    rc, _, err = run(capsys, *base, "--subchunk-graph-m", "16")
    assert rc == 2 and "--subchunk-graph-m" in err


def test_node_source_flag_is_recorded_and_a_contradiction_names_it(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    base = ("ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    assert run(capsys, *base, "--node-source", "subchunk-mean")[0] == 0
    client = _open(store)
    recipe = read_recipe(client, "demo")
    points = client.scroll("demo", limit=1, with_vectors=True)[0]
    client.close()
    assert recipe.layout.node_source == recipe.rerank_settings()["node_source"] == "subchunk-mean"
    subs = np.asarray(points[0].vector["subchunks"], dtype=np.float64).mean(axis=0)
    np.testing.assert_allclose(points[0].vector[recipe.node_vector()], subs / np.linalg.norm(subs), atol=1e-5)
    rc, _, err = run(capsys, *base, "--node-source", "encoded")
    assert rc == 2 and "--node-source" in err


def _default_and_plain(tmp_path, capsys, example_data, *flags):
    """A store with collection 'demo' ingested with the defaults and 'plain' with ``flags``; its path."""
    store = str(tmp_path / "q")
    for name, extra in (("demo", ()), ("plain", flags)):
        args = ("ingest", str(example_data), "--collection", name, "--path", store, "--no-progress", *extra)
        assert run(capsys, *args)[0] == 0
    return store


def test_new_collections_store_the_fused_multivector_at_the_search_weight(tmp_path, capsys, fake_cli, example_data):
    from qdrant_tools.search import collection_vectors

    store = _default_and_plain(tmp_path, capsys, example_data, "--fused-weight", "0")
    client = _open(store)
    recipe, fused, plain = read_recipe(client, "demo"), *(collection_vectors(client, c) for c in ("demo", "plain"))
    client.close()
    assert recipe.layout.fused_weight == recipe.search.node_weight == fused.fused_weight
    assert fused.fuses_at(recipe.search.node_weight) and plain.fused is None


def test_new_collections_give_the_node_vectors_an_int8_copy_unless_told(tmp_path, capsys, fake_cli, example_data):
    store = _default_and_plain(tmp_path, capsys, example_data, "--node-quantization", "none")
    base = ("ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    client = _open(store)
    recipes = {c: read_recipe(client, c) for c in ("demo", "plain")}
    quant = {
        c: client.get_collection(c).config.params.vectors[r.node_vector()].quantization_config
        for c, r in recipes.items()
    }
    client.close()
    assert recipes["demo"].layout.node_quantization == "int8" and quant["demo"] is not None
    assert recipes["plain"].layout.node_quantization is None and quant["plain"] is None
    rc, _, err = run(capsys, *base, "--node-quantization", "none")
    assert rc == 2 and "--node-quantization" in err


def test_compact_storage_flags_are_recorded_and_kept(tmp_path, capsys, fake_cli, example_data):
    from qdrant_tools.subchunks import FUSED_VECTOR

    flags = ("--fused-quantization", "int8", "--node-on-disk")
    store = _default_and_plain(tmp_path, capsys, example_data, *flags)
    client = _open(store)
    recipe = read_recipe(client, "plain")
    vectors = client.get_collection("plain").config.params.vectors
    client.close()
    assert (recipe.layout.fused_quantization, recipe.layout.node_on_disk) == ("int8", True)
    assert vectors[FUSED_VECTOR].on_disk and vectors[FUSED_VECTOR].quantization_config is not None
    assert vectors[recipe.node_vector()].on_disk
    base = ("ingest", str(example_data), "--collection", "plain", "--path", store, "--no-progress")
    rc, _, err = run(capsys, *base, "--fused-quantization", "none")
    assert rc == 2 and "--fused-quantization" in err


@pytest.mark.parametrize("weight", ["1", "-0.5"])
def test_a_bad_fused_weight_flag_is_named(tmp_path, capsys, fake_cli, example_data, weight):
    store = str(tmp_path / "q")
    rc, _, err = run(
        capsys, "ingest", str(example_data), "--collection", "d", "--path", store, "--fused-weight", weight
    )
    assert rc == 2 and "--fused-weight must lie in [0, 1)" in err


def test_node_vector_from_sub_chunks_without_sub_chunks_is_refused(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    flags = ("--node-source", "subchunk-mean", "--no-subchunks")
    rc, _, err = run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, *flags)
    assert rc == 2 and "need sub-chunks" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--subchunk-graph-m", "-1"), "--subchunk-graph-m must be an integer >= 0"),
        (("--subchunk-graph-m", "16", "--no-subchunks"), "--no-subchunks stores no sub-chunks"),
    ],
)
def test_a_bad_subchunk_graph_flag_is_named(tmp_path, capsys, fake_cli, example_data, flags, message):
    store = str(tmp_path / "q")
    rc, _, err = run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, *flags)
    assert rc == 2 and message in err


def test_query_flag_that_contradicts_the_recipe_is_an_error(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    assert run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")[0] == 0
    n_loaded = len(fake_cli.encoders)
    rc, _, err = run(capsys, "query", "tides", "--collection", "demo", "--path", store, "--preset", "paper")
    assert rc == 2 and "collection 'demo' was written with calibration none" in err and "basket_size=128" in err
    assert len(fake_cli.encoders) == n_loaded  # refused before any model load


def test_reingest_without_flags_keeps_the_recipe(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    base = ("ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    assert run(capsys, *base, "--subchunk-tokens", "48", "--preset", "paper")[0] == 0
    rc, out, err = run(capsys, *base)
    assert rc == 0 and "0 new, 0 changed" in out, err  # the same recipe: nothing re-embedded
    client = _open(store)
    recipe = read_recipe(client, "demo")
    client.close()
    assert recipe.layout.subchunks.max_tokens == 48 and recipe.encoder_spec().calibration is not None


def test_a_collection_written_before_recipes_learns_one(tmp_path, make_fake):
    from qdrant_tools.ingest import IngestConfig, ingest_documents

    docs = [_doc("a", "The tide rises twice a day. " * 5)]
    client = _open(str(tmp_path / "q"))
    try:
        enc = make_fake()
        ingest_documents(client, "old", docs, {"vanilla": enc}, IngestConfig(show_progress=False))
        assert read_recipe(client, "old") is None
        recipe = Recipe.default()
        ingest_documents(
            client, "old", docs, {"vanilla": enc}, IngestConfig(show_progress=False, metadata=recipe.metadata())
        )
        assert read_recipe(client, "old") == recipe
    finally:
        client.close()


def test_writer_refuses_another_recipe_before_writing(tmp_path, make_fake):
    from qdrant_tools.ingest import IngestConfig, ingest_documents
    from qdrant_tools.spec import CollectionMismatchError

    docs = [_doc("a", "The tide rises twice a day. " * 5)]
    other = [_doc("b", "Lighthouses guide ships at night. " * 5)]
    first = Recipe.default()
    second = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None)), NodeLayout(subchunks=SubchunkConfig(48, 0)))
    client = _open(str(tmp_path / "q"))
    try:
        enc = make_fake()
        ingest_documents(
            client, "c", docs, {"vanilla": enc}, IngestConfig(show_progress=False, metadata=first.metadata())
        )
        before = client.count("c").count
        with pytest.raises(
            CollectionMismatchError, match=r"posfair_recipe\.layout\.subchunks\.max_tokens: stored 32, given 48"
        ):
            ingest_documents(
                client, "c", other, {"vanilla": enc}, IngestConfig(show_progress=False, metadata=second.metadata())
            )
        assert client.count("c").count == before
        assert client.get_collection("c").config.metadata[RECIPE_KEY] == first.metadata()[RECIPE_KEY]
    finally:
        client.close()


def test_bm25_flag_writes_the_hybrid_layout_and_query_fuses_it(tmp_path, capsys, fake_cli, example_data):
    from qdrant_tools.search import collection_vectors

    store = str(tmp_path / "q")
    base = ("ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    assert run(capsys, *base, "--bm25")[0] == 0
    client = _open(store)
    recipe, vectors = read_recipe(client, "demo"), collection_vectors(client, "demo")
    client.close()
    assert recipe.bm25 is not None and recipe.sparse_encoder() is not None and vectors.sparse == "bm25"
    rc, out, err = run(capsys, "query", "waggle dance", "--collection", "demo", "--path", store, "--json")
    assert rc == 0, err
    assert json.loads(out)["results"][0]["doc_id"] == "honeybees.txt"
    rc, _, err = run(capsys, *base, "--no-bm25")
    assert rc == 2 and "collection 'demo' was written with a BM25 vector, but --no-bm25 gives no BM25 vector" in err
    assert "drop --no-bm25 to use the collection's, or write a new collection" in err


def _recipe_only_collection(tmp_path, recipe):
    from qdrant_client import models

    client = _open(str(tmp_path / "q"))
    client.create_collection(
        "c", vectors_config={"vanilla": models.VectorParams(size=384, distance="Cosine")}, metadata=recipe.metadata()
    )
    return client


def test_rerank_from_collection_refuses_an_encoder_that_did_not_write_it(tmp_path, make_fake):
    from llamaindex_posfair.integrations.rerank import PosFairRerank

    client = _recipe_only_collection(tmp_path, Recipe.default())
    try:
        with pytest.raises(CollectionMismatchError, match="but the encoder given is"):
            PosFairRerank.from_collection(client, "c", encoder=make_fake())
    finally:
        client.close()


@pytest.mark.slow
def test_rerank_from_collection_scores_as_the_collection_does(tmp_path):
    from llamaindex_posfair.integrations.rerank import PosFairRerank

    client = _recipe_only_collection(tmp_path, Recipe.default())
    try:
        rerank = PosFairRerank.from_collection(client, "c", top_n=2)
    finally:
        client.close()
    assert rerank.scoring == "weighted" and rerank.node_weight == 0.5 and rerank.subchunk_tokens == 32
    assert rerank.top_n == 2
    assert rerank.spec.fingerprint() == Recipe.default().encoder_spec().fingerprint()


def test_for_encoder_is_the_shipped_layout_for_another_encoder():
    from llamaindex_posfair import EncoderSpec
    from llamaindex_posfair.integrations.recipe import Recipe

    spec = EncoderSpec(calibration=None, max_length=128)
    recipe = Recipe.for_encoder(spec)
    default = Recipe.default()
    assert (recipe.layout, recipe.search, recipe.bm25) == (default.layout, default.search, default.bm25)
    assert recipe.encoder_spec().max_length == 128


def test_ingest_settings_write_the_recipe_and_take_run_fields():
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.ingest import IngestConfig
    from qdrant_tools.metadata import RECIPE_KEY

    recipe = Recipe.default()
    config = recipe.ingest_settings(IngestConfig, batch_size=32, show_progress=False)
    assert isinstance(config, IngestConfig) and config.batch_size == 32 and not config.show_progress
    assert config.layout == recipe.layout and config.sparse is not None
    assert config.metadata[RECIPE_KEY] == recipe.metadata()[RECIPE_KEY]


def test_a_new_recipe_records_the_precision_of_the_device(device_has_bf16):
    spec = EncoderSpec(calibration=None, device="cpu")
    device_has_bf16(True)
    assert Recipe.build(EncoderSet.single(spec)).vectors["vanilla"].dtype == "bfloat16"
    device_has_bf16(False)
    recorded = Recipe.build(EncoderSet.single(spec))
    assert recorded.vectors["vanilla"].dtype == "float32"
    assert recorded.metadata()[RECIPE_KEY]["vectors"]["vanilla"]["dtype"] == "float32"


def test_a_forced_dtype_is_recorded_whatever_the_device(device_has_bf16):
    device_has_bf16(True)
    spec = EncoderSpec(calibration=None, dtype="float32")
    assert Recipe.build(EncoderSet.single(spec)).vectors["vanilla"].dtype == "float32"


def test_writing_follows_the_recorded_precision(device_has_bf16):
    recipe = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None, dtype="bfloat16")))
    device_has_bf16(False)
    assert recipe.encoder_spec().dtype == "bfloat16"
    with pytest.raises(CollectionMismatchError, match="written with dtype 'bfloat16', but --dtype gives 'float32'"):
        recipe.encoder_spec(given={"dtype": "float32"}, names={"dtype": "--dtype"})


def test_a_recipe_recorded_before_automatic_precision_writes_as_saved():
    recipe = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None, dtype=None)))
    assert recipe.vectors["vanilla"].dtype is None and recipe.encoder_spec().dtype is None
    assert recipe.encoder_spec(given={"dtype": "float32"}).dtype is None  # float32 is what None computes
    with pytest.raises(CollectionMismatchError, match="written with dtype none, but dtype gives 'bfloat16'"):
        recipe.encoder_spec(given={"dtype": "bfloat16"})


def test_a_query_spec_takes_any_precision_but_no_other_setting():
    recipe = Recipe.build(EncoderSet.single(EncoderSpec(calibration=None, dtype="bfloat16")))
    assert recipe.encoder_spec(query=True).dtype == "auto"
    assert recipe.encoder_spec(given={"dtype": "float32"}, query=True).dtype == "float32"
    with pytest.raises(CollectionMismatchError, match="query_prompt"):
        recipe.encoder_spec(given={"dtype": "float32", "query_prompt": "q: "}, query=True)


def _layout_of(*flags: str) -> NodeLayout:
    from llamaindex_posfair.cli import build_parser
    from llamaindex_posfair.cli.ingest import layout_from_args

    return layout_from_args(build_parser().parse_args(["ingest", "docs", "--collection", "c", *flags]))


@pytest.mark.parametrize(
    ("flags", "changes"),
    [
        (("--node-source", "subchunk-mean"), {"node_source": "subchunk-mean"}),
        (("--node-quantization", "none"), {"node_quantization": None, "node_on_disk": False}),
        (("--fused-quantization", "binary"), {"fused_quantization": "binary"}),
        (("--subchunk-quantization", "int8"), {"subchunk_quantization": "int8"}),
        (("--subchunk-int8",), {"subchunk_quantization": "int8"}),  # the earlier spelling
    ],
)
def test_each_layout_flag_sets_the_field_of_its_name_with_the_value_typed(flags, changes):
    assert _layout_of(*flags) == NodeLayout().replace(**changes)


def test_a_layout_error_names_the_flags_and_the_values_to_type():
    from llamaindex_posfair.cli.options import CliError

    with pytest.raises(CliError, match="pass --node-quantization int8 or drop --node-on-disk"):
        _layout_of("--node-quantization", "none", "--node-on-disk")
    with pytest.raises(CliError, match="drop --subchunk-quantization / --subchunk-tokens"):
        _layout_of("--subchunk-int8", "--no-subchunks")
