"""Snapshots on a Qdrant server: create -> download -> sha256 verify -> restore.

Embedded storage has no snapshot API: copy its folder while no client has it open. On a server every call
but the download goes through qdrant-client (``collection=None`` means a *full* snapshot). The download
streams the snapshot with ``httpx`` to ``NAME.part`` while hashing, checks the server's checksum, renames it
and writes ``NAME.sha256`` (qdrant-client's ``get_snapshot`` parses the body as JSON).
:func:`restore_snapshot` verifies a local file before uploading it; :func:`recover_from_location` has the
server fetch it. Server errors come out as ``httpx.HTTPStatusError`` (so :mod:`qdrant_tools.retry` retries
429 and 5xx only), transport failures as ``httpx.TransportError``.

A cluster's collection snapshot holds only the shards of the node it is taken on: snapshot every node. The
API key comes from an environment variable, is sent only as the ``api-key`` header, is never logged, and is
refused over plain ``http://`` unless allowed. docs/scale-out.md ("Snapshots") shows the commands.

Example:
    >>> from qdrant_tools.snapshots import ServerConfig, create_snapshot, download_snapshot
    >>> server = ServerConfig("https://qdrant.example.com:6333")           # doctest: +SKIP
    >>> snap = create_snapshot(server, "docs")                            # doctest: +SKIP
    >>> path = download_snapshot(server, "docs", snap.name, "backups/")   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlsplit

import httpx

from qdrant_tools.retry import RetryPolicy, call_with_retry

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

logger = logging.getLogger(__name__)

API_KEY_ENV = "QDRANT_API_KEY"
_CHUNK = 1 << 20
Priority = Literal["snapshot", "replica", "no_sync"]


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
        with warnings.catch_warnings():
            if self.allow_insecure_api_key:  # asked for explicitly: qdrant-client need not warn again
                warnings.filterwarnings("ignore", message="Api key is used with an insecure connection")
            return QdrantClient(url=self.base_url, api_key=key, timeout=int(self.timeout), https=self.is_tls, **kwargs)


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot as the server describes it."""

    name: str
    size: int | None = None
    checksum: str | None = None
    creation_time: str | None = None

    @classmethod
    def from_description(cls, description: Any) -> SnapshotInfo:
        """From qdrant-client's ``SnapshotDescription``."""
        return cls(description.name, description.size, description.checksum, description.creation_time)


def _what(collection: str | None) -> str:
    return f"of {collection!r}" if collection is not None else "of the whole storage"


def _url_path(collection: str | None, name: str) -> str:
    if collection is None:
        return f"/snapshots/{quote(name, safe='')}"
    return f"/collections/{quote(collection, safe='')}/snapshots/{quote(name, safe='')}"


def _check(resp: httpx.Response, what: str) -> None:
    if resp.status_code >= 400:
        # raising HTTPStatusError keeps the status for the retry classifier (5xx/429 retried, 4xx not)
        detail = resp.text[:300]
        raise httpx.HTTPStatusError(f"{what}: HTTP {resp.status_code}: {detail}", request=resp.request, response=resp)


def _status_error(what: str, server: ServerConfig, status: int, detail: str, retry_after: Any = None) -> Exception:
    request = httpx.Request("GET", server.base_url)
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    response = httpx.Response(status, headers=headers, text=detail, request=request)
    return httpx.HTTPStatusError(f"{what}: HTTP {status}: {detail}", request=request, response=response)


@contextlib.contextmanager
def _server_errors(what: str, server: ServerConfig) -> Iterator[None]:
    """Turn qdrant-client's errors into the ``httpx`` errors this module documents (status and Retry-After kept)."""
    from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    try:
        yield
    except UnexpectedResponse as exc:
        detail = exc.content.decode("utf-8", "replace")[:300]
        raise _status_error(what, server, exc.status_code or 500, detail, exc.headers.get("retry-after")) from None
    except ResourceExhaustedResponse as exc:  # qdrant-client's form of a 429 with Retry-After
        raise _status_error(what, server, 429, str(exc), exc.retry_after_s) from None
    except ResponseHandlingException as exc:
        if isinstance(exc.source, httpx.HTTPError):  # transport: timeouts, refused connections
            raise exc.source from None
        raise SnapshotError(f"{what}: unexpected answer from {server.base_url} ({exc.source})") from None


@contextlib.contextmanager
def _qdrant(server: ServerConfig, client: QdrantClient | None) -> Iterator[QdrantClient]:
    """``client``, or a ``QdrantClient`` for ``server`` closed on exit (no version probe: one request per call)."""
    if client is not None:
        yield client
        return
    own = server.qdrant_client(check_compatibility=False)
    try:
        yield own
    finally:
        own.close()


def create_snapshot(
    server: ServerConfig, collection: str | None, *, client: QdrantClient | None = None
) -> SnapshotInfo:
    """Create a snapshot of ``collection`` (``None``: the whole storage) on this node and wait for it.

    Not retried: a timed-out creation may have succeeded, and repeating it
    would store a second snapshot. List the snapshots and retry by hand.

    Args:
        server: the node.
        collection: the collection, or ``None`` for a full snapshot.
        client: a ``QdrantClient`` to use (default: one for ``server``, closed after the call).

    Raises:
        httpx.HTTPStatusError: the server refused (e.g. 404: no such collection).
    """
    with _qdrant(server, client) as qdrant, _server_errors(f"create snapshot {_what(collection)}", server):
        if collection is None:
            description = qdrant.create_full_snapshot(wait=True)
        else:
            description = qdrant.create_snapshot(collection, wait=True)
    info = SnapshotInfo.from_description(description)
    logger.info("created snapshot %s %s (%s bytes, sha256 %s)", info.name, _what(collection), info.size, info.checksum)
    return info


