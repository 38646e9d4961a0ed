from __future__ import annotations

import asyncio
import logging
from typing import ClassVar

import numpy as np
import pytest
from llama_index.core.ingestion import IngestionCache, IngestionPipeline
from llama_index.core.ingestion.pipeline import get_transformation_hash
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.schema import TextNode

from llamaindex_posfair import CalibrationConfig, PosFairEmbedding


class Collector(BaseEventHandler):
    events: ClassVar[list] = []

    @classmethod
    def class_name(cls) -> str:
        return "Collector"

    def handle(self, event, **kwargs):
        self.events.append(event)


@pytest.fixture
def events():
    root = get_dispatcher()
    h = Collector(events=[])
    root.add_event_handler(h)
    yield h.events
    root.event_handlers.remove(h)


NODES = [TextNode(text="alpha beta", id_="n1"), TextNode(text="gamma delta", id_="n2")]


def test_round_trips_through_to_dict_with_the_same_cache_key(fake_encoder):
    emb = PosFairEmbedding(encoder=fake_encoder, embed_batch_size=7)
    data = emb.to_dict()
    assert data["class_name"] == PosFairEmbedding.__name__  # not BaseEmbedding's: the name is part of the cache key
    again = PosFairEmbedding.from_dict(data, encoder=fake_encoder)
    assert again.to_dict() == data
    assert get_transformation_hash(NODES, again) == get_transformation_hash(NODES, emb)


def test_query_path_uses_encode_queries(fake_encoder):
    emb = PosFairEmbedding(encoder=fake_encoder)
    v = emb.get_query_embedding("alpha")
    cal = fake_encoder.calibration
    assert fake_encoder.calls == [("query", 1, cal)]
    np.testing.assert_allclose(v, fake_encoder._vec(["alpha"], cal)[0], atol=1e-6)


def test_text_batch_uses_encode_documents(fake_encoder):
    emb = PosFairEmbedding(encoder=fake_encoder, embed_batch_size=10)
    out = emb.get_text_embedding_batch(["a b", "c d", "e f"])
    assert len(out) == 3 and fake_encoder.calls == [("document", 3, fake_encoder.calibration)]


def test_empty_query_raises_with_value(fake_encoder):
    with pytest.raises(ValueError, match="query must be a non-empty string, got '  '"):
        PosFairEmbedding(encoder=fake_encoder).get_query_embedding("  ")


def test_truncation_is_counted_in_a_warning(fake_encoder, caplog):
    emb = PosFairEmbedding(encoder=fake_encoder)  # max_length 32 = 30 words
    with caplog.at_level(logging.WARNING):
        emb.get_text_embedding_batch(["w " * 40, "short", "w " * 31])
    assert "2 of 3 texts exceed max_length=32" in caplog.text


@pytest.mark.parametrize(
    "change",
    [
        {"calibration": CalibrationConfig(strength=0.3)},
        {"calibration": CalibrationConfig(basket_size=64)},
        {"calibration": CalibrationConfig(layers="last")},
        {"calibration": None},
        {"query_prompt": "query: "},
        {"document_prompt": "passage: "},
        {"normalize": False},
        {"dtype": "bfloat16"},
        {"max_length": 64},
        {"weights": "retrained-in-place"},
        {"model": "other/model"},
    ],
    ids=lambda c: next(iter(c)) + ("=" + str(next(iter(c.values())))[:20]),
)
def test_every_vector_setting_changes_the_ingestion_cache_key(fake_encoder, change):
    base = PosFairEmbedding(encoder=fake_encoder)
    other = base.model_copy(update={"spec": base.spec.model_copy(update=change)})
    assert get_transformation_hash(NODES, base) != get_transformation_hash(NODES, other)


def test_embed_batch_size_changes_the_ingestion_cache_key(fake_encoder):
    base = PosFairEmbedding(encoder=fake_encoder)
    other = base.model_copy(update={"embed_batch_size": 7})
    assert get_transformation_hash(NODES, base) != get_transformation_hash(NODES, other)


def test_cache_key_with_encoder_describes_the_loaded_encoder(make_fake):
    """encoder= used to copy only some fields: two encoders differing in dtype gave one cache key."""
    from llamaindex_posfair import EncoderSpec

    a = make_fake(spec=EncoderSpec(model="m", dtype="float32"))
    b = make_fake(spec=EncoderSpec(model="m", dtype="bfloat16"))
    ea, eb = PosFairEmbedding(encoder=a), PosFairEmbedding(encoder=b)
    assert ea.spec == a.spec and eb.spec == b.spec
    assert get_transformation_hash(NODES, ea) != get_transformation_hash(NODES, eb)


