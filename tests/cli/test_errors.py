"""One error style in every sub-command: `posfair CMD: error: ...`, exit 2, no traceback."""

from __future__ import annotations

import pytest

from llamaindex_posfair.cli import build_parser, main


@pytest.mark.parametrize(
    ("argv", "prefix", "needle"),
    [
        (["ingest", "/no/such/folder"], "posfair ingest: error:", "does not exist"),
        (["ingest-ray", "/no/such/folder"], "posfair ingest-ray: error:", "does not exist"),
        (["ingest", ".", "--preset", "paper", "--strength", "0.9"], "posfair ingest: error:", "--preset replaces"),
        (["ingest", ".", "--layers", "x,y"], "posfair ingest: error:", "--layers must be"),
        (["ingest", ".", "--strength", "2"], "posfair ingest: error:", "strength must lie in [0, 1]"),
        (["ingest", ".", "--no-calibration", "--both-vectors"], "posfair ingest: error:", "--both-vectors"),
        (["query", " "], "posfair query: error:", "the query is empty"),
        (["collection", "validate", "--spec", "/no/spec.json"], "posfair collection validate: error:", "spec"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, prefix, needle):
    monkeypatch.chdir(tmp_path)
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(prefix) and needle in err
    assert "Traceback" not in err


def _flags(command: str) -> dict[str, str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return {opt: (a.help or "") for a in sub._actions for opt in a.option_strings}


@pytest.mark.parametrize("command", ["ingest", "ingest-ray", "query", "train-dump"])
def test_batch_size_flags_say_what_they_batch(command):
    flags = _flags(command)
    assert "--batch-size" not in flags  # one name used to mean three different things
    if "--encode-batch-size" in flags:
        assert "forward pass" in flags["--encode-batch-size"]
    if "--write-batch-size" in flags:
        assert "upsert" in flags["--write-batch-size"]


@pytest.mark.parametrize("command", ["ingest", "ingest-ray", "query", "mm-eval"])
def test_json_is_a_flag_everywhere(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    json_action = next((a for a in sub._actions if "--json" in a.option_strings), None)
    if json_action is not None:
        assert json_action.nargs == 0  # a store_true flag, never a file path


def test_unknown_flags_are_reported_by_the_sub_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["ingest", ".", "--batch-size", "8"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "posfair ingest: error: unrecognized arguments: --batch-size 8" in err
