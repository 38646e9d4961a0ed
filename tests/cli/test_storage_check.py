"""``posfair storage check`` and the CLI's messages on a damaged embedded store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llamaindex_posfair.cli import main
from tests.qdrant_tools.store.damage import contents, make_store, overwrite, segment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def root(tmp_path):
    return make_store(tmp_path / "s")


def test_a_clean_collection_exits_0_with_a_summary(root, capsys):
    rc, out, _ = run(capsys, "storage", "check", "c", "--path", str(root))
    assert rc == 0
    assert out.strip().splitlines()[-1] == (
        f"storage check of collection 'c' in {str(root)!r}: 60 points and 120 vectors read; no damage found"
    )


def test_damage_exits_1_and_lists_the_file_and_the_points(root, capsys):
    payloads = segment(root) / "payload_storage"
    overwrite(payloads / "page_0.dat", 0, b"\xff" * 200)
    before = contents(root)
    rc, out, _ = run(capsys, "storage", "check", "c", "--path", str(root), "--no-progress")
    assert rc == 1 and contents(root) == before
    lines = out.strip().splitlines()
    assert lines[0].startswith(f"damaged: {payloads}: ")
    assert any(line.startswith("damaged point ") and "payload:" in line for line in lines)
    assert "DAMAGED:" in lines[-1] and "re-ingest" in lines[-1] and "backup copy" in lines[-1]


def test_json_lists_every_damaged_point(root, capsys):
    os.truncate(segment(root) / "payload_storage" / "page_0.dat", 3000)
    rc, out, _ = run(capsys, "storage", "check", "c", "--path", str(root), "--json")
    doc = json.loads(out)
    assert rc == 1 and not doc["clean"] and doc["counted"] == 60
    assert doc["points"] + len(doc["damaged_points"]) == 60 and len(doc["damaged_points"]) > 1
    assert list(doc["files"]) == [str(segment(root) / "payload_storage")]


def test_a_deleted_store_json_is_reported_with_its_fix(root, capsys):
    os.remove(root / "store.json")
    rc, out, _ = run(capsys, "storage", "check", "c", "--path", str(root))
    assert rc == 1 and f"damaged: {root / 'store.json'}: " in out and "echo '" in out


def test_no_such_collection_or_store_is_a_usage_error(root, tmp_path, capsys):
    rc, _, err = run(capsys, "storage", "check", "x", "--path", str(root))
    assert rc == 2 and "posfair storage check: error: no collection 'x'" in err
    rc, _, err = run(capsys, "storage", "check", "c", "--path", str(tmp_path / "nothing"))
    assert rc == 2 and "no embedded Qdrant storage" in err


def test_a_query_on_a_damaged_store_names_the_file_and_the_fix(tmp_path, capsys, monkeypatch, fake_encoder_factory):
    def load_spec(spec, args):
        return fake_encoder_factory(dimension=256, max_length=32, spec=spec)

    monkeypatch.setattr("llamaindex_posfair.cli.options.load_spec", load_spec)
    store = tmp_path / "q"
    rc, _, _ = run(capsys, "ingest", str(EXAMPLES), "--collection", "demo", "--path", str(store), "--no-progress")
    assert rc == 0
    for page in (store / "collections" / "demo" / "shard").rglob("payload_storage/page_*.dat"):
        os.truncate(page, 0)
    rc, _, err = run(capsys, "query", "honeybees", "--collection", "demo", "--path", str(store))
    assert rc == 2 and err.startswith("posfair query: error: cannot read collection 'demo'")
    assert "payload_storage" in err and f"posfair storage check demo --path {store}" in err
    assert "Traceback" not in err
