"""Every ``posfair CMD --flag`` that a message or a doc tells users to run exists."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from llamaindex_posfair.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
_IN_BACKTICKS = re.compile(r"`posfair ([a-z]+(?:-[a-z]+)*)(?![\w.-])([^`]*)")
_HYPHENATED = re.compile(r"posfair ((?:[a-z]+-)+[a-z]+)(?![\w.-])(.*)")


def _told_to_run(text: str, markdown: bool) -> list[tuple[str, str]]:
    """``(command, rest of the line)`` for every ``posfair CMD ...`` a text tells users to run.

    That is: in backticks, hyphenated anywhere (``posfair mm-eval``), or as a
    command line (an indented docstring line, a fenced Markdown line, ``$ posfair``).
    """
    found = {m.start(): (m.group(1), m.group(2)) for m in _IN_BACKTICKS.finditer(text)}
    found.update({m.start(): (m.group(1), m.group(2)) for m in _HYPHENATED.finditer(text)})
    offset, fenced = 0, False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        fenced = fenced != stripped.startswith("```")
        command_line = (fenced if markdown else line[:1] in " \t") or stripped.startswith("$ posfair ")
        if command_line and stripped.removeprefix("$ ").startswith("posfair "):
            name, _, rest = stripped.removeprefix("$ ").removeprefix("posfair ").partition(" ")
            found[offset + line.index("posfair ")] = (name, rest)
        offset += len(line)
    return [found[k] for k in sorted(found)]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _texts():
    """(where, text) of every string constant in the packages and every Markdown file but the changelog.

    CHANGELOG.md names commands and flags that were removed, on purpose.
    """
    for package in ("llamaindex_posfair", "qdrant_tools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "posfair " in node.value:
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node.value
    for path in sorted(ROOT.glob("*.md")) + sorted((ROOT / "docs").rglob("*.md")):
        if path.name == "CHANGELOG.md":
            continue
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8").replace("\\\n", " ")


def _problems(where: str, text: str, commands: dict[str, argparse.ArgumentParser]) -> list[str]:
    problems = []
    for name, tail in _told_to_run(text, markdown=where.endswith(".md")):
        rest = re.split(r"`|&&|\||;|#", tail)[0].split()
        if name not in commands:
            problems.append(f"{where}: `posfair {name}` is not a command")
            continue
        parser = commands[name]
        parser = _subcommands(parser).get(rest[0], parser) if rest else parser
        flags = {o for a in parser._actions for o in a.option_strings}
        for word in rest:
            flag = re.match(r"--[a-z][a-z0-9-]*", word)
            if flag and flag.group(0) not in flags:
                problems.append(f"{where}: `posfair {name}` has no flag {flag.group(0)}")
    return problems


def test_the_scan_catches_a_command_that_does_not_exist():
    commands = _subcommands(build_parser())
    assert _problems("x", "fit one with posfair mm-calibrate", commands) == [
        "x: `posfair mm-calibrate` is not a command"
    ]
    assert _problems("x", "run `posfair ingest PATH --colection demo`", commands) == [
        "x: `posfair ingest` has no flag --colection"
    ]


@pytest.mark.parametrize("where,text", [pytest.param(w, t, id=w) for w, t in _texts()])
def test_messages_and_docs_name_real_commands_and_flags(where, text):
    assert _problems(where, text, _subcommands(build_parser())) == []
