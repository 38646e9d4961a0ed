"""``posfair serve`` as users run it: a subprocess answering HTTP, stopped by SIGTERM with nothing left behind."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

TEXTS = ["where is the evidence?", "The evidence sat at the very end of a long report about rivers.", "bananas"]


def test_sigterm_stops_the_app_and_the_local_ray_it_started(tmp_path, tiny_bert_path, serve_process):
    server = serve_process(tmp_path, "--model", tiny_bert_path)
    try:
        server.wait_ready()
        r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS}, timeout=30)
        assert r.status_code == 200 and len(r.json()["data"]) == 3
        server.assert_stops_cleanly()
    finally:
        server.close()


@pytest.mark.slow
def test_shipped_defaults_serve_the_in_process_vectors_and_ranking(tmp_path, serve_process):
    from llama_index.core.schema import NodeWithScore, TextNode

    from llamaindex_posfair import PosFairEncoder, PosFairRerank
    from llamaindex_posfair.serve.schemas import EmbeddingResponse

    server = serve_process(tmp_path)  # bundled all-MiniLM-L6-v2, uncalibrated: what posfair ingest writes by default
    try:
        encoder = PosFairEncoder(calibration=None)
        server.wait_ready()
        for kind, fn in (("query", encoder.encode_queries), ("document", encoder.encode_documents)):
            r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS, "input_type": kind}, timeout=60)
            np.testing.assert_allclose(EmbeddingResponse.model_validate(r.json()).matrix(), fn(TEXTS), atol=1e-5)
        r = httpx.post(server.url + "/v1/rerank", json={"query": TEXTS[0], "documents": TEXTS[1:]}, timeout=60)
        nodes = [NodeWithScore(node=TextNode(text=t, id_=str(i)), score=None) for i, t in enumerate(TEXTS[1:])]
        local = PosFairRerank(top_n=2, encoder=encoder).postprocess_nodes(nodes, query_str=TEXTS[0])
        assert [x["index"] for x in r.json()["results"]] == [int(n.node.node_id) for n in local]
        server.assert_stops_cleanly()
    finally:
        server.close()
