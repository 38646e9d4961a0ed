"""The HTTP API in this process (no Ray): the ingress app over ASGI, its model deployments as plain objects.

The embed and rerank deployments are the real classes (``@serve.batch``, the coalescer, the
tiny random BERT); only Ray's handles are replaced by direct calls, so limits, error
answers, failure isolation and the long-request split are checked in seconds.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import types
import zlib

import httpx
import numpy as np
import pytest
import pytest_asyncio

from llamaindex_posfair.serve.config import BatchingConfig, RequestLimits, ServeConfig, token_digest
from llamaindex_posfair.serve.schemas import ModelCard

pytest.importorskip("ray.serve")
from llamaindex_posfair.serve import deployments, ingress

pytestmark = pytest.mark.asyncio(loop_scope="module")  # the replicas' batch queues live on one event loop

TOKEN = "in-process-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SURROGATE = chr(0xD800)
WORDS = "the river carried silt past old mills and quiet towns toward the sea".split()


def _remote(fn):
    """A Ray handle method: ``.remote(*args)`` returns an awaitable."""

    async def call(*args):
        out = fn(*args)
        return await out if asyncio.iscoroutine(out) else out

    return types.SimpleNamespace(remote=call)


class FakeImages:
    """The image deployment: uniform probabilities (the ingress checks run before it)."""

    def __init__(self):
        self.card = _remote(lambda: ModelCard(id="tiny-vl", kind="image-rerank", routes=["/v1/rerank-images"]))
        self.rerank = _remote(lambda job: [1.0 / len(job.images)] * len(job.images))


def png(width: int, height: int) -> bytes:
    """A tiny PNG file that declares ``width x height`` pixels (its pixel data is a few bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


def small_png() -> str:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (9, 9, 9)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def config(tiny_bert_path):
    from llamaindex_posfair import EncoderSpec

    limits = RequestLimits(max_inputs=64, max_documents=64, max_text_chars=5000, max_request_chars=40_000,
                           max_body_bytes=300_000, max_images=4, max_image_pixels=1_000_000)  # fmt: skip
    return ServeConfig(
        encoder=EncoderSpec(model=tiny_bert_path, device="cpu"),
        batching=BatchingConfig(max_batch_size=16, batch_wait_timeout_s=0.005, call_chars=2000),
        limits=limits,
        token_sha256=token_digest(TOKEN),
    )


@pytest.fixture(scope="module")
def replicas(config):
    embed = deployments.EmbedDeployment.func_or_class(config)
    rerank = deployments.RerankDeployment.func_or_class(config)
    return embed, rerank


@pytest_asyncio.fixture(loop_scope="module")
async def client(config, replicas, monkeypatch):
    from ray import serve

    embed, rerank = replicas
    embed_handle = types.SimpleNamespace(embed=_remote(embed.embed), card=_remote(embed.card))
    rerank_handle = types.SimpleNamespace(rerank=_remote(rerank.rerank), card=_remote(rerank.card))
    user_class = ingress.Ingress.func_or_class.__mro__[1]  # the class under Serve's ASGI wrapper
    app = user_class(config, embed_handle, rerank_handle, FakeImages())
    context = types.SimpleNamespace(
        servable_object=app, _deployment_config=types.SimpleNamespace(max_ongoing_requests=64)
    )
    monkeypatch.setattr(serve, "get_replica_context", lambda: context)  # what the routes and @serve.batch read
    served = user_class.__init__.__globals__["api"]  # the app Serve froze for the class (a copy of ingress.api)
    transport = httpx.ASGITransport(app=served)
    async with httpx.AsyncClient(transport=transport, base_url="http://serve", headers=AUTH, timeout=60) as c:
        yield c


VALID = {
    "/v1/embeddings": {"input": ["a valid text"]},
    "/v1/embed": {"texts": ["a valid text"], "input_type": "search_document"},
    "/v2/embed": {"texts": ["a valid text"], "input_type": "search_document", "embedding_types": ["float"]},
    "/embed": {"inputs": ["a valid text"]},
    "/v1/rerank": {"query": "q", "documents": ["a", "b"]},
    "/v2/rerank": {"query": "q", "documents": ["a", "b"]},
    "/rerank": {"query": "q", "texts": ["a", "b"]},
    "/v1/rerank-images": {"query": "q", "images": [small_png(), small_png()], "method": "vanilla"},
}


# ---------------------------------------------------------------------- one request cannot fail others
@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        ("/v1/embeddings", {"input": ["ok", "bad " + SURROGATE]}, "input[1]"),
        ("/embed", {"inputs": ["bad " + SURROGATE]}, "inputs[0]"),
        ("/v2/rerank", {"query": "q", "documents": ["ok", "ok", SURROGATE + " x"]}, "documents[2]"),
        ("/v1/rerank", {"query": "q " + SURROGATE, "documents": ["ok"]}, "query"),
        ("/v1/rerank-images", {"query": SURROGATE, "images": ["x", "y"]}, "query"),
    ],
)
async def test_a_lone_surrogate_is_refused_at_the_edge_naming_field_and_index(client, path, body, where):
    r = await client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code in (400, 422), r.text
    assert f"{where} holds a lone surrogate" in r.text


