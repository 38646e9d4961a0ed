"""ServeClient (no server): bounded retries on transient errors only, clear errors, the spec check."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from llamaindex_posfair import CalibrationConfig, EncoderSpec
from llamaindex_posfair.serve.client import ServeClient, ServeError, ServeMismatchError
from llamaindex_posfair.serve.runner import free_port
from llamaindex_posfair.serve.schemas import ModelList, encode_vector
from llamaindex_posfair.serve.worker import EncoderWorker
from qdrant_tools.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=4, base_delay=0.0, max_delay=0.0, deadline=None)
VEC = np.arange(4, dtype=np.float32)


def embeddings_answer():
    data = [{"object": "embedding", "index": 0, "embedding": encode_vector(VEC, "base64")}]
    return {"object": "list", "data": data, "model": "m", "usage": {}, "truncated": 1}


def flaky(statuses):
    """A transport answering ``statuses`` in turn (an error body for >= 400), then embeddings."""
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        status = statuses[len(calls) - 1] if len(calls) <= len(statuses) else 200
        if status >= 400:
            return httpx.Response(status, json={"error": {"message": f"boom {status}"}}, headers={"Retry-After": "0"})
        return httpx.Response(200, json=embeddings_answer())

    return httpx.MockTransport(handler), calls


def test_transient_503s_are_retried_until_answered():
    transport, calls = flaky([503, 502])
    vectors, truncated = ServeClient("http://x", policy=FAST, transport=transport).embed(["a"], "query")
    assert len(calls) == 3 and truncated == 1
    np.testing.assert_array_equal(vectors[0], VEC)


async def test_async_calls_retry_the_same_way():
    transport, calls = flaky([503])
    vectors, _ = await ServeClient("http://x", policy=FAST, transport=transport).aembed(["a"], "document")
    assert len(calls) == 2
    np.testing.assert_array_equal(vectors[0], VEC)


def test_a_400_is_raised_at_once_with_the_server_message():
    transport, calls = flaky([400])
    with pytest.raises(ServeError, match="answered 400 to POST /v1/embeddings: boom 400") as info:
        ServeClient("http://x", policy=FAST, transport=transport).embed(["a"], "query")
    assert len(calls) == 1 and info.value.retryable is False


def test_retries_are_bounded():
    transport, calls = flaky([503] * 10)
    with pytest.raises(ServeError, match="answered 503") as info:
        ServeClient("http://x", policy=FAST, transport=transport).embed(["a"], "query")
    assert len(calls) == FAST.max_attempts and info.value.retryable is True


def test_an_unreachable_server_is_named():
    url = f"http://127.0.0.1:{free_port()}"
    client = ServeClient(url, policy=RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=0.0), timeout_s=2)
    with pytest.raises(ServeError, match=f"cannot reach posfair serve at {url}"):
        client.embed(["a"], "query")


def test_the_token_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("POSFAIR_SERVE_TOKEN", "s3cret")
    seen = []
    transport = httpx.MockTransport(
        lambda r: seen.append(r.headers.get("authorization")) or httpx.Response(200, json=embeddings_answer())
    )
    ServeClient("http://x", transport=transport).embed(["a"], "query")
    assert seen == ["Bearer s3cret"]


def test_endpoint_must_be_a_url():
    with pytest.raises(ValueError, match="endpoint must be an http"):
        ServeClient("localhost:8000")


# ---------------------------------------------------------------------- the spec check
def serving(card):
    body = ModelList(data=[card]).model_dump(mode="json")
    return httpx.MockTransport(lambda r: httpx.Response(200, json=body))


@pytest.fixture(scope="module")
def card(tiny_encoder):
    return EncoderWorker(tiny_encoder.spec, token_budget=512, encoder=tiny_encoder).card()


def test_the_same_spec_passes_and_comes_back_pinned(card, tiny_bert_path):
    expected = EncoderSpec(model=tiny_bert_path)
    pinned, got = ServeClient("http://x", transport=serving(card)).check_encoder(expected)
    assert pinned.fingerprint() == card.fingerprint and pinned.weights == card.spec["weights"] and got.dimension == 32


def test_another_calibration_is_a_mismatch_naming_it(card, tiny_bert_path):
    expected = EncoderSpec(model=tiny_bert_path, calibration=CalibrationConfig(strength=0.3))
    with pytest.raises(ServeMismatchError, match="serves other vectors .* calibration: expected"):
        ServeClient("http://x", transport=serving(card)).check_encoder(expected)


def test_model_files_absent_here_adopt_the_served_weights(card):
    hub = card.model_copy(update={"spec": {**card.spec, "model": "org/not-downloaded"}})
    served = EncoderSpec.model_validate(hub.spec)
    hub = hub.model_copy(update={"fingerprint": served.fingerprint()})
    pinned, _ = ServeClient("http://x", transport=serving(hub)).check_encoder(EncoderSpec(model="org/not-downloaded"))
    assert pinned.weights == card.spec["weights"]


def test_an_auto_dtype_adopts_the_servers_precision(card, tiny_bert_path):
    bf16 = card.model_copy(update={"spec": {**card.spec, "dtype": "bfloat16"}})
    bf16 = bf16.model_copy(update={"fingerprint": EncoderSpec.model_validate(bf16.spec).fingerprint()})
    pinned, _ = ServeClient("http://x", transport=serving(bf16)).check_encoder(EncoderSpec(model=tiny_bert_path))
    assert pinned.dtype == "bfloat16" and pinned.fingerprint() == bf16.fingerprint


def test_a_forced_dtype_is_checked_against_the_servers(card, tiny_bert_path):
    bf16 = card.model_copy(update={"spec": {**card.spec, "dtype": "bfloat16"}})
    bf16 = bf16.model_copy(update={"fingerprint": EncoderSpec.model_validate(bf16.spec).fingerprint()})
    with pytest.raises(ServeMismatchError, match="dtype"):
        ServeClient("http://x", transport=serving(bf16)).check_encoder(
            EncoderSpec(model=tiny_bert_path, dtype="float32")
        )
