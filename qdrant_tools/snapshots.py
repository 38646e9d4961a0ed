"""Collection snapshots on a Qdrant server: create -> download -> sha256 verify -> restore.

Embedded local mode (``QdrantClient(path=...)``) has no snapshot API
(``create_snapshot`` raises ``NotImplementedError``); back it up by copying its
folder while no client has it open. Everything here talks to a server's REST
API directly with ``httpx`` (qdrant-client does not download snapshots):

* ``POST /collections/{c}/snapshots?wait=true``: create; the server reports name, size, sha256;
* ``GET  /collections/{c}/snapshots/{name}``: download, streamed to ``NAME.part``
  while hashing, compared with the server's checksum, then renamed; a
  ``NAME.sha256`` file (``sha256sum`` format) is written beside it;
* ``POST /collections/{c}/snapshots/upload?priority=snapshot&checksum=...``:
  restore; the local file is verified *before* anything is sent, and the
  server verifies the checksum again.

On a cluster a collection snapshot holds only the shards of the node it is
taken on: snapshot every node (one ``--qdrant-url`` each), or use shard
snapshots. The API key comes from an environment variable, is sent only as the
``api-key`` header, is never logged, and is refused over plain ``http://``
unless explicitly allowed.

Example:
    >>> from qdrant_tools.snapshots import ServerConfig, create_snapshot, download_snapshot
    >>> server = ServerConfig("https://qdrant.example.com:6333")           # doctest: +SKIP
    >>> snap = create_snapshot(server, "docs")                            # doctest: +SKIP
    >>> path = download_snapshot(server, "docs", snap.name, "backups/")   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import httpx

from qdrant_tools.retry import RetryPolicy, call_with_retry

logger = logging.getLogger(__name__)

API_KEY_ENV = "QDRANT_API_KEY"
_CHUNK = 1 << 20


class InsecureApiKeyError(ValueError):
    """An API key would be sent over plain http."""


class ChecksumMismatchError(RuntimeError):
    """A snapshot file's sha256 differs from the reference checksum."""


class SnapshotError(RuntimeError):
    """The server answered a snapshot request with an error."""


