"""The clients people already have, unchanged, against ``posfair serve``: one server for the module.

The server is ``posfair serve`` with its defaults (the bundled all-MiniLM-L6-v2, real
weights) behind a bearer token, as a new user starts it. Each client is the official one:
the ``openai`` SDK, the ``cohere`` SDK's ``Client`` (v1) and ``ClientV2``, LlamaIndex's TEI
embedding and reranker; TEI's own routes are also called by HTTP. Every vector and score is
compared with the in-process encoder of the served spec (within 1e-5).
"""

from __future__ import annotations

import base64
import time

import httpx
import numpy as np
import pytest

pytest.importorskip("ray.serve")
openai = pytest.importorskip("openai")
cohere = pytest.importorskip("cohere")

from llamaindex_posfair import EncoderSpec  # noqa: E402

pytestmark = pytest.mark.slow

TOKEN = "client-token-42"
TIMEOUT = 60.0
TEXTS = [
    "The tide in the Bay of Fundy rises sixteen metres.",
    "Bananas are rich in potassium.",
    "Where does the water go at low tide?",
]
QUERY = "how high is the tide?"
LONG = "the river carried silt past the old mills " * 80  # longer than the model's 256-token window


class Live:
    """The running server, the in-process encoder of its spec, and an authorised HTTP client."""

    def __init__(self, process, encoder) -> None:
        self.process = process
        self.url = process.url
        self.encoder = encoder
        self.model = encoder.spec.model
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=TIMEOUT)

    def queries(self, texts):
        return self.encoder.encode_queries(texts)

    def documents(self, texts):
        return self.encoder.encode_documents(texts)

    def scores(self, query, texts):
        from llamaindex_posfair.integrations.encoder_site import InProcessEncoder

        return InProcessEncoder(self.encoder).scores(query, texts)


@pytest.fixture(scope="module")
def live(tmp_path_factory, serve_process):
    process = serve_process(tmp_path_factory.mktemp("serve_clients"), token=TOKEN)  # no flags: the defaults
    try:
        process.wait_ready()
        card = httpx.get(process.url + "/v1/models", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=TIMEOUT)
        encoder = EncoderSpec.model_validate(card.json()["data"][0]["spec"]).load()
        server = Live(process, encoder)
        yield server
        server.http.close()
        assert process.stop() == 0, process.log.read_text()[-3000:]
    finally:
        process.close()


# ---------------------------------------------------------------------- operations
def test_health_ready_metrics_and_docs_need_no_token(live):
    for path, want in (("/health", {"status": "ok"}), ("/ready", {"status": "ready"})):
        r = httpx.get(live.url + path, timeout=TIMEOUT)
        assert r.status_code == 200 and r.json() == want
    assert httpx.get(live.url + "/metrics", timeout=TIMEOUT).status_code == 200
    docs = httpx.get(live.url + "/docs", timeout=TIMEOUT)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    assert httpx.post(live.url + "/embed", json={"inputs": "x"}, timeout=TIMEOUT).status_code == 401


def test_openapi_schema_validates_and_lists_every_route(live):
    from openapi_spec_validator import validate

    schema = httpx.get(live.url + "/openapi.json", timeout=TIMEOUT).json()
    validate(schema)
    want = {"/v1/embeddings", "/v1/rerank", "/v1/embed", "/v2/embed", "/v2/rerank", "/embed", "/rerank", "/info",
            "/health", "/ready", "/metrics", "/v1/models"}  # fmt: skip
    assert want <= set(schema["paths"])
    assert "texts" in schema["components"]["schemas"]["CohereEmbedRequest"]["properties"]


def test_a_start_prints_no_third_party_progress_bar(live):
    deadline = time.monotonic() + 60  # /ready can answer a moment before the command prints its line
    while "posfair serve: ready at" not in (log := live.process.log.read_text(errors="replace")):
        assert time.monotonic() < deadline, log[-3000:]
        time.sleep(0.5)
    assert "Loading weights" not in log and "it/s]" not in log, log[-3000:]


# ---------------------------------------------------------------------- OpenAI SDK
def test_openai_sdk_embeddings_equal_in_process_in_both_encodings(live):
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=TOKEN)
    docs = client.embeddings.create(model=live.model, input=TEXTS)
    np.testing.assert_allclose([d.embedding for d in docs.data], live.documents(TEXTS), atol=1e-5)
    queries = client.embeddings.create(model=live.model, input=[QUERY], encoding_format="base64",
                                       extra_body={"input_type": "query"})  # fmt: skip
    vector = np.frombuffer(base64.b64decode(queries.data[0].embedding), dtype="<f4")  # asked for: left encoded
    np.testing.assert_allclose(vector, live.queries([QUERY])[0], atol=1e-5)
    assert docs.usage.prompt_tokens == sum(live.encoder.count_tokens(TEXTS))


