"""``posfair serve --accept-any-model --no-docs``: foreign model names are served (logged once), no docs.

One server for the module (the tiny random BERT, no token).
"""

from __future__ import annotations

import time

import httpx
import pytest

pytest.importorskip("ray.serve")
openai = pytest.importorskip("openai")
cohere = pytest.importorskip("cohere")

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def switched(tiny_bert_path, tmp_path_factory, serve_process):
    process = serve_process(tmp_path_factory.mktemp("serve_switches"), "--model", tiny_bert_path, "--device", "cpu",
                            "--accept-any-model", "--no-docs")  # fmt: skip
    try:
        process.wait_ready()
        yield process
        assert process.stop() == 0, process.log.read_text()[-3000:]
    finally:
        process.close()


def test_any_model_name_is_answered_by_the_served_model_and_logged_once(switched, tiny_bert_path):
    client = openai.OpenAI(base_url=switched.url + "/v1", api_key="unused", max_retries=0)
    for name in ("text-embedding-3-small", "text-embedding-3-large"):
        answer = client.embeddings.create(model=name, input=["a", "b"])
        assert answer.model == tiny_bert_path and len(answer.data) == 2
    ranked = cohere.ClientV2(api_key="unused", base_url=switched.url).rerank(
        model="rerank-v3.5", query="q", documents=["a", "b"]
    )
    assert sorted(r.index for r in ranked.results) == [0, 1]
    deadline = time.monotonic() + 30  # replica logs reach the driver's output asynchronously
    while "logged once" not in (log := switched.log.read_text(errors="replace")):
        assert time.monotonic() < deadline, log[-3000:]
        time.sleep(0.5)
    time.sleep(2)
    log = switched.log.read_text(errors="replace")
    assert log.count("--accept-any-model; logged once") == 1
    assert "'text-embedding-3-small'" in log and "'rerank-v3.5'" not in log


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json"])
def test_no_docs_switches_the_schema_and_its_pages_off(switched, path):
    r = httpx.get(switched.url + path, timeout=TIMEOUT)
    assert r.status_code == 404 and "--no-docs" in r.json()["error"]["message"]