@dataclass(frozen=True)
class ServerConfig:
    """Where a Qdrant server is and how to authenticate (the key itself is never stored).

    Args:
        url: ``https://host:6333`` (REST port).
        api_key_env: environment variable holding the API key (unset = no key).
        allow_insecure_api_key: allow sending the key over ``http://``.
        timeout: seconds per request (snapshots of large collections take minutes).
        verify: TLS verification: True, False (self-signed test setups only) or a CA bundle path.

    Raises:
        ValueError: on a URL without ``http(s)://`` and a host, or a non-positive timeout.

    Example:
        >>> ServerConfig("http://localhost:6333").base_url
        'http://localhost:6333'
    """

    url: str
    api_key_env: str = API_KEY_ENV
    allow_insecure_api_key: bool = False
    timeout: float = 600.0
    verify: bool | str = True

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must look like https://HOST:6333 (the REST port), got {self.url!r}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout!r}; snapshots need minutes: try 600")

    @property
    def base_url(self) -> str:
        return self.url.rstrip("/")

    @property
    def is_tls(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    def api_key(self, key: str | None = None) -> str | None:
        """``key``, else the API key from the environment, else None; raises before it could travel over http.

        Raises:
            InsecureApiKeyError: a key is set, the URL is ``http://`` and not explicitly allowed.
        """
        key = key or os.environ.get(self.api_key_env) or None
        if key and not self.is_tls and not self.allow_insecure_api_key:
            raise InsecureApiKeyError(
                f"refusing to send ${self.api_key_env} over plain http to {self.base_url}; use an https:// URL, "
                f"unset {self.api_key_env}, or allow it explicitly (--allow-insecure-api-key)"
            )
        return key

    def http_client(self, transport: httpx.BaseTransport | None = None) -> httpx.Client:
        """An ``httpx.Client`` with the base URL, the ``api-key`` header, timeout and TLS settings."""
        key = self.api_key()
        headers = {"api-key": key} if key else {}
        return httpx.Client(
            base_url=self.base_url, headers=headers, timeout=self.timeout, verify=self.verify, transport=transport
        )

    def qdrant_client(self, api_key: str | None = None, **kwargs: Any) -> Any:
        """A ``QdrantClient`` for this server (same key policy; ``api_key`` overrides the environment's)."""
        from qdrant_client import QdrantClient

        key = self.api_key(api_key)
        return QdrantClient(url=self.base_url, api_key=key, timeout=int(self.timeout), https=self.is_tls, **kwargs)


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot as the server describes it."""

    name: str
    size: int | None = None
    checksum: str | None = None
    creation_time: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SnapshotInfo:
        return cls(
            name=data["name"],
            size=data.get("size"),
            checksum=data.get("checksum"),
            creation_time=data.get("creation_time"),
        )


def _path(collection: str, *rest: str) -> str:
    return "/".join(["/collections", quote(collection, safe="")] + [quote(r, safe="") for r in rest])


def _check(resp: httpx.Response, what: str) -> Any:
    if resp.status_code >= 400:
        # raising HTTPStatusError keeps the status for the retry classifier (5xx/429 retried, 4xx not)
        detail = resp.text[:300]
        raise httpx.HTTPStatusError(f"{what}: HTTP {resp.status_code}: {detail}", request=resp.request, response=resp)
    try:
        return resp.json().get("result")
    except ValueError as exc:
        raise SnapshotError(f"{what}: the server did not answer JSON ({resp.text[:200]!r})") from exc


def _client(server: ServerConfig, http: httpx.Client | None) -> tuple[httpx.Client, bool]:
    return (http, False) if http is not None else (server.http_client(), True)


def create_snapshot(server: ServerConfig, collection: str, *, http: httpx.Client | None = None) -> SnapshotInfo:
    """Create a snapshot of ``collection`` on this node and wait for it.

    Not retried: a timed-out creation may have succeeded, and repeating it
    would store a second snapshot. List the snapshots and retry by hand.

    Raises:
        httpx.HTTPStatusError: the server refused (e.g. 404: no such collection).
    """
    client, own = _client(server, http)
    try:
        result = _check(
            client.post(_path(collection, "snapshots"), params={"wait": "true"}), f"create snapshot of {collection!r}"
        )
    finally:
        if own:
            client.close()
    info = SnapshotInfo.from_json(result)
    logger.info("created snapshot %s of %r (%s bytes, sha256 %s)", info.name, collection, info.size, info.checksum)
    return info


def list_snapshots(
    server: ServerConfig,
    collection: str,
    *,
    http: httpx.Client | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
) -> list[SnapshotInfo]:
    """Snapshots of ``collection`` on this node (retried: a read)."""
    client, own = _client(server, http)
    try:
        kw = {"sleep": sleep} if sleep else {}
        result = call_with_retry(
            lambda: _check(client.get(_path(collection, "snapshots")), f"list snapshots of {collection!r}"),
            policy=policy,
            description="list_snapshots",
            **kw,
        )
    finally:
        if own:
            client.close()
    return [SnapshotInfo.from_json(r) for r in result or []]


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def verify_snapshot_file(path: str | Path, expected: str | None = None) -> str:
    """Check a snapshot file against ``expected`` or its ``.sha256`` sidecar.

    Returns:
        The file's sha256.

    Raises:
        FileNotFoundError: no file, or no reference checksum (neither given nor a sidecar).
        ChecksumMismatchError: the file is not what was downloaded.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"snapshot file {str(path)!r} does not exist")
    if expected is None:
        side = _sidecar(path)
        if not side.is_file():
            raise FileNotFoundError(
                f"no checksum for {str(path)!r}: pass the expected sha256 (--checksum) or keep the "
                f"{side.name} file written by `posfair snapshot download`"
            )
        expected = side.read_text(encoding="utf-8").split()[0]
    actual = sha256_file(path)
    if actual != expected.lower():
        raise ChecksumMismatchError(
            f"snapshot {str(path)!r} has sha256 {actual}, expected {expected}; the file is corrupt or "
            "not the one downloaded: download it again"
        )
    return actual


