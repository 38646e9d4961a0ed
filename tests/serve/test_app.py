"""``posfair serve`` on a local Ray (CPU): one server for the whole module.

The server (a ``posfair serve`` subprocess, see ``conftest.py``) serves the tiny
random BERT (2 embed and 2 rerank replicas, dynamic batching) and a tiny random
Qwen2-VL with a fitted calibration state, behind a bearer token. Everything binds
to 127.0.0.1 and every HTTP call has a timeout.
"""

from __future__ import annotations

import concurrent.futures as futures
import os
import random
import signal
import threading
import time
from dataclasses import dataclass

import httpx
import numpy as np
import pytest
from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle, TextNode

pytest.importorskip("ray.serve")

from llamaindex_posfair import CalibrationConfig, EncoderSpec, PosFairEmbedding, PosFairRerank
from llamaindex_posfair.serve.client import ServeMismatchError

TOKEN = "test-token-123"
TIMEOUT = 60.0
WORDS = "the river carried silt past old mills and quiet towns toward the sea".split()
TEXTS = ["short", " ".join(WORDS * 3), " ".join(WORDS * 9), " ".join(WORDS), "what carried the silt?"]


@dataclass
class Server:
    url: str
    spec: EncoderSpec
    calibration: str
    images: object
    process: object

    def post(self, path, body, token=TOKEN, client=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return (client or httpx).post(self.url + path, json=body, headers=headers, timeout=TIMEOUT)


def fit_calibration(folder, out):
    from PIL import Image

    from llamaindex_posfair.multimodal.calibrator import AttentionGuidedCalibrator
    from llamaindex_posfair.multimodal.tiny import build_tiny_adapter
    from llamaindex_posfair.multimodal.types import Candidates

    adapter = build_tiny_adapter("qwen2_vl")
    imgs = [Image.open(folder / f"img_{i:03d}.png").convert("RGB") for i in range(8)]
    samples = [Candidates("a red circle", tuple(imgs[i : i + 4]), answer=i % 4) for i in range(2)]
    AttentionGuidedCalibrator().fit(adapter, samples).save(out)
    return adapter


#: The calibration the test server serves (``--strength 0.5``; the other calibration settings at their defaults).
SERVED_CALIBRATION = CalibrationConfig(strength=0.5)


@pytest.fixture(scope="module")
def served_encoder(tiny_bert_path):
    """The encoder the test server serves, loaded in this process."""
    return EncoderSpec(model=tiny_bert_path, calibration=SERVED_CALIBRATION, device="cpu").load()


@pytest.fixture(scope="module")
def server(tiny_bert_path, tmp_path_factory, serve_process):
    from llamaindex_posfair.multimodal.tiny import write_synthetic_image_folder

    tmp = tmp_path_factory.mktemp("serve_app")
    folder = write_synthetic_image_folder(tmp / "images", count=8, size=56)
    calibration = str(folder / "cal.safetensors")
    adapter = fit_calibration(folder, calibration)
    flags = ["--model", tiny_bert_path, "--strength", "0.5", "--device", "cpu", "--replicas", "2", "--max-batch-size", "16",
             "--batch-wait-timeout-s", "0.02", "--token-budget", "4096", "--max-inputs", "8", "--max-documents", "20",
             "--max-text-chars", "2000", "--max-images", "6", "--mm-model", "tiny", "--mm-calibration", calibration]  # fmt: skip
    process = serve_process(tmp, *flags, token=TOKEN)
    try:
        process.wait_ready()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("POSFAIR_SERVE_TOKEN", TOKEN)  # what the remote classes send
            spec = EncoderSpec(model=tiny_bert_path, calibration=SERVED_CALIBRATION).pinned()
            yield Server(process.url, spec, calibration, (adapter, folder), process)
        process.stop()
    finally:
        process.close()


# ---------------------------------------------------------------------- HTTP surface
def test_health_is_open_and_every_other_route_needs_the_token(server):
    assert httpx.get(server.url + "/health", timeout=TIMEOUT).json() == {"status": "ok"}
    assert httpx.get(server.url + "/ready", timeout=TIMEOUT).json() == {"status": "ready"}
    assert httpx.get(server.url + "/v1/models", timeout=TIMEOUT).status_code == 401
    wrong = server.post("/v1/embeddings", {"input": "x"}, token="nope")
    assert wrong.status_code == 401 and "bearer token" in wrong.json()["error"]["message"]


def test_models_name_the_spec_fingerprint_and_the_image_model(server):
    body = httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=TIMEOUT).json()
    text, image = body["data"]
    assert text["fingerprint"] == server.spec.fingerprint()
    assert EncoderSpec.model_validate(text["spec"]).fingerprint() == text["fingerprint"]
    assert image["id"] == server.images[0].model_id and image["calibrated_sizes"] == [4]


