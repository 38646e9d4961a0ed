"""A collection never mixes vectors of two encoders: another dtype or retrained weights re-embed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from llamaindex_posfair import EncoderSpec
from qdrant_tools.ingest import IngestConfig, ingest_path
from qdrant_tools.layout import NodeLayout
from qdrant_tools.payload import payload_fields, posfair_fields
from qdrant_tools.store import open_store

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"


@pytest.fixture
def model_folder(tiny_bert_path, tmp_path, monkeypatch):
    monkeypatch.setenv("POSFAIR_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_path, folder)
    return folder


def _ingest(client, spec):
    enc = spec.load()
    return ingest_path(
        client, "c", DATA, {"calibrated": enc}, IngestConfig(show_progress=False, layout=NodeLayout(chunk_tokens=64))
    )


def _fingerprints(client):
    points, _ = client.scroll("c", limit=10_000, with_payload=payload_fields("encoder_fingerprints"))
    return {posfair_fields(p.payload)["encoder_fingerprints"]["calibrated"] for p in points}


def test_reingest_with_another_dtype_re_embeds_everything(model_folder):
    client = open_store(":memory:")
    first = _ingest(client, EncoderSpec(model=str(model_folder), dtype="float32"))
    again = _ingest(client, EncoderSpec(model=str(model_folder), dtype="float32"))
    assert again.chunks_written == 0 and len(again.unchanged) == 5
    bf16 = _ingest(client, EncoderSpec(model=str(model_folder), dtype="bfloat16"))
    assert len(bf16.changed) == 5 and bf16.chunks_written == first.chunks_written
    assert _fingerprints(client) == {EncoderSpec(model=str(model_folder), dtype="bfloat16").fingerprint()}


def test_reingest_after_retraining_in_place_re_embeds_everything(model_folder):
    from sentence_transformers import SentenceTransformer

    client = open_store(":memory:")
    first = _ingest(client, EncoderSpec(model=str(model_folder)))
    st = SentenceTransformer(str(model_folder), device="cpu")
    next(iter(st.parameters())).data.add_(0.01)
    st.save(str(model_folder))  # "retrained" into the same folder
    again = _ingest(client, EncoderSpec(model=str(model_folder)))
    assert len(again.changed) == 5 and again.chunks_written == first.chunks_written
    assert len(_fingerprints(client)) == 1 and client.count("c", exact=True).count == first.chunks_written
