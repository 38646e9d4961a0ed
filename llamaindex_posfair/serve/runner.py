"""Start and stop a ``posfair serve`` application (used by the CLI, the tests and the bench).

A local Ray gets Ray Serve's proxy checks loosened (:data:`LOCAL_SERVE_ENV`) and listens on the host
the HTTP API is given, with Ray's token authentication on (:func:`local_ray_settings`). A start that
fails raises :class:`ServeStartError` with the reason in one line (Ray's full report chained to it).
Serve's loggers keep the level a caller gave the ``ray.serve`` logger (:func:`deploy`).

Example:
    >>> started = ensure_ray(None, local_cpus=2)                   # doctest: +SKIP
    >>> deploy(ServeConfig(), host="127.0.0.1", port=8000)         # doctest: +SKIP
    >>> stop(started)                                              # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import socket
import tempfile
import urllib.request
from collections.abc import Iterator
from typing import Any

from llamaindex_posfair.serve.config import ServeConfig
from llamaindex_posfair.serve.network import is_loopback

logger = logging.getLogger(__name__)

#: Ray Serve's proxy checks for a local Ray (Serve's defaults: ready check 5 s, health check 10 s
#: every 10 s; three misses in a row restart the proxy and fail the start). The Serve controller
#: reads them when it starts, so they are set for the local Ray's processes; a value already in
#: the environment wins.
LOCAL_SERVE_ENV: dict[str, str] = {
    "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60",
    "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "60",
    "RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S": "20",
}


class ServeStartError(RuntimeError):
    """The application did not start; the message is the reason in one line."""


def port_is_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _ephemeral_ports() -> range:
    """The ports the OS hands out for ``bind(port=0)`` (Linux's setting; its default elsewhere)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(part) for part in f.read().split())
        return range(low, high + 1)
    return range(32768, 61000)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that is free on ``host`` now, outside the OS's ephemeral range where it can (tests and benches).

    A local Ray's own servers (its metrics exporter among them) bind port 0, so the OS gives them
    ephemeral ports, and its workers take ports from 10002 to 19999; a port outside both cannot be
    taken by them between this call and the HTTP proxy's start.
    """
    ephemeral = _ephemeral_ports()
    candidates = [p for p in range(20000, 65536) if p not in ephemeral]  # Ray's workers take 10002-19999
    for port in secrets.SystemRandom().sample(candidates, min(200, len(candidates))):
        if port_is_free(host, port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # the OS's choice: every port is ephemeral here
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_serving(host: str, port: int, attempts: int = 5, timeout_s: float = 10.0) -> None:
    """Check that ``host:port`` answers as the application's ingress, on every one of ``attempts`` connections.

    Ray Serve's proxy binds its port with ``SO_REUSEPORT``; another server that took the same
    port (a Ray metrics exporter, an older process) would answer some or all connections.

    Raises:
        ServeStartError: a connection failed or another server answered; the message names the port.
    """
    target = "127.0.0.1" if _is_wildcard(host) else (f"[{host}]" if ":" in host else host)
    url = f"http://{target}:{port}/health"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an HTTP proxy
    for _ in range(attempts):
        try:
            with direct.open(url, timeout=timeout_s) as response:
                body = response.read()
        except OSError as exc:
            raise ServeStartError(
                f"port {port} on {host} does not answer as posfair serve ({type(exc).__name__}: {exc}); another "
                "server may hold it: pick another --port or stop what holds it"
            ) from exc
        if _json_or_none(body) != {"status": "ok"}:
            raise ServeStartError(
                f"port {port} on {host} is answered by another server; pick another --port or stop what holds it"
            )


#: Ray's token authentication (``RAY_AUTH_MODE=token``, the token read from ``RAY_AUTH_TOKEN_PATH``).
RAY_AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _is_wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0", "::", "[::]")


def local_ray_settings(host: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The environment and the ``ray.init`` arguments of a local Ray whose processes listen on ``host``.

    Loopback (the default) pins Ray's node address, to which Ray binds its servers, to ``127.0.0.1``; a
    specific address pins it to that address; ``0.0.0.0`` / ``::`` let Ray pick it. Ray's token authentication
    is on in every case, with a fresh token in a file only this user can read (a user's own ``RAY_AUTH_*``
    settings win on loopback). Why each setting: ``docs/serving.md``, "Where it listens".

    Raises:
        ValueError: ``RAY_AUTH_MODE`` switches authentication off while ``host`` is beyond loopback.
    """
    env: dict[str, str] = {}
    init: dict[str, Any] = {"include_dashboard": False}
    if is_loopback(host):
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        init["_node_ip_address"] = "127.0.0.1"
    elif not _is_wildcard(host):
        init["_node_ip_address"] = host
    mode = os.environ.get("RAY_AUTH_MODE", "").lower()
    if mode and mode != "token" and not is_loopback(host):
        raise ValueError(
            f"RAY_AUTH_MODE={mode!r} switches Ray's authentication off, and --host {host} makes Ray listen beyond "
            "loopback; unset RAY_AUTH_MODE (posfair serve then turns token authentication on) or serve on 127.0.0.1"
        )
    if not any(name in os.environ for name in RAY_AUTH_ENV):
        env["RAY_AUTH_MODE"] = "token"
        env["RAY_AUTH_TOKEN_PATH"] = _new_ray_token_file()
    return env, init


def _new_ray_token_file() -> str:
    """A fresh Ray token in a new folder readable by this user only; returns the file's path."""
    folder = tempfile.mkdtemp(prefix="posfair-ray-")  # mode 0700
    path = os.path.join(folder, "auth_token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def ensure_ray(
    address: str | None, local_cpus: int | None = None, *, host: str = "127.0.0.1", log_to_driver: bool = True
) -> bool:
    """Connect to a Ray cluster (``address``) or start a local Ray; ``True`` when this call started one.

    A Ray already initialised in this process is reused (and not owned). A local Ray gets
    :data:`LOCAL_SERVE_ENV` and :func:`local_ray_settings` of ``host``.

    Raises:
        ValueError: as :func:`local_ray_settings`.
    """
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=log_to_driver)
        return False
    env, init = local_ray_settings(host)
    with _environment(LOCAL_SERVE_ENV):  # the local Ray's processes inherit it; this process is left as it was
        os.environ.update(env)  # kept: this process talks to its Ray with the same node address and token
        _reload_ray_settings()
        ray.init(num_cpus=local_cpus, log_to_driver=log_to_driver, **init)
    return True