def test_encoder_together_with_settings_is_refused(fake_encoder):
    with pytest.raises(ValueError, match=r"settings \['query_prompt'\] disagree with the spec"):
        PosFairEmbedding(encoder=fake_encoder, query_prompt="q: ")


def test_ingestion_pipeline_cache_reuses_then_recomputes_on_new_calibration(make_fake):
    cache = IngestionCache()
    enc = make_fake(calibration=CalibrationConfig())
    for _ in range(2):
        nodes = IngestionPipeline(transformations=[PosFairEmbedding(encoder=enc)], cache=cache).run(
            nodes=[n.model_copy() for n in NODES]
        )
    assert len(enc.calls) == 1 and nodes[0].embedding is not None
    enc2 = make_fake(calibration=CalibrationConfig(strength=0.2))
    IngestionPipeline(transformations=[PosFairEmbedding(encoder=enc2)], cache=cache).run(
        nodes=[n.model_copy() for n in NODES]
    )
    assert len(enc2.calls) == 1


def test_embedding_events_are_emitted(fake_encoder, events):
    PosFairEmbedding(encoder=fake_encoder).get_text_embedding_batch(["a", "b"])
    names = [type(e).__name__ for e in events]
    assert names.count("EmbeddingStartEvent") == 1 and names.count("EmbeddingEndEvent") == 1


async def test_async_embedding_equals_sync(fake_encoder):
    emb = PosFairEmbedding(encoder=fake_encoder)
    assert await emb.aget_query_embedding("alpha beta") == emb.get_query_embedding("alpha beta")
    assert await emb.aget_text_embedding_batch(["x y", "z"]) == emb.get_text_embedding_batch(["x y", "z"])


async def test_async_embedding_does_not_block_event_loop(make_fake):
    emb = PosFairEmbedding(encoder=make_fake(delay=0.4))
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.create_task(ticker())
    await emb.aget_text_embedding_batch(["a", "b"])
    t.cancel()
    assert ticks >= 10


async def test_async_empty_query_raises(fake_encoder):
    with pytest.raises(ValueError, match="non-empty"):
        await PosFairEmbedding(encoder=fake_encoder).aget_query_embedding("")


def test_dump_tokens_mismatch_is_rejected(tiny_bert_path):
    with pytest.raises(ValueError, match=r"dump_tokens=4, but model .* has 0 \[DUMP\] prefix tokens"):
        PosFairEmbedding(model_name=tiny_bert_path, calibration=None, dump_tokens=4)


def test_invalid_field_is_rejected_before_loading(fake_encoder):
    with pytest.raises(ValueError, match="max_length"):
        PosFairEmbedding(encoder=None, max_length=1)


@pytest.mark.slow
def test_plain_embedding_matches_sentence_transformers(minilm):
    emb = PosFairEmbedding()  # the defaults: the bundled MiniLM, plain
    assert emb.calibration is None
    texts = ["The tide rises twice a day.", "Bees dance to share directions."]
    ref = minilm.sentence_transformer.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(np.array(emb.get_text_embedding_batch(texts)), ref, atol=1e-5)
    assert emb.encoder.dump_tokens == 0 and emb.encoder.max_length == 256


@pytest.mark.slow
def test_unknown_model_names_the_model_and_the_fix():
    with pytest.raises(OSError, match="no-such/model-xyz.*bundled:all-MiniLM-L6-v2"):
        PosFairEmbedding(model_name="no-such/model-xyz")


def test_empty_texts_are_embedded_with_a_counted_warning(fake_encoder, caplog):
    with caplog.at_level(logging.WARNING):
        out = PosFairEmbedding(encoder=fake_encoder).get_text_embedding_batch(["", "alpha", " "])
    assert len(out) == 3 and "2 of 3 texts are empty" in caplog.text


def test_each_call_runs_in_the_encoders_own_forward_batches(fake_encoder, monkeypatch):
    seen = []
    original = fake_encoder.encode_documents

    def spy(texts, **kwargs):
        seen.append((len(texts), kwargs.get("batch_size")))
        return original(texts, **kwargs)

    monkeypatch.setattr(fake_encoder, "encode_documents", spy)
    PosFairEmbedding(encoder=fake_encoder, embed_batch_size=50).get_text_embedding_batch([f"t {i}" for i in range(120)])
    assert seen == [(50, None), (50, None), (20, None)]  # LlamaIndex's calls; no forward batch forced on the encoder
