"""Fixtures of the serve tests: the tiny random BERT encoder, and ``posfair serve`` in a subprocess.

The Serve application always runs in a subprocess (``posfair serve``, as users run it):
a Ray Serve driver must be a clean interpreter, and the test process has imported
nnsight (the reference backend's tests), which mounts ``.save`` on every object and
breaks anyio in the replicas it would start.
"""

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
import psutil
import pytest

from llamaindex_posfair.serve.runner import free_port, port_is_free

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_encoder(tiny_bert_path):
    from llamaindex_posfair import EncoderSpec

    return EncoderSpec(model=tiny_bert_path, device="cpu").load()


class Served:
    """``posfair serve`` in a subprocess with its own Ray temp folder (so its processes can be found)."""

    def __init__(self, tmp: Path, *args: str, token: str | None = None) -> None:
        self.ray_tmp = tempfile.mkdtemp(prefix="pfs", dir="/tmp")  # short: Ray's socket paths must stay short
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "RAY_TMPDIR": self.ray_tmp, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        env.pop("POSFAIR_SERVE_TOKEN", None)
        if token:
            env["POSFAIR_SERVE_TOKEN"] = token
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
                r = httpx.get(self.url + "/ready", timeout=2)
                if r.status_code == 200:
                    assert r.text.replace(" ", "") == '{"status":"ready"}', (
                        f"another server on {self.port}: {r.text[:200]}"
                    )
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

    def replica_pids(self, deployment: str) -> list[int]:
        """OS processes of the replicas of ``deployment``."""
        title = f"ray::ServeReplica:posfair:{deployment}"
        out = []
        for p in psutil.Process(self.proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                cmd = p.cmdline()
                if cmd and (cmd[0] == title or cmd[0].startswith(title + ".") or cmd[0].startswith(title + " ")):
                    out.append(p.pid)
        return out

    def close(self) -> None:
        """Kill the server if a test failed before stopping it; remove its Ray temp folder."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.ray_tmp, ignore_errors=True)

    def assert_stops_cleanly(self) -> None:
        """SIGTERM: exit 0 in bounded time, the port free, no process of its Ray session left."""
        before = self.processes()
        assert len(before) >= 3  # Ray's head processes and the replicas: the check below can fail
        t0 = time.monotonic()
        assert self.stop() == 0, self.log.read_text()[-3000:]
        assert time.monotonic() - t0 < 90
        assert port_is_free("127.0.0.1", self.port)
        deadline = time.monotonic() + 20
        while _alive(before | self.processes()) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _alive(before | self.processes()) == []

    def stop(self, timeout: float = 90.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def _alive(pids: set[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{pid} {' '.join(p.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.fixture(scope="session")
def serve_process():
    """The :class:`Served` helper: ``serve_process(tmp, *flags, token=...)`` starts ``posfair serve``."""
    return Served
