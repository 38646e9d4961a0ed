"""``posfair serve``: a stop signal that lands while the application is still deploying stops it cleanly.

Ray may run the signal handler inside its own code and wrap the ``_Stop`` it raises in another error
(seen in CI: a ``RaySystemError`` while a replica's actor handle was being deserialised). That must read as
"stopped on request" (exit 0, Ray stopped), not as "the application did not start" (exit 2).
"""

from __future__ import annotations

import signal
import sys
import types

import pytest

from llamaindex_posfair.cli import serve as serve_cli
from llamaindex_posfair.serve import runner


@pytest.fixture
def fake_ray(monkeypatch):
    stopped = []
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(cluster_resources=lambda: {"CPU": 2.0}))
    monkeypatch.setattr(runner, "port_is_free", lambda host, port: True)
    monkeypatch.setattr(runner, "ensure_ray", lambda address, cpus, host=None: True)
    monkeypatch.setattr(runner, "missing_resources", lambda config, resources: None)
    monkeypatch.setattr(runner, "stop", lambda owns_ray, app: stopped.append((owns_ray, app)))
    monkeypatch.setattr(serve_cli, "config_from_args", lambda args: types.SimpleNamespace(app_name="posfair"))
    monkeypatch.setattr(serve_cli.options, "quiet_model_logs", lambda args: None)
    return stopped


def _args():
    return types.SimpleNamespace(host="127.0.0.1", port=8765, ray_address=None, local_cpus=None)


def _deploy_interrupted_inside_ray(config, host, port):
    try:
        serve_cli._on_signal(signal.SIGTERM, None)  # the handler runs inside Ray's code ...
    except serve_cli._Stop as exc:
        raise runner.ServeStartError(f"RaySystemError: System error: {exc}") from exc  # ... which wraps it


def test_a_stop_signal_wrapped_by_ray_during_start_stops_cleanly(fake_ray, monkeypatch, capsys):
    monkeypatch.setattr(runner, "deploy", _deploy_interrupted_inside_ray)
    assert serve_cli.run_serve(_args()) == 0
    assert fake_ray == [(True, "posfair")]
    assert "SIGTERM: shutting down" in capsys.readouterr().err


def test_a_replica_that_fails_to_start_is_still_an_error(fake_ray, monkeypatch):
    def fail(config, host, port):
        raise runner.ServeStartError("replica rerank failed: out of memory")

    monkeypatch.setattr(runner, "deploy", fail)
    with pytest.raises(serve_cli.CliError, match="the application did not start: replica rerank failed"):
        serve_cli.run_serve(_args())
    assert fake_ray == [(True, "posfair")]


def test_a_port_answered_by_another_server_after_the_start_is_an_error(fake_ray, monkeypatch):
    def other_server_answers(config, host, port):  # what deploy's port check raises
        raise runner.ServeStartError(f"port {port} on {host} is answered by another server; pick another --port")

    monkeypatch.setattr(runner, "deploy", other_server_answers)
    with pytest.raises(serve_cli.CliError, match="did not start: port 8765 on 127.0.0.1 is answered by another server"):
        serve_cli.run_serve(_args())
    assert fake_ray == [(True, "posfair")]
