"""One error style for every sub-command: ``posfair CMD: error: MESSAGE``, exit status 2, no traceback.

argparse already reports bad arguments this way (``parser.error``); this
module does the same for errors found while a handler runs. ``-v`` logs the
traceback at DEBUG level.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Callable

__all__ = ["CliError", "int_at_least", "report_error", "user_errors"]

logger = logging.getLogger(__name__)

Handler = Callable[[argparse.Namespace], int]


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def report_error(command: str, message: object) -> int:
    """Print ``posfair COMMAND: error: MESSAGE`` to stderr and return the exit status 2."""
    print(f"posfair {command}: error: {message}", file=sys.stderr)
    return 2


def user_errors(command: str, *kinds: type[Exception]) -> Callable[[Handler], Handler]:
    """Decorate a handler so :class:`CliError` and ``kinds`` become :func:`report_error`.

    Args:
        command: the sub-command as typed (``"mm-eval"``).
        kinds: further exception types whose message is meant for the user
            (e.g. ``OSError`` for a missing file, ``ValueError`` for a setting
            the library rejects with a message that names it).

    Example:
        >>> @user_errors("demo", ValueError)
        ... def handler(args):
        ...     raise ValueError("--n must be >= 2, got 1")
        >>> handler(argparse.Namespace())  # prints "posfair demo: error: --n must be >= 2, got 1"
        2
    """

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def run(args: argparse.Namespace) -> int:
            try:
                return handler(args)
            except (CliError, *kinds) as exc:
                logger.debug("posfair %s failed", command, exc_info=True)
                return report_error(command, exc)

        return run

    return decorate


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers ``>= minimum`` (argparse names the flag in its error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse
