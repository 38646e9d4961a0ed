"""Lazy package exports: names load their module on first access.

Keeps ``import llamaindex_posfair`` (and the CLI's start-up) free of torch,
transformers and LlamaIndex until a name that needs them is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` that imports ``exports[name]`` on demand.

    Args:
        package: the package's ``__name__`` (for relative targets and messages).
        exports: public name -> module path, absolute or relative (``".calibrator"``).
    """

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(target, package), name)

    return __getattr__