def test_openai_sdk_another_model_is_a_400_naming_the_served_one(live):
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=TOKEN, max_retries=0)
    with pytest.raises(
        openai.BadRequestError, match=r"model 'text-embedding-3-small' is not served here.*--accept-any"
    ):
        client.embeddings.create(model="text-embedding-3-small", input=["a"])


# ---------------------------------------------------------------------- Cohere SDK
def test_cohere_v1_embed_floats_and_by_type(live):
    client = cohere.Client(api_key=TOKEN, base_url=live.url)
    docs = client.embed(texts=TEXTS, model=live.model, input_type="search_document")
    assert docs.response_type == "embeddings_floats" and docs.id and docs.meta.api_version.version == "1"
    np.testing.assert_allclose(docs.embeddings, live.documents(TEXTS), atol=1e-5)
    typed = client.embed(texts=[QUERY], model=live.model, input_type="search_query", embedding_types=["float", "int8"])
    assert typed.response_type == "embeddings_by_type"
    want = live.queries([QUERY])
    np.testing.assert_allclose(typed.embeddings.float_, want, atol=1e-5)
    assert np.abs(np.asarray(typed.embeddings.int8) - want * 127).max() <= 0.5 + 1e-3


def test_cohere_v1_rerank_has_id_meta_and_the_in_process_ranking(live):
    client = cohere.Client(api_key=TOKEN, base_url=live.url)
    r = client.rerank(query=QUERY, documents=TEXTS, model=live.model, top_n=2, return_documents=True)
    local = live.scores(QUERY, TEXTS)
    assert r.id and r.meta.api_version.version == "1"
    assert [x.index for x in r.results] == list(np.argsort(-local)[:2])
    np.testing.assert_allclose([x.relevance_score for x in r.results], np.sort(local)[::-1][:2], atol=1e-5)
    assert r.results[0].document.text == TEXTS[r.results[0].index]


def test_cohere_v2_embed_every_type_from_the_same_vectors(live):
    client = cohere.ClientV2(api_key=TOKEN, base_url=live.url)
    types = ["float", "int8", "uint8", "binary", "ubinary", "base64"]
    r = client.embed(texts=TEXTS, model=live.model, input_type="classification", embedding_types=types)
    want = live.queries(TEXTS)  # classification: the query side
    e = r.embeddings
    np.testing.assert_allclose(e.float_, want, atol=1e-5)
    decoded = np.stack([np.frombuffer(base64.b64decode(s), dtype="<f4") for s in e.base64])
    np.testing.assert_allclose(decoded, want, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(e.uint8) - 128, e.int8)
    bits = np.unpackbits(np.asarray(e.ubinary, dtype=np.uint8), axis=-1)[:, : want.shape[1]]
    np.testing.assert_array_equal(bits, (want > 0).astype(np.uint8))
    np.testing.assert_array_equal(np.asarray(e.binary) + 128, e.ubinary)
    assert r.meta.api_version.version == "2" and r.meta.billed_units.input_tokens > 0


def test_cohere_v2_rerank_equals_in_process(live):
    client = cohere.ClientV2(api_key=TOKEN, base_url=live.url)
    r = client.rerank(model=live.model, query=QUERY, documents=TEXTS)
    local = live.scores(QUERY, TEXTS)
    assert [x.index for x in r.results] == list(np.argsort(-local))
    np.testing.assert_allclose([x.relevance_score for x in r.results], np.sort(local)[::-1], atol=1e-5)
    assert r.id and r.meta.api_version.version == "2"


def test_cohere_sdk_gets_a_422_naming_the_field(live):
    client = cohere.ClientV2(api_key=TOKEN, base_url=live.url)
    with pytest.raises(cohere.errors.UnprocessableEntityError) as err:
        client.embed(texts=[LONG], model=live.model, input_type="search_document", embedding_types=["float"],
                     truncate="NONE")  # fmt: skip
    assert "exceed the model's window of 256 tokens" in err.value.body["message"]


# ---------------------------------------------------------------------- TEI
def test_tei_embed_by_http_with_prompt_name_and_truncate(live):
    r = live.http.post("/embed", json={"inputs": TEXTS})
    np.testing.assert_allclose(r.json(), live.documents(TEXTS), atol=1e-5)
    r = live.http.post("/embed", json={"inputs": QUERY, "prompt_name": "query", "normalize": True})
    np.testing.assert_allclose(r.json(), live.queries([QUERY]), atol=1e-5)
    refused = live.http.post("/embed", json={"inputs": [LONG], "truncate": False})
    assert refused.status_code == 413 and refused.json()["error_type"] == "Validation"
    assert "truncate=true" in refused.json()["error"]


