"""Snapshot create/download/verify/restore against a stub HTTP server on 127.0.0.1.

The stub is a transport fake that speaks the few Qdrant REST endpoints used; it
checks *our* logic (checksums, retries, API-key handling), not Qdrant itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from qdrant_client import QdrantClient

from qdrant_tools.retry import RetryPolicy
from qdrant_tools.snapshots import (
    ChecksumMismatchError,
    InsecureApiKeyError,
    ServerConfig,
    create_snapshot,
    delete_snapshot,
    download_snapshot,
    list_snapshots,
    recover_from_location,
    restore_snapshot,
    sha256_file,
    verify_snapshot_file,
)

SNAP = b"qdrant-snapshot-bytes:" + bytes(range(256)) * 4096  # ~1 MiB
NAME = "docs-2026-01-01.snapshot"
KEY = "s3cr3t-key-value"


class Stub:
    def __init__(self):
        self.requests: list[tuple[str, str, dict, dict]] = []
        self.fail_downloads = 0  # first N downloads answer 503
        self.throttle_lists = 0  # first N lists answer 429 with Retry-After: 2
        self.corrupt = False
        self.uploads: list[bytes] = []
        self.recovered: list[dict] = []


def make_handler(stub: Stub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def _json(self, code, result, headers=None):
            body = json.dumps({"result": result, "status": "ok" if code < 400 else {"error": "x"}}).encode()
            self.send_response(code)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _record(self):
            url = urlsplit(self.path)
            stub.requests.append((self.command, url.path, parse_qs(url.query), dict(self.headers)))
            return url.path

        def do_POST(self):
            path = self._record()
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            if path in ("/collections/docs/snapshots", "/snapshots"):
                self._json(200, {"name": NAME, "size": len(SNAP), "checksum": hashlib.sha256(SNAP).hexdigest()})
            elif path == "/collections/docs/snapshots/upload":
                stub.uploads.append(body)
                self._json(200, True)
            else:
                self._json(404, None)

        def do_GET(self):
            path = self._record()
            if path in ("/collections/docs/snapshots", "/snapshots"):
                if stub.throttle_lists > 0:
                    stub.throttle_lists -= 1
                    self._json(429, None, {"Retry-After": "2"})
                    return
                self._json(200, [{"name": NAME, "size": len(SNAP), "checksum": hashlib.sha256(SNAP).hexdigest()}])
            elif path in (f"/collections/docs/snapshots/{NAME}", f"/snapshots/{NAME}"):
                if stub.fail_downloads > 0:
                    stub.fail_downloads -= 1
                    self._json(503, None)
                    return
                data = SNAP[:-1] + b"X" if stub.corrupt else SNAP
                self.send_response(200)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self._json(404, None)

        def do_DELETE(self):
            path = self._record()
            self._json(200 if path in (f"/collections/docs/snapshots/{NAME}", f"/snapshots/{NAME}") else 404, True)

        def do_PUT(self):
            path = self._record()
            length = int(self.headers.get("content-length") or 0)
            stub.recovered.append(json.loads(self.rfile.read(length)))
            self._json(200 if path == "/collections/docs/snapshots/recover" else 404, True)

    return Handler


@pytest.fixture
def stub():
    s = Stub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(s))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    s.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield s
    server.shutdown()
    server.server_close()


NO_SLEEP = {"sleep": lambda s: None, "policy": RetryPolicy(max_attempts=3, deadline=None)}


def test_create_download_verify_roundtrip(stub, tmp_path, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    server = ServerConfig(stub.url)
    info = create_snapshot(server, "docs")
    assert (info.name, info.size, info.checksum) == (NAME, len(SNAP), hashlib.sha256(SNAP).hexdigest())
    path = download_snapshot(server, "docs", info.name, tmp_path, show_progress=False, **NO_SLEEP)
    assert path == tmp_path / NAME and path.read_bytes() == SNAP
    assert (tmp_path / (NAME + ".sha256")).read_text() == f"{info.checksum}  {NAME}\n"
    assert verify_snapshot_file(path) == info.checksum
    assert not (tmp_path / (NAME + ".part")).exists()
    assert [m for m, p, *_ in stub.requests] == ["POST", "GET", "GET"]  # create, list (checksum), download


def test_download_retries_5xx_then_succeeds(stub, tmp_path, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    stub.fail_downloads = 2
    path = download_snapshot(ServerConfig(stub.url), "docs", NAME, tmp_path, **NO_SLEEP)
    assert sha256_file(path) == hashlib.sha256(SNAP).hexdigest()
    downloads = [r for r in stub.requests if r[1].endswith(NAME)]
    assert len(downloads) == 3


def test_corrupt_download_is_rejected_and_removed(stub, tmp_path, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    stub.corrupt = True
    with pytest.raises(ChecksumMismatchError, match="server reports " + hashlib.sha256(SNAP).hexdigest()):
        download_snapshot(ServerConfig(stub.url), "docs", NAME, tmp_path, **NO_SLEEP)
    assert list(tmp_path.iterdir()) == []


def test_unknown_snapshot_name_is_a_clear_error_not_a_retry(stub, tmp_path, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    with pytest.raises(FileNotFoundError, match=f"not listed.*it has \\['{NAME}'\\]"):
        download_snapshot(ServerConfig(stub.url), "docs", "nope.snapshot", tmp_path, **NO_SLEEP)
    with pytest.raises(httpx.HTTPStatusError, match="HTTP 404"):
        list_snapshots(ServerConfig(stub.url), "other", **NO_SLEEP)
    assert sum(1 for r in stub.requests if r[1] == "/collections/other/snapshots") == 1  # 4xx: not retried


def test_restore_verifies_before_sending_and_passes_checksum(stub, tmp_path, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    server = ServerConfig(stub.url)
    path = download_snapshot(server, "docs", NAME, tmp_path, **NO_SLEEP)
    n_before = len(stub.requests)
    path.write_bytes(SNAP[:-1] + b"Y")  # tampered after download
    with pytest.raises(ChecksumMismatchError, match="download it again"):
        restore_snapshot(server, "docs", path, **NO_SLEEP)
    assert len(stub.requests) == n_before  # nothing sent
    path.write_bytes(SNAP)
    restore_snapshot(server, "docs", path, **NO_SLEEP)
    method, route, query, _ = stub.requests[-1]
    assert (method, route) == ("POST", "/collections/docs/snapshots/upload")
    assert query == {"wait": ["true"], "priority": ["snapshot"], "checksum": [hashlib.sha256(SNAP).hexdigest()]}
    assert SNAP in stub.uploads[-1]  # the multipart body carries the file


def test_api_key_refused_over_http_unless_allowed_and_never_logged(stub, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("QDRANT_API_KEY", KEY)
    with pytest.raises(InsecureApiKeyError, match="refusing to send \\$QDRANT_API_KEY over plain http"):
        create_snapshot(ServerConfig(stub.url), "docs")
    assert stub.requests == []
    caplog.set_level(logging.DEBUG)
    server = ServerConfig(stub.url, allow_insecure_api_key=True)
    download_snapshot(server, "docs", NAME, tmp_path, **NO_SLEEP)
    assert all(r[3].get("api-key") == KEY for r in stub.requests)
    assert KEY not in caplog.text and KEY not in repr(server)


def test_https_url_sends_key_without_opt_in(monkeypatch):
    monkeypatch.setenv("QDRANT_API_KEY", KEY)
    assert ServerConfig("https://qdrant.example.com:6333").api_key() == KEY
    with pytest.raises(ValueError, match="url must look like https://HOST:6333"):
        ServerConfig("qdrant.example.com:6333")


def test_full_snapshots_and_deletes_use_the_storage_routes(stub, tmp_path, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    server = ServerConfig(stub.url)
    info = create_snapshot(server, None)
    assert [s.name for s in list_snapshots(server, None, **NO_SLEEP)] == [info.name] == [NAME]
    path = download_snapshot(server, None, NAME, tmp_path, **NO_SLEEP)
    assert sha256_file(path) == info.checksum
    delete_snapshot(server, None, NAME)
    delete_snapshot(server, "docs", NAME)
    with pytest.raises(httpx.HTTPStatusError, match="HTTP 404"):
        delete_snapshot(server, "docs", "nope.snapshot")
    routes = [(m, p) for m, p, *_ in stub.requests]
    assert routes == [
        ("POST", "/snapshots"),
        ("GET", "/snapshots"),
        ("GET", "/snapshots"),  # the checksum of the download
        ("GET", f"/snapshots/{NAME}"),
        ("DELETE", f"/snapshots/{NAME}"),
        ("DELETE", f"/collections/docs/snapshots/{NAME}"),
        ("DELETE", "/collections/docs/snapshots/nope.snapshot"),
    ]


def test_a_429_is_retried_after_the_servers_retry_after(stub, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    stub.throttle_lists = 1
    slept = []
    listed = list_snapshots(ServerConfig(stub.url), "docs", sleep=slept.append, policy=RetryPolicy(deadline=None))
    assert [s.name for s in listed] == [NAME] and slept == [2.0]


def test_recover_from_location_asks_the_server_to_fetch(stub, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    recover_from_location(ServerConfig(stub.url), "docs", "file:///snapshots/x.snapshot", checksum="ab" * 32)
    assert stub.recovered == [
        {"location": "file:///snapshots/x.snapshot", "priority": "snapshot", "checksum": "ab" * 32}
    ]
    assert stub.requests[-1][2] == {"wait": ["true"]}
    with pytest.raises(httpx.HTTPStatusError, match="HTTP 404"):
        recover_from_location(ServerConfig(stub.url), "other", "file:///snapshots/x.snapshot")


def test_embedded_mode_has_no_snapshots():
    client = QdrantClient(":memory:")
    client.create_collection("docs", vectors_config={})
    with pytest.raises(NotImplementedError, match="not supported in the local Qdrant"):
        client.create_snapshot("docs")
    client.close()
