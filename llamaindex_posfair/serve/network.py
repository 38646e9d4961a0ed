"""Where the processes of ``posfair serve`` listen: loopback checks, and Serve's replica gRPC server kept local.

Example:
    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, False)
"""

from __future__ import annotations

import ipaddress
from typing import Any


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_replica_grpc_locally() -> None:
    """Make Serve's replicas bind their inter-deployment gRPC server to loopback on a loopback node.

    Ray Serve starts that server on every interface (``[::]:0``) whatever the node's address;
    on a node whose Ray address is loopback (a local ``posfair serve``) it is bound to
    ``127.0.0.1`` instead, as Ray's own servers are. Called where the replicas import the
    application (idempotent).
    """
    from ray.serve._private import replica

    original = replica.add_port_to_grpc_server
    if getattr(original, "posfair_local", False):
        return

    def add_port(server: Any, address: str) -> int:
        if address.startswith("[::]:") and _node_is_loopback():
            address = "127.0.0.1:" + address.removeprefix("[::]:")
        return original(server, address)

    add_port.posfair_local = True  # type: ignore[attr-defined]
    replica.add_port_to_grpc_server = add_port


def _node_is_loopback() -> bool:
    import ray

    try:
        return is_loopback(ray.util.get_node_ip_address())
    except Exception:  # no Ray node in this process: leave Serve's address as it is
        return False