@pytest.mark.parametrize("input_type", ["query", "document"])
@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_served_embeddings_equal_in_process_ones(server, served_encoder, input_type, encoding):
    from llamaindex_posfair.serve.schemas import EmbeddingResponse

    r = server.post("/v1/embeddings", {"input": TEXTS, "input_type": input_type, "encoding_format": encoding})
    assert r.status_code == 200, r.text
    got = EmbeddingResponse.model_validate(r.json()).matrix()
    fn = served_encoder.encode_queries if input_type == "query" else served_encoder.encode_documents
    np.testing.assert_allclose(got, fn(TEXTS), atol=1e-5)


def test_rerank_ranks_as_the_in_process_reranker(server, served_encoder):
    from llamaindex_posfair.integrations.encoder_site import InProcessEncoder

    r = server.post("/v1/rerank", {"query": "where did the silt go?", "documents": TEXTS, "top_n": 3})
    assert r.status_code == 200, r.text
    local = InProcessEncoder(served_encoder).scores("where did the silt go?", TEXTS)
    results = r.json()["results"]
    assert [x["index"] for x in results] == list(np.argsort(-local, kind="stable")[:3])
    np.testing.assert_allclose([x["relevance_score"] for x in results], np.sort(local)[::-1][:3], atol=1e-5)


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/embeddings", {"input": ["a"] * 9}, "input holds 9 texts; this server accepts at most 8"),
        (
            "/v1/embeddings",
            {"input": ["a", "b" * 2001]},
            "input[1] has 2001 characters; this server accepts at most 2000",
        ),
        ("/v1/embeddings", {"input": []}, "input must not be empty"),
        ("/v1/embeddings", {"input": [[101, 102]]}, "input[0] must be a string, got list"),
        ("/v1/embeddings", {"input": "a", "input_type": "passage"}, "input_type"),
        ("/v1/embeddings", {"input": "a", "model": "gpt-4"}, "model 'gpt-4' is not served here"),
        (
            "/v1/rerank",
            {"query": "q", "documents": ["d"] * 21},
            "documents holds 21 texts; this server accepts at most 20",
        ),
        ("/v1/rerank", {"query": "", "documents": ["d"]}, "query is empty"),
        ("/v1/rerank", {"documents": ["d"]}, "query is required"),
        (
            "/v1/rerank-images",
            {"query": "q", "images": ["aGVsbG8=", "!!"]},
            "images[0] is not a readable image",
        ),
        (
            "/v1/rerank-images",
            {"query": "q", "images": ["x"] * 7},
            "images holds 7 images; this server ranks at most 6",
        ),
        ("/v1/rerank-images", {"query": "q", "images": ["https://a/b.png"] * 2}, "this server does not fetch URLs"),
    ],
)
def test_bad_requests_get_a_400_naming_the_problem(server, path, body, message):
    r = server.post(path, body)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]["message"]


