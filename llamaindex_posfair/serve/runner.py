"""Start and stop a ``posfair serve`` application (used by the CLI, the tests and the bench).

Example:
    >>> started = ensure_ray(None, local_cpus=2)                   # doctest: +SKIP
    >>> deploy(ServeConfig(), host="127.0.0.1", port=8000)         # doctest: +SKIP
    >>> stop(started)                                              # doctest: +SKIP
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from llamaindex_posfair.serve.config import ServeConfig

logger = logging.getLogger(__name__)


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

    A Ray already initialised in this process is reused (and not owned).
    """
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=log_to_driver)
        return False
    ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=log_to_driver)
    return True


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


def deploy(config: ServeConfig, host: str, port: int) -> Any:
    """Start Serve's HTTP proxy on ``host:port`` and deploy the application; returns its handle.

    Blocks until every replica has loaded its model.
    """
    from ray import serve

    from llamaindex_posfair.serve.deployments import build_app

    serve.start(http_options={"host": host, "port": port})
    return serve.run(build_app(config), name=config.app_name, route_prefix="/")


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
