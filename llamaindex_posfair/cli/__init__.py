"""The ``posfair`` command line.

Every module in this package that defines ``register(subparsers)`` adds its
own sub-command(s); this file only discovers and dispatches them, so
sub-commands live in small modules named for what they do.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    """Build the ``posfair`` parser with every discovered sub-command."""
    parser = argparse.ArgumentParser(
        prog="posfair",
        description="Position-fair retrieval for LlamaIndex and Qdrant.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(subparsers)
    return parser


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return None


def command_name(args: argparse.Namespace) -> str:
    """``"ingest"``, or ``"collection create"`` for nested sub-commands (as errors print it)."""
    name = getattr(args, "command", None) or ""
    action = getattr(args, f"{name.replace('-', '_')}_command", None)
    return f"{name} {action}" if action else name


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``posfair`` console script.

    A :class:`~llamaindex_posfair.cli.options.CliError` raised by any sub-command is
    printed as ``posfair CMD: error: MESSAGE`` (no traceback) and exits with status 2.
    """
    from llamaindex_posfair.cli.options import CliError

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the sub-command's parser: "posfair CMD: error: unrecognized arguments: ..."
        sub = _subparser(parser, getattr(args, "command", None))
        (sub or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except CliError as exc:
        print(f"posfair {command_name(args)}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover - interactive
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