def test_a_body_that_is_not_json_is_a_400(server):
    r = httpx.post(server.url + "/v1/embeddings", content=b"{not json", timeout=TIMEOUT,
                   headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})  # fmt: skip
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]


# ---------------------------------------------------------------------- remote mode of the LlamaIndex classes
def test_remote_embedding_equals_local_sync_and_async(server, served_encoder):
    import asyncio

    remote = PosFairEmbedding(
        spec=EncoderSpec(model=server.spec.model, calibration=SERVED_CALIBRATION), endpoint=server.url
    )
    local = PosFairEmbedding(encoder=served_encoder)
    assert remote.spec.fingerprint() == local.spec.fingerprint()
    np.testing.assert_allclose(remote.get_query_embedding(TEXTS[4]), local.get_query_embedding(TEXTS[4]), atol=1e-5)
    np.testing.assert_allclose(remote.get_text_embedding_batch(TEXTS), local.get_text_embedding_batch(TEXTS), atol=1e-5)
    got = asyncio.run(remote.aget_text_embedding_batch(TEXTS))
    np.testing.assert_allclose(got, local.get_text_embedding_batch(TEXTS), atol=1e-5)
    with pytest.raises(RuntimeError, match="no encoder is loaded in this process"):
        _ = remote.encoder


def test_remote_classes_refuse_a_server_with_other_vectors(server):
    other = EncoderSpec(model=server.spec.model, calibration=None)
    with pytest.raises(ServeMismatchError, match="serves other vectors .* calibration"):
        PosFairEmbedding(spec=other, endpoint=server.url)
    with pytest.raises(ServeMismatchError, match="serves other vectors"):
        PosFairRerank(spec=other, endpoint=server.url)


@pytest.mark.parametrize("scoring", ["node", "subchunks"])
def test_remote_reranker_equals_local_sync_and_async(server, served_encoder, scoring):
    import asyncio

    texts = [*TEXTS, "Old mills stood by the river. The towns were quiet. Silt went to the sea."]
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=0.1 * i) for i, t in enumerate(texts)]
    kw = {"scoring": scoring, "subchunk_tokens": 8}
    remote = PosFairRerank(
        top_n=4, spec=EncoderSpec(model=server.spec.model, calibration=SERVED_CALIBRATION), endpoint=server.url, **kw
    )
    local = PosFairRerank(top_n=4, encoder=served_encoder, **kw)
    want = local.postprocess_nodes(nodes, query_str="old mills")
    for got in (
        remote.postprocess_nodes(nodes, query_str="old mills"),
        asyncio.run(remote.apostprocess_nodes(nodes, query_bundle=QueryBundle("old mills"))),
    ):
        assert [n.node.node_id for n in got] == [n.node.node_id for n in want]
        np.testing.assert_allclose([n.score for n in got], [n.score for n in want], atol=1e-5)


def test_remote_image_reranker_equals_local(server):
    from llamaindex_posfair.multimodal.rerank import PosFairImageRerank

    adapter, folder = server.images
    nodes = [NodeWithScore(node=ImageNode(image_path=str(folder / f"img_{i:03d}.png"), id_=f"i{i}"), score=1.0)
             for i in (4, 5, 6, 7)]  # fmt: skip
    local = PosFairImageRerank(scorer=adapter, calibration=server.calibration, top_n=4)
    remote = PosFairImageRerank(endpoint=server.url, calibration=server.calibration, top_n=4)
    want = local.postprocess_nodes(nodes, query_bundle=QueryBundle("a red circle"))
    got = remote.postprocess_nodes(nodes, query_bundle=QueryBundle("a red circle"))
    assert [n.node.node_id for n in got] == [n.node.node_id for n in want]
    np.testing.assert_allclose([n.score for n in got], [n.score for n in want], atol=1e-6)
    assert remote.model_id == adapter.model_id


