"""The CLI's logging policy (a leaf module: ``cli/__init__`` and ``cli/options`` both use it)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

__all__ = ["OWN_LOGGERS", "SELF_CONFIGURED_LOGGERS", "quiet_third_party"]

#: This project's loggers: their INFO lines are what a command reports while it works.
OWN_LOGGERS = ("llamaindex_posfair", "qdrant_tools")
#: Libraries that set their own level (and handler) when imported, so the root level does not reach
#: them, with the environment variable that sets that level at import time (in this process and in
#: the Ray workers it starts). Every other library inherits the root level.
SELF_CONFIGURED_LOGGERS: dict[str, str | None] = {
    "ray": "RAY_LOGGER_LEVEL",
    "ray.serve": None,  # reset to INFO when ray.serve is imported: runner.deploy restores it
    "ray.data": None,
    "transformers": "TRANSFORMERS_VERBOSITY",
    "huggingface_hub": "HF_HUB_VERBOSITY",
    "datasets": "DATASETS_VERBOSITY",
    "torch": None,
}


def quiet_third_party(verbose: bool, *, root: bool = True) -> None:
    """Apply the CLI's logging policy to every library: only errors unless ``verbose``.

    Without ``verbose`` the root logger (which most libraries inherit) and the
    :data:`SELF_CONFIGURED_LOGGERS` log at ERROR (and Python warnings, captured by
    :func:`main` as the ``py.warnings`` logger, are hidden); this project's loggers stay at
    INFO. With ``verbose`` the root and this project log at DEBUG, and libraries at their own
    levels. ``root=False`` only sets the levels of the self-configured loggers again (no root
    level, no environment): what a command does after importing a library that resets its
    level on import (``options.quiet_model_logs``).
    """
    if verbose:
        if root:
            logging.getLogger().setLevel(logging.DEBUG)
            for name in OWN_LOGGERS:
                logging.getLogger(name).setLevel(logging.DEBUG)
        return
    if root:
        logging.getLogger().setLevel(logging.ERROR)
        for name in OWN_LOGGERS:
            logging.getLogger(name).setLevel(logging.INFO)
    for name, variable in SELF_CONFIGURED_LOGGERS.items():
        logging.getLogger(name).setLevel(logging.ERROR)
        if variable and root:
            os.environ.setdefault(variable, "error")


@contextlib.contextmanager
def _logging(verbose: bool) -> Iterator[None]:
    """The CLI's logging for one :func:`main` call; levels, environment and warning capture restored after."""
    names = ["", *OWN_LOGGERS, *SELF_CONFIGURED_LOGGERS]
    levels = {name: logging.getLogger(name).level for name in names}
    environ = {v: os.environ.get(v) for v in SELF_CONFIGURED_LOGGERS.values() if v}
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    quiet_third_party(verbose)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        for variable, value in environ.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value