def test_tei_rerank_by_http_answers_ranks_best_first(live):
    r = live.http.post("/rerank", json={"query": QUERY, "texts": TEXTS, "raw_scores": True, "return_text": True})
    local = live.scores(QUERY, TEXTS)
    ranks = r.json()
    assert [x["index"] for x in ranks] == list(np.argsort(-local))
    np.testing.assert_allclose([x["score"] for x in ranks], np.sort(local)[::-1], atol=1e-5)
    assert [x["text"] for x in ranks] == [TEXTS[x["index"]] for x in ranks]


def test_tei_info_names_the_model_and_limits(live):
    info = live.http.get("/info").json()
    assert info["model_id"] == live.model and info["sha"] == live.encoder.fingerprint()
    assert info["max_input_length"] == 256 and info["max_batch_tokens"] == 16384
    assert info["max_client_batch_size"] == 512 and info["model_type"]["embedding"]["pooling"]


def test_llamaindex_tei_integrations_work_unchanged(live):
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    TextEmbeddingsInference = pytest.importorskip(
        "llama_index.embeddings.text_embeddings_inference"
    ).TextEmbeddingsInference
    TextEmbeddingInference = pytest.importorskip("llama_index.postprocessor.tei_rerank").TextEmbeddingInference

    embed = TextEmbeddingsInference(model_name=live.model, base_url=live.url, auth_token=TOKEN)
    np.testing.assert_allclose(embed.get_text_embedding_batch(TEXTS), live.documents(TEXTS), atol=1e-5)
    rerank = TextEmbeddingInference(model_name=live.model, base_url=live.url, top_n=2, auth_token=f"Bearer {TOKEN}")
    nodes = [NodeWithScore(node=TextNode(text=t, id_=str(i)), score=0.0) for i, t in enumerate(TEXTS)]
    got = rerank.postprocess_nodes(nodes, QueryBundle(QUERY))
    local = live.scores(QUERY, TEXTS)
    assert [int(n.node.node_id) for n in got] == list(np.argsort(-local)[:2])
    np.testing.assert_allclose([n.score for n in got], np.sort(local)[::-1][:2], atol=1e-5)


# ---------------------------------------------------------------------- errors, metrics
@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/embeddings", {"input": "a", "input_type": "passage"}, 400, "input_type"),
        ("/v1/rerank", {"query": "q"}, 400, "documents is required"),
        ("/v1/embed", {"texts": ["a"], "input_type": "image"}, 422, "input_type 'image' is not supported"),
        ("/v2/embed", {"model": "m"}, 422, "send texts (a list of strings) or inputs"),
        ("/v2/rerank", {"query": "q", "documents": "one"}, 422, "documents must be a list of strings, got str"),
        ("/embed", {"inputs": [], "prompt_name": "query"}, 422, "inputs must not be empty"),
        ("/embed", {"inputs": "a", "prompt_name": "summary"}, 422, "prompt_name 'summary' is not supported"),
        ("/rerank", {"query": "q", "documents": ["a"]}, 422, "texts is required"),
    ],
)
def test_a_bad_body_gets_a_4xx_naming_the_field(live, path, body, status, message):
    r = live.http.post(path, json=body)
    assert r.status_code == status, r.text
    payload = r.json()
    text = payload.get("message") or payload.get("error")
    text = text["message"] if isinstance(text, dict) else text
    assert message in text, text


def _samples(live) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(live.url + "/metrics", timeout=TIMEOUT).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_the_requests_of_a_run(live):
    before = _samples(live)
    for _ in range(3):
        assert live.http.post("/embed", json={"inputs": TEXTS[:2]}).status_code == 200
    assert live.http.post("/embed", json={"inputs": []}).status_code == 422
    after = _samples(live)

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("posfair_requests_total", route="/embed", method="POST", status="200") == 3
    assert delta("posfair_requests_total", route="/embed", method="POST", status="422") == 1
    assert delta("posfair_request_duration_seconds_count", route="/embed") == 4
    assert delta("posfair_texts_embedded_total", kind="document") == 6
    tokens = sum(min(n, 256) for n in live.encoder.count_tokens(TEXTS[:2]))
    assert delta("posfair_tokens_embedded_total", kind="document") == 3 * tokens
    assert delta("posfair_batch_size_count", deployment="embed") == 3
    assert after[("posfair_queue_depth", (("deployment", "embed"),))] == 0