def test_remote_image_reranker_checks_the_count_before_sending(server):
    from llamaindex_posfair.multimodal.calibrator import CalibrationMismatchError
    from llamaindex_posfair.multimodal.rerank import PosFairImageRerank

    _, folder = server.images
    nodes = [NodeWithScore(node=ImageNode(image_path=str(folder / f"img_{i:03d}.png"), id_=f"i{i}"), score=1.0)
             for i in range(5)]  # fmt: skip
    with pytest.raises(CalibrationMismatchError, match="got 5 candidate images .* at most N=4"):
        PosFairImageRerank(endpoint=server.url).postprocess_nodes(nodes, query_bundle=QueryBundle("q"))


# ---------------------------------------------------------------------- load and faults (kept last: they kill a replica)
@dataclass
class Answer:
    status: int
    batch: int  # requests in the model call that answered it (0: not answered)
    message: str
    sent: float  # time.monotonic() before sending
    answered: float  # time.monotonic() once answered


def _embed_jobs(n, seed=0):
    rng = random.Random(seed)
    return [(rng.choice(["query", "document"]), rng.sample(range(len(TEXTS)), rng.randint(1, 3))) for _ in range(n)]


def _embed_one(server, job, client, expected):
    kind, idx = job
    sent = time.monotonic()
    r = server.post("/v1/embeddings", {"input": [TEXTS[i] for i in idx], "input_type": kind}, client=client)
    answered = time.monotonic()
    if r.status_code != 200:
        return Answer(r.status_code, 0, r.json()["error"]["message"], sent, answered)
    got = np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32)
    np.testing.assert_allclose(got, expected[kind][idx], atol=1e-5)
    return Answer(200, int(r.headers["x-posfair-batch-size"]), "", sent, answered)


class Load:
    """``threads`` threads sending embeddings requests back to back until :meth:`finish` says stop.

    ``flowing`` is set once ``warm`` requests are answered; after :meth:`finish` (``after``
    more requests sent) the threads stop, so whatever the test does in between happens while
    the load provably runs.
    """

    def __init__(self, server, expected, threads=16, warm=32, limit=5000):
        self.server, self.expected, self.threads, self.warm, self.limit = server, expected, threads, warm, limit
        self.jobs = _embed_jobs(limit)
        self.answers: list[Answer] = []
        self.flowing = threading.Event()
        self._lock = threading.Lock()
        self._next = 0
        self._stop_at: int | None = None
        self._pool = futures.ThreadPoolExecutor(threads)
        self._runs = [self._pool.submit(self._run) for _ in range(threads)]

    def _take(self):
        with self._lock:
            if self._next >= min(self.limit, self._stop_at or self.limit):
                return None
            self._next += 1
            return self.jobs[self._next - 1]

    def _run(self):
        with httpx.Client() as client:
            while (job := self._take()) is not None:
                answer = _embed_one(self.server, job, client, self.expected)
                with self._lock:
                    self.answers.append(answer)
                    if len(self.answers) >= self.warm:
                        self.flowing.set()

    def finish(self, after, timeout):
        """Send ``after`` more requests, then stop; every answer."""
        with self._lock:
            self._stop_at = self._next + after
        for run in self._runs:
            run.result(timeout=timeout)
        self._pool.shutdown()
        return self.answers


