"""The default path a new user types: ``posfair ingest`` -> ``posfair serve`` -> ``posfair query --endpoint``.

Every command runs with its defaults (the bundled MiniLM, real weights), as a user
runs them, each in its own process; the collection's recipe makes them agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray.serve")

REPO = Path(__file__).resolve().parents[2]
QUESTION = "How far can the water level change in the Bay of Fundy?"


def posfair(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "llamaindex_posfair.cli", *argv]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_ingest_serve_query_endpoint_with_defaults(tmp_path, serve_process):
    done = posfair(tmp_path, "ingest", str(REPO / "examples" / "data"), "--collection", "demo", "--no-progress")
    assert done.returncode == 0, done.stderr
    server = serve_process(tmp_path)  # `posfair serve` with no model or calibration flag
    try:
        server.wait_ready()
        done = posfair(tmp_path, "query", QUESTION, "--collection", "demo", "--endpoint", server.url, "--json")
        assert done.returncode == 0, done.stderr
        results = json.loads(done.stdout)["results"]
        assert results[0]["doc_id"] == "tides.md"
        assert "sixteen metres" in results[0]["text"]
        assert server.stop() == 0
    finally:
        server.close()


def test_serve_with_a_collection_serves_its_recipe(tmp_path):
    """``posfair serve --collection C`` reads the encoder from C's recipe (no Ray needed to check it)."""
    import argparse

    from llamaindex_posfair.calibration.config import CalibrationConfig
    from llamaindex_posfair.cli import build_parser
    from llamaindex_posfair.cli.serve import config_from_args
    from llamaindex_posfair.encoders.spec import EncoderSet, EncoderSpec
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.store import open_store

    calibrated = EncoderSpec(max_length=128, calibration=CalibrationConfig())  # not the default: calibrated, shorter
    recipe = Recipe.build(EncoderSet.single(calibrated))
    store = tmp_path / "q"
    client = open_store(str(store))
    from qdrant_client import models

    client.create_collection(
        "c", vectors_config={"calibrated": models.VectorParams(size=384, distance="Cosine")}, metadata=recipe.metadata()
    )
    client.close()
    args: argparse.Namespace = build_parser().parse_args(["serve", "--collection", "c", "--path", str(store)])
    assert config_from_args(args).encoder.fingerprint() == recipe.encoder_spec().fingerprint()
    args = build_parser().parse_args(["serve"])
    assert config_from_args(args).encoder.fingerprint() == Recipe.default().encoder_spec().fingerprint()
    assert config_from_args(args).encoder.fingerprint() == EncoderSpec().fingerprint()  # serve's default: EncoderSpec()
