"""What the research commands share with ``posfair``: plain help, its logging, one error line and exit status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from llamaindex_posfair.cli import PlainHelpParser
from llamaindex_posfair.cli._logs import _logging
from llamaindex_posfair.cli.options import CliError


def parser(prog: str, description: str | None, **kwargs) -> argparse.ArgumentParser:
    """A ``posfair``-style parser named ``prog``, with ``-v/--verbose``."""
    p = PlainHelpParser(prog=prog, description=description, **kwargs)
    p.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level, third-party logs included")
    return p


def run(p: argparse.ArgumentParser, handler: Callable[[argparse.Namespace], int], argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run ``handler``; a user error prints one line ``PROG: error: ...`` and returns 2."""
    args = p.parse_args(argv)
    with _logging(args.verbose):
        try:
            return int(handler(args) or 0)
        except CliError as exc:
            print(f"{p.prog}: error: {exc}", file=sys.stderr)
            return 2