def list_snapshots(
    server: ServerConfig,
    collection: str | None,
    *,
    client: QdrantClient | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
) -> list[SnapshotInfo]:
    """Snapshots of ``collection`` (``None``: full snapshots) on this node (retried: a read)."""
    kw = {"sleep": sleep} if sleep else {}
    what = f"list snapshots {_what(collection)}"
    with _qdrant(server, client) as qdrant:

        def once() -> list[Any]:
            with _server_errors(what, server):
                return qdrant.list_full_snapshots() if collection is None else qdrant.list_snapshots(collection)

        found = call_with_retry(once, policy=policy, description="list_snapshots", **kw)
    return [SnapshotInfo.from_description(d) for d in found or []]


def delete_snapshot(
    server: ServerConfig, collection: str | None, name: str, *, client: QdrantClient | None = None
) -> None:
    """Delete snapshot ``name`` of ``collection`` (``None``: a full snapshot) on this node.

    Not retried: a timed-out deletion may have succeeded, and the repeat would answer 404.

    Raises:
        httpx.HTTPStatusError: the server refused (e.g. 404: no such snapshot).
    """
    with _qdrant(server, client) as qdrant, _server_errors(f"delete snapshot {name!r} {_what(collection)}", server):
        if collection is None:
            qdrant.delete_full_snapshot(name, wait=True)
        else:
            qdrant.delete_snapshot(collection, name, wait=True)
    logger.info("deleted snapshot %s %s", name, _what(collection))


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


def _stream_to(client: httpx.Client, url_path: str, name: str, part: Path, show_progress: bool) -> str:
    """One download attempt of ``url_path`` into ``part``; the sha256 of the bytes written."""
    h = hashlib.sha256()
    with client.stream("GET", url_path) as resp:
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


def _reference_checksum(server: ServerConfig, collection: str | None, name: str, **retry: Any) -> str:
    listed = {s.name: s for s in list_snapshots(server, collection, **retry)}
    if name not in listed or not listed[name].checksum:
        raise FileNotFoundError(
            f"snapshot {name!r} {_what(collection)} is not listed by {server.base_url} "
            f"(it has {sorted(listed)}); check the name or pass --checksum"
        )
    return str(listed[name].checksum)


def download_snapshot(
    server: ServerConfig,
    collection: str | None,
    name: str,
    dest_dir: str | Path,
    *,
    expected_checksum: str | None = None,
    http: httpx.Client | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
    show_progress: bool = False,
) -> Path:
    """Download snapshot ``name`` (of ``collection``; ``None``: a full snapshot) to ``dest_dir/name`` and verify it.

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
    kw = {"sleep": sleep} if sleep else {}
    if expected_checksum is None:
        expected_checksum = _reference_checksum(server, collection, name, policy=policy, **kw)
    target = dest_dir / name
    part = target.with_name(name + ".part")
    client = http if http is not None else server.http_client()
    try:
        actual = call_with_retry(_stream_to, client, _url_path(collection, name), name, part, show_progress,
                                 policy=policy, description="download_snapshot", **kw)  # fmt: skip
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    finally:
        if http is None:
            client.close()
    if actual != expected_checksum.lower():
        part.unlink(missing_ok=True)
        raise ChecksumMismatchError(
            f"downloaded snapshot {name!r} has sha256 {actual}, but the server reports {expected_checksum}; "
            "the transfer was corrupted: download it again"
        )
    os.replace(part, target)
    _sidecar(target).write_text(f"{actual}  {name}\n", encoding="utf-8")
    logger.info("downloaded and verified %s (sha256 %s)", target, actual)
    return target


def _priority(priority: str) -> Any:
    from qdrant_client import models

    if priority not in ("snapshot", "replica", "no_sync"):
        raise ValueError(f'priority must be "snapshot", "replica" or "no_sync", got {priority!r}')
    return models.SnapshotPriority(priority)


def restore_snapshot(
    server: ServerConfig,
    collection: str,
    path: str | Path,
    *,
    checksum: str | None = None,
    priority: Priority = "snapshot",
    client: QdrantClient | None = None,
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
    level = _priority(priority)
    path = Path(path)
    digest = verify_snapshot_file(path, checksum)  # raise before side effects
    kw = {"sleep": sleep} if sleep else {}
    what = f"restore {collection!r} from {path.name}"
    with _qdrant(server, client) as qdrant:

        def upload() -> Any:
            with open(path, "rb") as f, _server_errors(what, server):
                return qdrant.http.snapshots_api.recover_from_uploaded_snapshot(
                    collection_name=collection, wait=True, priority=level, checksum=digest, snapshot=f
                )

        call_with_retry(upload, policy=policy, description="restore_snapshot", **kw)
    logger.info("restored %r from %s (sha256 %s)", collection, path, digest)


def recover_from_location(
    server: ServerConfig,
    collection: str,
    location: str,
    *,
    checksum: str | None = None,
    priority: Priority = "snapshot",
    client: QdrantClient | None = None,
) -> None:
    """Ask the server to fetch a snapshot itself (``http(s)://`` or ``file://`` on the node) and recover.

    Use it for multi-GB snapshots already on the node or in object storage.

    Raises:
        httpx.HTTPStatusError: the server refused.
    """
    level = _priority(priority)
    with _qdrant(server, client) as qdrant, _server_errors(f"recover {collection!r} from {location}", server):
        qdrant.recover_snapshot(collection, location, checksum=checksum or None, priority=level, wait=True)
