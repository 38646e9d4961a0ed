"""``posfair audit``: files written, the JSON output, the CI gate, errors as one line."""

from __future__ import annotations

import json
import sys
import types

import pytest

from llamaindex_posfair.cli import main

from .conftest import splitter_target


@pytest.fixture
def folder(tmp_path, documents):
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in list(documents.items())[:30]:
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def factories(monkeypatch):
    module = types.ModuleType("audit_cli_targets")
    module.truncated = lambda: splitter_target("truncated", max_words=60)
    module.whole = lambda: splitter_target("whole")
    monkeypatch.setitem(sys.modules, "audit_cli_targets", module)
    return ["--target", "python:audit_cli_targets:truncated", "--target", "python:audit_cli_targets:whole"]


def test_the_audit_writes_its_report_and_gates_on_psi(folder, factories, tmp_path, capsys):
    out = tmp_path / "report"
    argv = ["audit", str(folder), *factories, "--per-group", "5", "--kinds", "extractive", "--out-dir", str(out)]
    assert main([*argv, "--json", "--top-k", "10", "--fail-if-psi-above", "0.5", "--no-progress"]) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert "PSI" in captured.err and "'truncated' is above --fail-if-psi-above 0.5" in captured.err
    assert data["command"].startswith(f"posfair audit {folder} --target python:audit_cli_targets:truncated")
    assert data["probes"]["kinds"] == {"extractive": {"begin": 5, "middle": 5, "end": 5}}
    assert sorted(p.name for p in out.iterdir()) == [
        "audit.png",
        "probes.json",
        "report.html",
        "report.json",
        "report.md",
    ]
    assert data["command"] in (out / "report.html").read_text(encoding="utf-8")


def test_a_rerun_on_saved_probes_gives_the_same_figures(folder, factories, tmp_path, capsys):
    first, second = tmp_path / "a", tmp_path / "b"
    base = ["audit", str(folder), *factories, "--per-group", "4", "--json", "--no-progress"]
    assert main([*base, "--out-dir", str(first), "--kinds", "extractive,planted"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main([*base, "--out-dir", str(second), "--probes", str(first / "probes.json")]) == 0
    b = json.loads(capsys.readouterr().out)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(a["targets"]) == strip(b["targets"])


def test_max_probes_asks_a_balanced_subset(folder, factories, tmp_path, capsys):
    argv = ["audit", str(folder), *factories, "--kinds", "extractive", "--max-probes", "6", "--json", "--no-progress"]
    assert main([*argv, "--out-dir", str(tmp_path / "r")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["probes"]["kinds"] == {"extractive": {"begin": 2, "middle": 2, "end": 2}}


def test_an_empty_folder_is_one_line_and_status_2(tmp_path, factories, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["audit", str(tmp_path / "empty"), *factories, "--out-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("posfair audit: error: no readable document with text under") and "\n" not in err


def test_an_unknown_target_names_the_forms(folder, tmp_path, capsys):
    assert main(["audit", str(folder), "--target", "chroma:x", "--out-dir", str(tmp_path / "r")]) == 2
    assert "--target 'chroma:x' is not a target; use one of: llamaindex-default, posfair" in capsys.readouterr().err
