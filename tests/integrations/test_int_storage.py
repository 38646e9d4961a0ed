"""``posfair storage migrate --collection NAME --to NEW``: a collection copied into the fused layout."""

from __future__ import annotations

import json

import pytest

from llamaindex_posfair.integrations.recipe import read_recipe
from qdrant_tools.metadata import FUSED_WEIGHT_KEY
from qdrant_tools.search import collection_vectors


def run(capsys, *argv):
    from llamaindex_posfair.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _open(store):
    from qdrant_tools.store import open_store

    return open_store(store)


@pytest.fixture
def store(tmp_path, capsys, fake_cli, example_data):
    """A store whose collection 'plain' was ingested without fused rows (``--fused-weight 0``)."""
    path = str(tmp_path / "q")
    args = ("ingest", str(example_data), "--collection", "plain", "--path", path, "--no-progress")
    assert run(capsys, *args, "--fused-weight", "0", "--node-quantization", "none")[0] == 0
    return path


def test_the_copy_records_the_fused_layout_in_its_recipe(store, capsys):
    rc, out, _ = run(capsys, "storage", "migrate", "--collection", "plain", "--to", "fused", "--path", store)
    assert rc == 0 and "'fused'" in out and "node weight" in out
    client = _open(store)
    recipe, metadata = read_recipe(client, "fused"), client.get_collection("fused").config.metadata
    vectors = collection_vectors(client, "fused")
    client.close()
    assert recipe.layout.fused_weight == recipe.search.node_weight and recipe.layout.node_quantization == "int8"
    assert FUSED_WEIGHT_KEY not in metadata  # the weight is recorded once, in the recipe's layout
    assert vectors.fused_weight == recipe.layout.fused_weight


def test_ingesting_the_same_files_into_the_copy_encodes_nothing(store, capsys, example_data):
    assert run(capsys, "storage", "migrate", "--collection", "plain", "--to", "fused", "--path", store)[0] == 0
    rc, out, err = run(capsys, "ingest", str(example_data), "--collection", "fused", "--path", store, "--no-progress")
    assert rc == 0 and "0 new, 0 changed" in out, err


def test_json_names_the_copy(store, capsys):
    args = ("storage", "migrate", "--collection", "plain", "--to", "f", "--path", store, "--json")
    rc, out, _ = run(capsys, *args, "--fused-weight", "0.3")
    got = json.loads(out)
    assert rc == 0 and (got["to"], got["fused_weight"]) == ("f", 0.3) and got["points"] > 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--collection", "plain"), "needs both --collection NAME and --to NEW"),
        (("--collection", "nope", "--to", "x"), "collection 'nope' does not exist"),
        (("--collection", "plain", "--to", "x", "--fused-weight", "1"), "strictly between 0 and 1"),
    ],
)
def test_a_bad_request_is_named(store, capsys, flags, message):
    rc, _, err = run(capsys, "storage", "migrate", "--path", store, *flags)
    assert rc == 2 and message in err


def test_a_collection_already_fused_is_refused(store, capsys):
    assert run(capsys, "storage", "migrate", "--collection", "plain", "--to", "fused", "--path", store)[0] == 0
    rc, _, err = run(capsys, "storage", "migrate", "--collection", "fused", "--to", "again", "--path", store)
    assert rc == 2 and "already holds fused rows" in err


def test_a_collection_without_sub_chunks_is_told_to_re_ingest(store, capsys, example_data):
    args = ("ingest", str(example_data), "--collection", "nodes", "--path", store, "--no-progress", "--no-subchunks")
    assert run(capsys, *args)[0] == 0
    rc, _, err = run(capsys, "storage", "migrate", "--collection", "nodes", "--to", "x", "--path", store)
    assert rc == 2 and "no sub-chunk multivector" in err and "re-ingest" in err


def test_a_fused_collection_moves_into_compact_storage_and_reingests_nothing(store, capsys, example_data):
    floats = ("--fused-quantization", "none", "--no-node-on-disk")
    assert run(capsys, "storage", "migrate", "--collection", "plain", "--to", "fused", "--path", store, *floats)[0] == 0
    flags = ("--fused-quantization", "int8", "--node-on-disk")
    rc, out, err = run(capsys, "storage", "migrate", "--collection", "fused", "--to", "small", "--path", store, *flags)
    assert rc == 0, err
    again = run(capsys, "storage", "migrate", "--collection", "small", "--to", "again", "--path", store, *flags)
    assert again[0] == 2 and "stored this way; nothing to do" in again[2]
    client = _open(store)
    layout = read_recipe(client, "small").layout
    client.close()
    assert (layout.fused_quantization, layout.node_on_disk, layout.node_quantization) == ("int8", True, "int8")
    rc, out, err = run(capsys, "ingest", str(example_data), "--collection", "small", "--path", store, "--no-progress")
    assert rc == 0 and "0 new, 0 changed" in out, err
