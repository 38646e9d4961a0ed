"""Start and stop a ``posfair serve`` application (used by the CLI, the tests and the bench).

A local Ray is started with Ray Serve's proxy checks loosened (:data:`LOCAL_SERVE_ENV`): on a
busy machine (two cores, a model loading) Serve's defaults miss the proxy's readiness check
three times and fail the start. A start that fails anyway raises :class:`ServeStartError`
with the reason in one line (Ray's full report is chained to it). Serve's own loggers keep
the level a caller (the CLI) gave the ``ray.serve`` logger, in this process and in Serve's
controller, proxies and replicas.

Example:
    >>> started = ensure_ray(None, local_cpus=2)                   # doctest: +SKIP
    >>> deploy(ServeConfig(), host="127.0.0.1", port=8000)         # doctest: +SKIP
    >>> stop(started)                                              # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections.abc import Iterator
from typing import Any

from llamaindex_posfair.serve.config import ServeConfig

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


def free_port(host: str = "127.0.0.1") -> int:
    """A port that is free on ``host`` now (tests and benches)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def ensure_ray(address: str | None, local_cpus: int | None = None, *, log_to_driver: bool = True) -> bool:
    """Connect to a Ray cluster (``address``) or start a local Ray; ``True`` when this call started one.

    A Ray already initialised in this process is reused (and not owned). A local Ray gets
    :data:`LOCAL_SERVE_ENV`.
    """
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=log_to_driver)
        return False
    with _environment(LOCAL_SERVE_ENV):  # the local Ray's processes inherit it; this process is left as it was
        ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=log_to_driver)
    return True


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

    Blocks until every replica has loaded its model.

    Raises:
        ServeStartError: the start failed (a proxy or replica did not come up, Ray failed); the
            message says why in one line. Exceptions of other origins (a caller's signal) pass through.
    """
    serve, level = _import_serve()
    from llamaindex_posfair.serve.deployments import build_app

    logging_config = {"log_level": level} if level else None
    try:
        serve.start(http_options={"host": host, "port": port}, logging_config=logging_config)
        return serve.run(build_app(config), name=config.app_name, route_prefix="/", logging_config=logging_config)
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
