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


def gpus_needed(config: ServeConfig) -> float:
    """GPUs the application needs at its fixed (or minimum) replica counts."""
    scaling = config.scaling
    replicas = scaling.min_replicas if scaling.autoscaling else scaling.replicas
    needed = 2 * scaling.num_gpus * max(1, replicas or 0)  # embed and rerank
    if config.image is not None:
        image = config.image.scaling(scaling)
        needed += image.num_gpus * image.replicas
    return needed


def gpus_missing(config: ServeConfig) -> str | None:
    """Why the cluster cannot place the GPU replicas now, or ``None``."""
    import ray

    needed = gpus_needed(config)
    if needed == 0:
        return None
    have = float(ray.cluster_resources().get("GPU", 0.0))
    if have >= needed:
        return None
    return f"the replicas need {needed:g} GPUs (embed + rerank + image), and the Ray cluster has {have:g}"


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
