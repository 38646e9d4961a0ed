"""``posfair serve`` flags: invalid settings fail with one line before Ray starts (the running server: tests/serve)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamaindex_posfair.cli import main
from llamaindex_posfair.serve.runner import free_port

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["where is the evidence?", "The evidence sat at the very end of a long report about rivers.", "bananas"]


# ---------------------------------------------------------------------- errors before anything starts
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--min-replicas", "2"], "min_replicas and max_replicas go together"),
        (["--min-replicas", "3", "--max-replicas", "2"], "must not exceed"),
        (["--max-batch-size", "0"], "--max-batch-size: Input should be greater than 0"),
        (
            ["--mm-calibration", "/no/cal.safetensors", "--mm-model", "tiny"],
            "--mm-calibration '/no/cal.safetensors' does not exist",
        ),
        (["--num-gpus", "64"], "the replicas (embed + rerank + image) need 128 GPUs"),
        (["--local-cpus", "2", "--num-cpus", "2"], "need 4 CPUs (have 2)"),
    ],
)
def test_bad_flags_fail_before_ray_starts(capsys, argv, needle):
    rc = main(["serve", "--port", str(free_port()), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("posfair serve: error:") and needle in err, err


def test_a_port_in_use_is_named(capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc = main(["serve", "--port", str(port)])
    assert rc == 2 and f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


def test_api_flags_reach_the_config():
    from llamaindex_posfair.cli import build_parser
    from llamaindex_posfair.cli.serve import config_from_args

    default = config_from_args(build_parser().parse_args(["serve"])).api
    assert (default.accept_any_model, default.docs) == (False, True)
    args = build_parser().parse_args(["serve", "--accept-any-model", "--no-docs"])
    api = config_from_args(args).api
    assert (api.accept_any_model, api.docs) == (True, False)