def _peak_in_flight(answers) -> int:
    """The most requests in flight at one instant (sent, not yet answered), from the client's clock."""
    events = sorted([(a.sent, 1) for a in answers] + [(a.answered, -1) for a in answers])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def test_concurrent_requests_share_model_calls(server, expected):
    """Each wave releases 16 requests at once from a barrier, so requests overlap (checked from the client's
    clock: the scheduler may still let one finish before another leaves), and the replicas (2, each batching
    what is pending) must answer some of them from one model call."""
    threads, waves = 16, 12
    barrier = threading.Barrier(threads)
    jobs = _embed_jobs(threads * waves)

    def one(job, client):
        barrier.wait(timeout=4 * TIMEOUT)  # the 16 requests of a wave leave together
        return _embed_one(server, job, client, expected)

    t0 = time.perf_counter()
    clients = [httpx.Client() for _ in range(threads)]
    try:
        with futures.ThreadPoolExecutor(threads) as pool:
            out = [
                f.result(timeout=8 * TIMEOUT)
                for f in [pool.submit(one, j, clients[i % threads]) for i, j in enumerate(jobs)]
            ]
    finally:
        for c in clients:
            c.close()
    assert [a.status for a in out] == [200] * len(jobs)
    assert _peak_in_flight(out) >= 2  # requests provably overlapped: batching had something to merge
    sizes = [a.batch for a in out]
    assert all(1 <= b <= 16 for b in sizes), sizes  # 16 = --max-batch-size
    assert max(sizes) > 1, f"no two of {threads} concurrent requests shared a model call in {waves} waves"
    assert time.perf_counter() - t0 < 120


def test_a_replica_killed_mid_load_leaves_no_request_hanging(server, expected):
    pids = server.process.replica_pids("embed")
    assert len(pids) == 2
    load = Load(server, expected, threads=16, warm=32)
    assert load.flowing.wait(4 * TIMEOUT), "the load did not get going"
    killed = time.monotonic()
    os.kill(pids[0], signal.SIGKILL)  # the replica dies as an out-of-memory kill would end it
    out = load.finish(after=96, timeout=4 * TIMEOUT)
    for a in out:
        assert a.status == 200 or (a.status == 503 and "safe to retry" in a.message), (a.status, a.message)
    assert any(a.sent < killed < a.answered for a in out), "no request was in flight when the replica died"
    assert any(a.sent > killed for a in out)  # the load went on after the kill
    assert sum(a.status == 200 for a in out) > 0
    # the client retries what the dead replica dropped: a remote call still succeeds
    remote = PosFairEmbedding(
        spec=EncoderSpec(model=server.spec.model, calibration=SERVED_CALIBRATION), endpoint=server.url
    )
    np.testing.assert_allclose(remote.get_query_embedding(TEXTS[0]), expected["query"][0], atol=1e-5)


@pytest.fixture(scope="module")
def expected(served_encoder):
    return {"query": served_encoder.encode_queries(TEXTS), "document": served_encoder.encode_documents(TEXTS)}


def test_retriever_encodes_queries_on_the_server_and_checks_the_collection(server, served_encoder, tmp_path):
    from llamaindex_posfair.encoders.view import CalibrationView
    from llamaindex_posfair.integrations.retriever import FingerprintMismatchError, PosFairRetriever
    from qdrant_tools import IngestConfig, ingest_path
    from qdrant_tools.store import open_store

    folder = tmp_path / "docs"
    folder.mkdir()
    for i, text in enumerate(TEXTS):
        (folder / f"d{i}.txt").write_text(f"{text}. The mill stood by the river.", encoding="utf-8")
    client = open_store(":memory:")
    try:
        config = IngestConfig(show_progress=False)
        ingest_path(client, "cal", folder, {"calibrated": served_encoder}, config)
        ingest_path(client, "plain", folder, {"vanilla": CalibrationView(served_encoder, None)}, config)
        local = PosFairRetriever(client, "cal", encoder=served_encoder, similarity_top_k=3).retrieve(
            "where is the mill?"
        )
        remote = PosFairRetriever(client, "cal", endpoint=server.url, similarity_top_k=3).retrieve("where is the mill?")
        assert [n.node.node_id for n in remote] == [n.node.node_id for n in local]
        np.testing.assert_allclose([n.score for n in remote], [n.score for n in local], atol=1e-5)
        with pytest.raises(FingerprintMismatchError, match=r"but posfair serve at .* is .*; use the encoder the coll"):
            PosFairRetriever(client, "plain", endpoint=server.url)
    finally:
        client.close()
