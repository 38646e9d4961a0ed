"""``posfair serve`` as users run it: a subprocess answering HTTP, stopped by SIGTERM with nothing left behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import psutil
import pytest

from llamaindex_posfair.cli import main
from llamaindex_posfair.serve.runner import free_port, port_is_free

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["where is the evidence?", "The evidence sat at the very end of a long report about rivers.", "bananas"]


# ---------------------------------------------------------------------- errors before anything starts
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--min-replicas", "2"], "min_replicas and max_replicas go together"),
        (["--min-replicas", "3", "--max-replicas", "2"], "must not exceed"),
        (["--max-batch-size", "0"], "--max-batch-size: Input should be greater than 0"),
        (
            ["--mm-calibration", "/no/cal.safetensors", "--mm-model", "tiny"],
            "--mm-calibration '/no/cal.safetensors' does not exist",
        ),
        (["--num-gpus", "64"], "the replicas (embed + rerank + image) need 128 GPUs"),
        (["--local-cpus", "2", "--num-cpus", "2"], "need 4 CPUs (have 2)"),
    ],
)
def test_bad_flags_fail_before_ray_starts(capsys, argv, needle):
    rc = main(["serve", "--port", str(free_port()), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("posfair serve: error:") and needle in err, err


def test_a_port_in_use_is_named(capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc = main(["serve", "--port", str(port)])
    assert rc == 2 and f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


# ---------------------------------------------------------------------- the running server
class Served:
    """``posfair serve`` in a subprocess with its own Ray temp folder (so its processes can be found)."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.ray_tmp = tempfile.mkdtemp(prefix="pfs", dir="/tmp")  # short: Ray's socket paths must stay short
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "RAY_TMPDIR": self.ray_tmp, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        env.pop("POSFAIR_SERVE_TOKEN", None)
        self.log = tmp / "serve.log"
        cmd = [sys.executable, "-m", "llamaindex_posfair.cli", "serve", "--port", str(self.port), "--local-cpus", "2",
               "--num-cpus", "0", *args]  # fmt: skip
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"posfair serve exited early:\n{self.log.read_text()[-3000:]}"
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        pytest.fail(f"posfair serve not ready after {timeout}s:\n{self.log.read_text()[-3000:]}")

    def processes(self) -> set[int]:
        """Descendants of the server, and every process naming its Ray temp folder."""
        found = set()
        with contextlib.suppress(psutil.NoSuchProcess):
            found |= {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        for p in psutil.process_iter(["pid", "cmdline"]):
            if any(self.ray_tmp in part for part in (p.info["cmdline"] or [])):
                found.add(p.info["pid"])
        return found

    def close(self) -> None:
        """Kill the server if a test failed before stopping it; remove its Ray temp folder."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.ray_tmp, ignore_errors=True)

    def stop(self, timeout: float = 90.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def alive(pids: set[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{pid} {' '.join(p.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            pass
    return out


def assert_stops_cleanly(server: Served) -> None:
    before = server.processes()
    assert len(before) >= 3  # Ray's head processes and the replicas: the check below can fail
    t0 = time.monotonic()
    assert server.stop() == 0, server.log.read_text()[-3000:]
    assert time.monotonic() - t0 < 90
    assert port_is_free("127.0.0.1", server.port)
    deadline = time.monotonic() + 20
    while alive(before | server.processes()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert alive(before | server.processes()) == []


def test_sigterm_stops_the_app_and_the_local_ray_it_started(tmp_path, tiny_bert_path):
    server = Served(tmp_path, "--model", tiny_bert_path)
    try:
        server.wait_ready()
        r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS}, timeout=30)
        assert r.status_code == 200 and len(r.json()["data"]) == 3
        assert_stops_cleanly(server)
    finally:
        server.close()


@pytest.mark.slow
def test_shipped_defaults_serve_the_in_process_vectors_and_ranking(tmp_path):
    from llama_index.core.schema import NodeWithScore, TextNode

    from llamaindex_posfair import PosFairEncoder, PositionFairRerank
    from llamaindex_posfair.serve.schemas import EmbeddingResponse

    server = Served(tmp_path)  # bundled all-MiniLM-L6-v2, shipped calibration
    try:
        encoder = PosFairEncoder()
        server.wait_ready()
        for kind, fn in (("query", encoder.encode_queries), ("document", encoder.encode_documents)):
            r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS, "input_type": kind}, timeout=60)
            np.testing.assert_allclose(EmbeddingResponse.model_validate(r.json()).matrix(), fn(TEXTS), atol=1e-5)
        r = httpx.post(server.url + "/v1/rerank", json={"query": TEXTS[0], "documents": TEXTS[1:]}, timeout=60)
        nodes = [NodeWithScore(node=TextNode(text=t, id_=str(i)), score=None) for i, t in enumerate(TEXTS[1:])]
        local = PositionFairRerank(top_n=2, encoder=encoder).postprocess_nodes(nodes, query_str=TEXTS[0])
        assert [x["index"] for x in r.json()["results"]] == [int(n.node.node_id) for n in local]
        assert_stops_cleanly(server)
    finally:
        server.close()