async def test_a_request_that_breaks_the_shared_batch_fails_alone(client, replicas, monkeypatch):
    embed, _ = replicas
    encoder = embed._worker.encoder
    real = encoder.encode_documents

    def poisoned(texts, *a, **kw):
        if any("POISON" in t for t in texts):
            raise ValueError("this text cannot be tokenised")
        return real(texts, *a, **kw)

    monkeypatch.setattr(encoder, "encode_documents", poisoned)
    bodies = [{"input": [f"valid text number {i}"]} for i in range(24)]
    bodies[7] = {"input": ["POISON here"]}
    answers = await asyncio.gather(*(client.post("/v1/embeddings", json=b) for b in bodies))
    statuses = [r.status_code for r in answers]
    assert statuses[7] == 400 and "cannot be tokenised" in answers[7].text
    assert statuses[:7] + statuses[8:] == [200] * 23
    assert max(embed._coalescer.calls[-5:]) > 1  # they did share calls


# ---------------------------------------------------------------------- one request cannot stall others
async def test_a_long_request_is_cut_into_parts_with_the_same_vectors(client, replicas, tiny_encoder):
    embed, _ = replicas
    texts = [" ".join(WORDS * 10)[: 400 + 37 * i] for i in range(12)]  # ~7,700 characters, call_chars 2000
    before = len(embed._coalescer.calls)
    r = await client.post("/v1/embeddings", json={"input": texts})
    assert r.status_code == 200
    assert len(embed._coalescer.calls) - before >= 4  # at least four model calls took turns
    got = np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32)
    np.testing.assert_allclose(got, tiny_encoder.encode_documents(texts), atol=1e-5)
    r = await client.post("/v1/rerank", json={"query": "silt", "documents": texts, "top_n": 12})
    assert r.status_code == 200 and sorted(x["index"] for x in r.json()["results"]) == list(range(12))


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/embeddings", {"input": ["x" * 4000] * 11}, 413,
         "holds 44000 characters of text; this server accepts at most 40000 per request (max_request_chars, "
         "--max-request-chars)"),
        ("/embed", {"inputs": ["x" * 4000] * 11}, 413, "--max-request-chars"),
        ("/v1/rerank", {"query": "q", "documents": ["x" * 4000] * 11}, 413, "--max-request-chars"),
        ("/v1/rerank", {"query": "q" * 6000, "documents": ["a"]}, 400, "query has 6000 characters"),
        ("/v1/rerank", {"query": "q", "documents": ["a"], "scoring": "subchunks", "subchunk_tokens": 4}, 400,
         "subchunk_tokens: Input should be greater than or equal to 8"),
        ("/v2/rerank", {"query": "q", "documents": ["a"], "top_n": 10**12}, 422, "top_n: Input should be less"),
        ("/v1/rerank", {"query": "q", "documents": ["a"], "subchunk_overlap": 10**6}, 400, "subchunk_overlap"),
        ("/v1/embeddings", {"input": ["a"], "dimensions": 10**9}, 400, "dimensions: Input should be less"),
        ("/v1/rerank-images", {"query": "q", "images": ["a", "b"], "sharpen": 1e308}, 400, "sharpen"),
        ("/v1/rerank-images", {"query": "q", "images": ["a", "b"], "top_k_layers": 10**9}, 400, "top_k_layers"),
    ],
)  # fmt: skip
async def test_every_request_is_bounded_with_a_message_naming_the_limit(client, path, body, status, message):
    r = await client.post(path, json=body)
    assert r.status_code == status, r.text
    assert message in r.text


async def test_a_body_over_the_limit_is_a_413_before_it_is_parsed(client):
    r = await client.post("/v1/embeddings", content=b"{" + b" " * 400_000 + b"}")
    assert r.status_code == 413 and "--max-body-bytes" in r.json()["error"]["message"]

    async def chunks():  # no Content-Length: counted as it arrives
        for _ in range(40):
            yield b" " * 10_000

    r = await client.post("/embed", content=chunks())
    assert r.status_code == 413 and "larger than this server's limit of 300000 bytes" in r.json()["error"]


