"""The tiny (query, positive, hard negative) set shipped with the package."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SPLITS = ("train", "test")


def bundled_split(name: str) -> Path:
    """Path of a shipped jsonl split: ``"train"`` (115 triples) or ``"test"`` (45, held apart).

    Example:
        >>> bundled_split("test").name
        'test.jsonl'
    """
    if name not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
    path = Path(str(resources.files("llamaindex_posfair"))) / "data" / "dump" / f"{name}.jsonl"
    if not path.is_file():  # pragma: no cover - broken install
        raise FileNotFoundError(f"bundled split {name!r} missing at {path}; reinstall llamaindex-posfair")
    return path
