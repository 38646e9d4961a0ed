"""``posfair serve`` as users run it: a subprocess answering HTTP, stopped by SIGTERM with nothing left behind."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import httpx
import numpy as np
import psutil
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


def _listening(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, process name, address, port) of every TCP socket the processes listen on."""
    out = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            name = proc.name()
            conns = proc.net_connections(kind="inet")
        except psutil.Error:
            continue
        out += [(pid, name, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def _loopback(ip: str) -> bool:
    return ipaddress.ip_address(ip.removeprefix("::ffff:")).is_loopback


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def test_every_process_listens_on_loopback_with_ray_token_auth_and_no_plaintext_serve_token(
    tmp_path, tiny_bert_path, serve_process
):
    token = "process-test-token-81f2c9"
    server = serve_process(tmp_path, "--model", tiny_bert_path, token=token)
    try:
        server.wait_ready()
        r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS}, timeout=30,
                       headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert r.status_code == 200
        ray_pids = server.processes()
        sockets = _listening(ray_pids | {server.proc.pid})
        names = {name for _, name, _, _ in sockets}
        assert {"gcs_server", "raylet"} <= names and any(port == server.port for *_, port in sockets)
        beyond = [s for s in sockets if not _loopback(s[2])]
        assert beyond == [], beyond
        environs = {pid: _environ(pid) for pid in ray_pids}
        assert [pid for pid, env in environs.items() if token.encode() in env] == []
        gcs = next(pid for pid, name, _, _ in sockets if name == "gcs_server")
        assert b"RAY_AUTH_MODE=token" in environs[gcs]
        server.assert_stops_cleanly()
    finally:
        server.close()