def _reload_ray_settings() -> None:
    """Make this process's Ray re-read the settings :func:`local_ray_settings` put in the environment
    (Ray reads them when it is first imported, which may have been before)."""
    with contextlib.suppress(ImportError, AttributeError):
        from ray._private import ray_constants

        default = not ray_constants.IS_WINDOWS_OR_OSX
        ray_constants.ENABLE_RAY_CLUSTER = ray_constants.env_bool(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, default)
    with contextlib.suppress(ImportError, AttributeError):
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


@contextlib.contextmanager
def _environment(defaults: dict[str, str]) -> Iterator[None]:
    """``defaults`` in ``os.environ`` (where unset) for the duration of the block."""
    added = [name for name in defaults if name not in os.environ]
    os.environ.update({name: defaults[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def resources_needed(config: ServeConfig) -> dict[str, float]:
    """CPUs and GPUs the model replicas need at their fixed (or minimum) counts (the ingress needs none)."""
    scaling = config.scaling
    replicas = max(1, (scaling.min_replicas if scaling.autoscaling else scaling.replicas) or 0)
    need = {"CPU": 2 * scaling.num_cpus * replicas, "GPU": 2 * scaling.num_gpus * replicas}  # embed and rerank
    if config.image is not None:
        image = config.image.scaling(scaling)
        need["CPU"] += image.num_cpus * image.replicas
        need["GPU"] += image.num_gpus * image.replicas
    return need


def missing_resources(config: ServeConfig, have: dict[str, float]) -> str | None:
    """Why ``have`` (e.g. ``ray.cluster_resources()``) cannot place every replica, or ``None``.

    Ray Serve would otherwise wait, without an error, for resources that never come.
    """
    short = [
        f"{need:g} {kind}s (have {have.get(kind, 0.0):g})"
        for kind, need in resources_needed(config).items()
        if need > have.get(kind, 0.0) + 1e-9
    ]
    if not short:
        return None
    return "the replicas (embed + rerank + image) need " + " and ".join(short)


def _import_serve() -> tuple[Any, str | None]:
    """``ray.serve``, and the level a caller gave its logger (importing Serve resets it to INFO), else None."""
    serve_logger = logging.getLogger("ray.serve")
    level = serve_logger.level
    from ray import serve

    if level:
        serve_logger.setLevel(level)
    return serve, logging.getLevelName(level) if level else None


def deploy(config: ServeConfig, host: str, port: int) -> Any:
    """Start Serve's HTTP proxy on ``host:port`` and deploy the application; returns its handle.

    Blocks until every replica has loaded its model, then checks that the port answers as the
    application (:func:`check_serving`).

    Raises:
        ServeStartError: the start failed (a proxy or replica did not come up, Ray failed, another
            server answers on the port); the message says why in one line. Exceptions of other origins (a caller's signal) pass through.
    """
    serve, level = _import_serve()
    from llamaindex_posfair.serve.deployments import build_app

    logging_config = {"log_level": level} if level else None
    try:
        serve.start(http_options={"host": host, "port": port}, logging_config=logging_config)
        handle = serve.run(build_app(config), name=config.app_name, route_prefix="/", logging_config=logging_config)
        check_serving(host, port)
        return handle
    except Exception as exc:
        if not _raised_by_ray_or_python(exc) or isinstance(exc, ServeStartError):
            raise
        raise ServeStartError(start_failure(exc)) from exc


def _raised_by_ray_or_python(exc: BaseException) -> bool:
    module = type(exc).__module__
    return module == "builtins" or module == "ray" or module.startswith("ray.")


#: The last line of a traceback that Ray put in a message: ``SomeError: what happened``.
_CAUSE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::.*)?$")


def start_failure(exc: BaseException) -> str:
    """Why a start failed, in one line: the message's first line, the cause Ray buried in it, or a hint.

    Example:
        >>> start_failure(RuntimeError("Deploying application posfair failed:\\n  File x\\nOSError: no model at /m"))
        'RuntimeError: Deploying application posfair failed: (cause: OSError: no model at /m)'
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    if isinstance(exc, TimeoutError) and "prox" in first.lower():
        waited = os.environ.get(
            "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", LOCAL_SERVE_ENV["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"]
        )
        return (
            f"Ray Serve's HTTP proxy did not become ready ({first}); the machine may be busy: retry, "
            f"or raise RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S (a local start uses {waited} s)"
        )
    cause = next((line for line in reversed(lines[1:]) if _CAUSE.match(line)), None)
    return (f"{first} (cause: {cause})" if cause and cause not in first else first)[:500]


def stop(owns_ray: bool, app_name: str = "posfair") -> None:
    """Delete the application (its replicas finish their requests, bounded by their graceful timeout),
    then stop what this process started: the local Ray, or Serve itself when no other application is left.
    """
    import ray

    if not ray.is_initialized():
        return
    from ray import serve

    try:
        serve.delete(app_name)
        if owns_ray:
            ray.shutdown()  # ends the controller, the proxy and every worker of the local Ray
            return
        if not serve.status().applications:
            serve.shutdown()
    except Exception as exc:  # pragma: no cover - best effort during shutdown
        logger.warning("stopping posfair serve: %s: %s", type(exc).__name__, exc)
        if owns_ray:
            ray.shutdown()
