"""Resource check (a local Ray that cannot place a replica is refused instead of waiting forever) and
the start: a local Ray's Serve settings, one-line start failures (no Ray is started here)."""

from __future__ import annotations

import os

import pytest

from llamaindex_posfair.serve.config import ImageModelConfig, ScalingConfig, ServeConfig
from llamaindex_posfair.serve.runner import ServeStartError, missing_resources, resources_needed, start_failure


def test_needs_count_embed_rerank_and_image_replicas():
    cfg = ServeConfig(
        scaling=ScalingConfig(replicas=4, num_gpus=0.5, num_cpus=1), image=ImageModelConfig(model="m", num_gpus=1)
    )
    assert resources_needed(cfg) == {"CPU": 9.0, "GPU": 5.0}


def test_missing_resources_names_what_is_short():
    cfg = ServeConfig(scaling=ScalingConfig(replicas=2, num_cpus=1))
    assert missing_resources(cfg, {"CPU": 4.0}) is None
    assert missing_resources(cfg, {"CPU": 2.0}) == "the replicas (embed + rerank + image) need 4 CPUs (have 2)"


def test_autoscaling_needs_its_minimum():
    cfg = ServeConfig(scaling=ScalingConfig(min_replicas=1, max_replicas=8, num_gpus=1))
    assert resources_needed(cfg)["GPU"] == 2.0