@pytest.mark.parametrize(
    ("path", "fields"), [("/v1/embeddings", "'input'"), ("/v1/rerank", "'query', 'documents'"), ("/embed", "'inputs'")]
)
async def test_an_empty_body_names_what_is_required(client, path, fields):
    r = await client.post(path, content=b"", headers={"content-type": "application/json"})
    assert r.status_code in (400, 422)
    assert f"a JSON object body is required; send one with {fields}" in r.text
    r = await client.post(path, json=[1, 2])
    assert "the request body must be a JSON object with" in r.text


# ---------------------------------------------------------------------- images: the header before the pixels
@pytest.mark.parametrize(("width", "height"), [(20_000, 20_000), (13_000, 13_000), (1001, 1000)])
async def test_an_image_declaring_too_many_pixels_is_a_400_before_decoding(client, width, height):
    bomb = base64.b64encode(png(width, height)).decode()
    r = await client.post("/v1/rerank-images", json={"query": "q", "images": [small_png(), bomb], "method": "vanilla"})
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert message.startswith("images[1] declares") and "at most 1000000 pixels per image" in message
    assert "--max-image-pixels" in message
    ok = await client.post("/v1/rerank-images", json=VALID["/v1/rerank-images"])
    assert ok.status_code == 200, ok.text


# ---------------------------------------------------------------------- tokens
async def test_failed_token_checks_are_answered_later_and_later_for_that_client_only(client, monkeypatch):
    waits = []

    async def sleep(seconds):
        waits.append(seconds)

    throttle = ingress.AuthThrottle(base_s=0.05, max_s=0.2)
    throttle.sleep = sleep
    monkeypatch.setattr(ingress, "AUTH_THROTTLE", throttle)
    for _ in range(4):
        r = await client.post("/v1/embeddings", json={"input": ["a"]}, headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401
    assert waits == [0.05, 0.1, 0.2, 0.2]
    r = await client.post("/v1/embeddings", json={"input": ["a"]})
    assert r.status_code == 200 and waits == [0.05, 0.1, 0.2, 0.2]  # a valid token never waits
    assert throttle.failed("127.0.0.1") == 0.05  # the success cleared this client's count
    assert throttle.failed("10.9.9.9") == 0.05  # and counts are per client


# ---------------------------------------------------------------------- bounded fuzz of every route
BAD_VALUES = [None, True, 0, -1, 10**30, -(10**30), 1.5e308, "", " ", "x" * 6000, SURROGATE, [], [[]], [None], [1, 2],
              [SURROGATE], {}, {"text": 3}, "not base64!!", ["data:image/png;base64,AAAA"] * 3]  # fmt: skip
BAD_BODIES = [b"", b"not json", b"[]", b"null", b"3", b'"text"', b"{", b'{"input": NaN}', b'{"query": Infinity}',
              b'{"input": "\\ud800"}', b'{"documents": "\\udfff", "query": "q"}', "{\"input\": \"\u00e9\"}".encode("latin-1")]  # fmt: skip
GET_ROUTES = ["/health", "/ready", "/metrics", "/v1/models", "/info", "/openapi.json", "/nowhere"]


def _mutations(valid: dict) -> list[bytes]:
    """Bodies of ``valid`` with one field set to each bad value, one field dropped, and an unknown field added."""
    out = [json.dumps({**valid, key: bad}).encode() for key in valid for bad in BAD_VALUES]
    out += [json.dumps({k: v for k, v in valid.items() if k != key}).encode() for key in valid]
    return [*out, json.dumps({**valid, "extra": [1, {"a": None}]}).encode()]


@pytest.mark.parametrize("path", list(VALID))
async def test_no_bad_input_gets_a_500_and_a_valid_request_still_works_after_each(client, path):
    headers = {"content-type": "application/json"}
    bodies = _mutations(VALID[path]) + BAD_BODIES
    for body in bodies:
        r = await client.post(path, content=body, headers=headers)
        assert r.status_code < 500, (body[:200], r.status_code, r.text[:300])
        assert r.headers["content-type"].startswith("application/json"), body[:200]
        bad, ok = await asyncio.gather(
            client.post(path, content=body, headers=headers), client.post(path, json=VALID[path])
        )
        assert bad.status_code < 500 and ok.status_code == 200, (body[:200], ok.text[:300])  # sharing a batch


async def test_every_get_route_and_unknown_route_answers_below_500(client):
    for path in GET_ROUTES:
        r = await client.get(path)
        assert r.status_code in (200, 404), (path, r.text[:200])
    r = await client.post("/v1/embeddings", json=VALID["/v1/embeddings"])
    assert r.status_code == 200
