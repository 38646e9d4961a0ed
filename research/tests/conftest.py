"""Fixtures of the research tests: the shared ones of ``tests/conftest.py`` (offline settings, models, fake encoder).

pytest gives a test only the conftests above it, so this one loads the shared
file once and hands its fixtures on instead of copying them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SHARED = Path(__file__).resolve().parents[2] / "tests" / "conftest.py"
_spec = importlib.util.spec_from_file_location("posfair_shared_conftest", _SHARED)
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)

globals().update({name: value for name, value in vars(_shared).items() if not name.startswith("_")})