# ---------------------------------------------------------------------- starting
def test_a_local_ray_starts_with_loosened_proxy_checks_and_this_process_keeps_its_environment(monkeypatch):
    import sys
    import types

    from llamaindex_posfair.serve import runner

    seen = {}
    fake = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: seen.update(os.environ, init=kw))
    monkeypatch.setitem(sys.modules, "ray", fake)
    _clear_ray_settings(monkeypatch)
    monkeypatch.delenv("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", raising=False)
    monkeypatch.setenv("RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S", "99")  # the user's value wins
    assert runner.ensure_ray(None, local_cpus=2) is True
    assert seen["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"] == "60"
    assert seen["RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S"] == "99"
    assert (
        seen["RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S"] == runner.LOCAL_SERVE_ENV["RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S"]
    )
    assert "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S" not in os.environ
    assert os.environ["RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S"] == "99"
    assert seen["init"]["_node_ip_address"] == "127.0.0.1" and seen["init"]["include_dashboard"] is False
    assert seen["RAY_AUTH_MODE"] == "token" and seen["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert os.stat(seen["RAY_AUTH_TOKEN_PATH"]).st_mode & 0o077 == 0  # only this user reads Ray's token
    seen.clear()
    assert runner.ensure_ray("ray://cluster:10001") is False  # a cluster keeps its own settings
    assert "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S" not in seen


def _clear_ray_settings(monkeypatch):
    """Unset what a local Ray start sets in this process; restored (unset) after the test."""
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_ray_listens_where_the_api_does_with_token_auth(monkeypatch):
    from llamaindex_posfair.serve.runner import local_ray_settings

    _clear_ray_settings(monkeypatch)
    env, init = local_ray_settings("10.1.2.3")
    assert init["_node_ip_address"] == "10.1.2.3" and env["RAY_AUTH_MODE"] == "token"
    env, init = local_ray_settings("0.0.0.0")
    assert "_node_ip_address" not in init and env["RAY_AUTH_MODE"] == "token"
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert "RAY_AUTH_MODE" not in local_ray_settings("127.0.0.1")[0]  # the user's choice, on loopback
    with pytest.raises(ValueError, match="RAY_AUTH_MODE='disabled' switches Ray's authentication off"):
        local_ray_settings("0.0.0.0")


def test_a_failed_start_is_one_line_with_the_cause_ray_buried_in_it():
    report = (
        "Deploying application posfair failed: Failed to update the deployments ['embed'].\n"
        'Traceback (most recent call last):\n  File "replica.py", line 3, in __init__\n'
        "    raise OSError(...)\nOSError: no model files in /models/x\n"
    )
    assert start_failure(RuntimeError(report)) == (
        "RuntimeError: Deploying application posfair failed: Failed to update the deployments ['embed']. "
        "(cause: OSError: no model files in /models/x)"
    )
    proxy = start_failure(TimeoutError("Proxies not available after 60s."))
    assert proxy.startswith("Ray Serve's HTTP proxy did not become ready (TimeoutError: Proxies not available")
    assert "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S" in proxy and "\n" not in proxy


def test_deploy_turns_ray_failures_into_serve_start_errors_and_lets_others_through(monkeypatch):
    pytest.importorskip("ray.serve")
    from ray import serve

    from llamaindex_posfair.serve import runner

    def proxies_late(**kwargs):
        raise TimeoutError("Proxies not available after 60s.")

    monkeypatch.setattr(serve, "start", proxies_late)
    with pytest.raises(ServeStartError, match="HTTP proxy did not become ready") as info:
        runner.deploy(ServeConfig(), "127.0.0.1", 8000)
    assert isinstance(info.value.__cause__, TimeoutError)

    class Stop(Exception):  # e.g. the CLI's signal exception: not a start failure
        pass

    def stopped(**kwargs):
        raise Stop("SIGTERM")

    monkeypatch.setattr(serve, "start", stopped)
    with pytest.raises(Stop):
        runner.deploy(ServeConfig(), "127.0.0.1", 8000)


# ---------------------------------------------------------------------- the port is ours
def _http_server(body: bytes, content_type: str):
    """A server on a free loopback port that answers every GET with ``body``; returns it (already serving)."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_check_serving_accepts_the_ingress_and_refuses_another_server_or_none():
    from llamaindex_posfair.serve import runner

    ours = _http_server(b'{"status":"ok"}', "application/json")
    metrics = _http_server(b"# HELP ray_up Ray is up\nray_up 1.0\n", "text/plain")  # what Ray's exporter answers
    try:
        runner.check_serving("127.0.0.1", ours.server_address[1])
        runner.check_serving("0.0.0.0", ours.server_address[1])  # a wildcard host is checked on loopback
        port = metrics.server_address[1]
        with pytest.raises(ServeStartError, match=f"port {port} on 127.0.0.1 is answered by another server"):
            runner.check_serving("127.0.0.1", port)
    finally:
        ours.shutdown()
        metrics.shutdown()
    closed = runner.free_port()
    with pytest.raises(ServeStartError, match=f"port {closed} on 127.0.0.1 does not answer as posfair serve"):
        runner.check_serving("127.0.0.1", closed, timeout_s=2)


def test_free_ports_lie_outside_the_range_a_local_ray_binds_its_own_servers_in():
    from llamaindex_posfair.serve import runner

    ephemeral = runner._ephemeral_ports()
    ports = [runner.free_port() for _ in range(50)]
    assert not any(p in ephemeral or p < 20000 for p in ports)
    assert all(runner.port_is_free("127.0.0.1", p) for p in ports)


def test_free_port_falls_back_to_the_os_choice_when_every_port_is_ephemeral(monkeypatch):
    from llamaindex_posfair.serve import runner

    monkeypatch.setattr(runner, "_ephemeral_ports", lambda: range(1024, 65536))
    port = runner.free_port()
    assert 1024 <= port < 65536 and runner.port_is_free("127.0.0.1", port)


def test_deploy_checks_its_port_after_the_application_started(monkeypatch):
    pytest.importorskip("ray.serve")
    from ray import serve

    from llamaindex_posfair.serve import runner

    monkeypatch.setattr(serve, "start", lambda **kwargs: None)
    monkeypatch.setattr(serve, "run", lambda app, **kwargs: "handle")
    ours = _http_server(b'{"status":"ok"}', "application/json")
    metrics = _http_server(b"# HELP ray_up Ray is up\nray_up 1.0\n", "text/plain")
    try:
        assert runner.deploy(ServeConfig(), "127.0.0.1", ours.server_address[1]) == "handle"
        port = metrics.server_address[1]
        with pytest.raises(ServeStartError, match=f"port {port} on 127.0.0.1 is answered by another server"):
            runner.deploy(ServeConfig(), "127.0.0.1", port)
    finally:
        ours.shutdown()
        metrics.shutdown()