def download_snapshot(
    server: ServerConfig,
    collection: str,
    name: str,
    dest_dir: str | Path,
    *,
    expected_checksum: str | None = None,
    http: httpx.Client | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
    show_progress: bool = False,
) -> Path:
    """Download snapshot ``name`` to ``dest_dir/name`` and verify its sha256.

    The reference checksum is ``expected_checksum`` or, if not given, the one
    the server reports for ``name``. The file appears under its final name only
    once verified; transport failures restart the download (bounded retries).

    Returns:
        Path of the verified file (a ``.sha256`` file is written beside it).

    Raises:
        ChecksumMismatchError: the downloaded bytes do not match (nothing is left behind).
        FileNotFoundError: the server does not list ``name`` and no checksum was given.
    """
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    if Path(name).name != name or name in ("", ".", ".."):
        raise ValueError(f"snapshot name must be a plain file name, got {name!r}")
    client, own = _client(server, http)
    kw = {"sleep": sleep} if sleep else {}
    try:
        if expected_checksum is None:
            listed = {s.name: s for s in list_snapshots(server, collection, http=client, policy=policy, **kw)}
            if name not in listed or not listed[name].checksum:
                raise FileNotFoundError(
                    f"snapshot {name!r} of {collection!r} is not listed by {server.base_url} "
                    f"(it has {sorted(listed)}); check the name or pass --checksum"
                )
            expected_checksum = listed[name].checksum
        target = dest_dir / name
        part = target.with_name(name + ".part")

        def fetch() -> str:
            h = hashlib.sha256()
            with client.stream("GET", _path(collection, "snapshots", name)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    _check(resp, f"download snapshot {name!r}")
                total = int(resp.headers.get("content-length") or 0) or None
                bar = None
                if show_progress:
                    from tqdm.auto import tqdm

                    bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"download {name}")
                try:
                    with open(part, "wb") as f:
                        for block in resp.iter_bytes(_CHUNK):
                            f.write(block)
                            h.update(block)
                            if bar is not None:
                                bar.update(len(block))
                finally:
                    if bar is not None:
                        bar.close()
            return h.hexdigest()

        try:
            actual = call_with_retry(fetch, policy=policy, description="download_snapshot", **kw)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        if actual != expected_checksum.lower():
            part.unlink(missing_ok=True)
            raise ChecksumMismatchError(
                f"downloaded snapshot {name!r} has sha256 {actual}, but the server reports {expected_checksum}; "
                "the transfer was corrupted: download it again"
            )
        os.replace(part, target)
        _sidecar(target).write_text(f"{actual}  {name}\n", encoding="utf-8")
    finally:
        if own:
            client.close()
    logger.info("downloaded and verified %s (sha256 %s)", target, actual)
    return target


def restore_snapshot(
    server: ServerConfig,
    collection: str,
    path: str | Path,
    *,
    checksum: str | None = None,
    priority: Literal["snapshot", "replica", "no_sync"] = "snapshot",
    http: httpx.Client | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
) -> None:
    """Restore ``collection`` on this node from a local snapshot file (overwrites it).

    The file is verified against ``checksum`` (or its ``.sha256`` file) before
    anything is sent; the server checks the same checksum on arrival.

    Raises:
        ChecksumMismatchError / FileNotFoundError: before any request.
        httpx.HTTPStatusError: the server refused.
    """
    if priority not in ("snapshot", "replica", "no_sync"):
        raise ValueError(f'priority must be "snapshot", "replica" or "no_sync", got {priority!r}')
    path = Path(path)
    digest = verify_snapshot_file(path, checksum)  # raise before side effects
    client, own = _client(server, http)
    kw = {"sleep": sleep} if sleep else {}

    def upload() -> Any:
        with open(path, "rb") as f:
            resp = client.post(
                _path(collection, "snapshots", "upload"),
                params={"wait": "true", "priority": priority, "checksum": digest},
                files={"snapshot": (path.name, f, "application/octet-stream")},
            )
        return _check(resp, f"restore {collection!r} from {path.name}")

    try:
        call_with_retry(upload, policy=policy, description="restore_snapshot", **kw)
    finally:
        if own:
            client.close()
    logger.info("restored %r from %s (sha256 %s)", collection, path, digest)


def recover_from_location(
    server: ServerConfig,
    collection: str,
    location: str,
    *,
    checksum: str | None = None,
    priority: Literal["snapshot", "replica", "no_sync"] = "snapshot",
    http: httpx.Client | None = None,
) -> None:
    """Ask the server to fetch a snapshot itself (``http(s)://`` or ``file://`` on the node) and recover.

    Use it for multi-GB snapshots already on the node or in object storage.
    """
    client, own = _client(server, http)
    try:
        body: dict[str, Any] = {"location": location, "priority": priority}
        if checksum:
            body["checksum"] = checksum
        _check(
            client.put(_path(collection, "snapshots", "recover"), params={"wait": "true"}, json=body),
            f"recover {collection!r} from {location}",
        )
    finally:
        if own:
            client.close()
