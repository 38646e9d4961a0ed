"""One CLI vocabulary: a flag name means one thing in every ``posfair`` sub-command (docs/cli.md)."""

from __future__ import annotations

import argparse
from collections import defaultdict

import pytest

from llamaindex_posfair.cli import build_parser

#: Flags allowed to differ between sub-commands, each with its reason (docs/cli.md, "Not yet aligned").
EXCEPTIONS: dict[str, str] = {}

#: Spellings removed before the first release (CHANGELOG.md): no sub-command takes them.
REMOVED = {
    ("collection example-spec", "--name"),
    ("mm-eval", "--model"),
    ("mm-eval", "--state"),
    ("mm-eval", "--plot"),
    ("snapshot download", "--dest"),
    ("train-dump", "--out"),
    ("train-dump", "--passage-tokens"),
    ("train-dump", "--precision"),
}


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every leaf sub-command by its name as errors print it (``"snapshot download"``)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_commands(sub, f"{prefix} {name}".strip()))
    if prefix and not found:
        found[prefix] = parser
    return found


COMMANDS = _commands(build_parser())


def _type_key(action: argparse.Action) -> str | None:
    kind = action.type
    return None if kind is None else f"{getattr(kind, '__module__', '')}.{getattr(kind, '__name__', repr(kind))}"


def _signature(action: argparse.Action) -> tuple:
    return (action.dest, _type_key(action), action.nargs, type(action).__name__)


def _uses() -> dict[str, dict[str, tuple]]:
    """flag -> {sub-command: signature}, over the flags ``--help`` shows."""
    uses: dict[str, dict[str, tuple]] = defaultdict(dict)
    for name, parser in COMMANDS.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                uses[flag][name] = _signature(action)
    return uses


def _disagreements(uses: dict[str, dict[str, tuple]]) -> dict[str, dict[str, tuple]]:
    return {flag: by_command for flag, by_command in uses.items() if len(set(by_command.values())) > 1}


# ---------------------------------------------------------------------- the walk
def test_the_walk_reaches_every_leaf_sub_command():
    assert {"ingest", "query", "audit", "train-dump", "mm-eval"} <= set(COMMANDS)
    assert {"snapshot download", "collection example-spec", "storage migrate"} <= set(COMMANDS)
    assert "snapshot" not in COMMANDS  # a group, not a leaf


def test_the_check_sees_a_flag_that_changes_meaning():
    """The checker itself: a flag with two dests, or two types, is reported."""
    uses = {
        "--out": {"a": ("out", None, None, "_StoreAction"), "b": ("out_dir", None, None, "_StoreAction")},
        "--top-k": {"a": ("top_k", "builtins.int", None, "_StoreAction"), "b": ("top_k", None, None, "_StoreAction")},
        "--json": {"a": ("json", None, 0, "_StoreTrueAction"), "b": ("json", None, 0, "_StoreTrueAction")},
    }
    assert set(_disagreements(uses)) == {"--out", "--top-k"}


# ---------------------------------------------------------------------- one meaning per flag
def test_a_flag_has_one_dest_type_and_kind_in_every_sub_command():
    uses = _uses()
    assert sum(len(by_command) > 1 for by_command in uses.values()) >= 30  # the walk saw the shared flags
    unexpected = {flag: v for flag, v in _disagreements(uses).items() if flag not in EXCEPTIONS}
    assert unexpected == {}


def test_every_exception_is_still_needed():
    """An exception that no longer disagrees must be dropped from the list (and from docs/cli.md)."""
    assert set(EXCEPTIONS) <= set(_disagreements(_uses()))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_sub_command_has_precision(name):
    visible = {o for a in COMMANDS[name]._actions for o in a.option_strings}
    assert "--precision" not in visible


@pytest.mark.parametrize(
    ("flag", "dest", "commands"),
    [
        ("--chunk-tokens", "chunk_tokens", {"ingest", "ingest-ray", "train-dump"}),
        ("--dtype", "dtype", {"ingest", "ingest-ray", "query", "serve", "storage migrate", "train-dump"}),
        ("--out-dir", "out_dir", {"audit", "snapshot download"}),
        ("--top-k", "top_k", {"audit", "query"}),
        ("--out", "out", {"query"}),
        ("--save-model", "save_model", {"train-dump"}),
    ],
)
def test_the_renamed_vocabulary_is_where_docs_cli_says(flag, dest, commands):
    uses = _uses()[flag]
    assert set(uses) == commands
    assert {signature[0] for signature in uses.values()} == {dest}


def test_dtype_values_are_spelled_one_way():
    allowed = {"auto", "float32", "bfloat16", "float16"}
    for name, parser in COMMANDS.items():
        for action in parser._actions:
            if "--dtype" in action.option_strings:
                assert set(action.choices) <= allowed, name


def test_output_flags_say_file_or_folder():
    """``--out`` is a file, ``--out-dir`` a folder: their help says so."""
    for flag, word in (("--out", "file"), ("--out-dir", "folder")):
        for name, parser in COMMANDS.items():
            for action in parser._actions:
                if flag in action.option_strings:
                    assert word in action.help or (flag == "--out" and "JSONL" in action.help), (flag, name)


# ---------------------------------------------------------------------- lists
@pytest.mark.parametrize(
    ("argv", "dest", "expected"),
    [
        (["mm-eval", "imgs", "--n", "4,8"], "n", (4, 8)),
        (["mm-eval", "imgs", "--methods", "vanilla,ours"], "methods", ("vanilla", "ours")),
        (["collection", "example-spec", "--vectors", "a,b"], "vectors", ("a", "b")),
    ],
)
def test_lists_are_comma_separated(capsys, argv, dest, expected):
    assert getattr(build_parser().parse_args(argv), dest) == expected
    assert capsys.readouterr().err == ""  # the new form warns about nothing


def test_no_flag_takes_several_tokens():
    """A list is one comma-separated value: no option takes space-separated values."""
    takes_several = [
        (name, action.option_strings)
        for name, parser in COMMANDS.items()
        for action in parser._actions
        if action.option_strings and action.nargs in ("+", "*")
    ]
    assert takes_several == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["mm-eval", "imgs", "--n", "4", "8"], "unrecognized arguments: 8"),
    ],
)
def test_old_list_formats_are_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


# ---------------------------------------------------------------------- removed spellings
@pytest.mark.parametrize("key", sorted(REMOVED), ids=lambda k: f"{k[0]} {k[1]}")
def test_a_removed_spelling_is_no_option(key):
    name, flag = key
    assert flag not in {o for a in COMMANDS[name]._actions for o in a.option_strings}
