"""Weights identity: a content hash of the files a model loads from.

The identity hashes the *contents* of the files that shape the embeddings (weights, configs, tokenizer,
sentence-transformers modules; :func:`weight_files`), so a model retrained into the same folder gets a new one and
the same weights on two machines get the same one. Per-file hashes are cached by ``(path, size, mtime, inode)`` in
:func:`cache_root` (docs/encoders.md, "Fields").

Example:
    >>> from llamaindex_posfair.encoders.models import bundled_model_path
    >>> from llamaindex_posfair.encoders.weights import folder_identity
    >>> len(folder_identity(bundled_model_path()))
    24
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Sub-folders that never shape the embeddings of a sentence-transformers / transformers load.
SKIP_DIRS = frozenset({"onnx", "openvino", ".git", ".cache", "runs", "__pycache__"})
#: File suffixes of other frameworks' weights and of documentation.
SKIP_SUFFIXES = frozenset({".md", ".onnx", ".h5", ".msgpack", ".ot", ".tflite", ".png", ".jpg", ".lock"})
_CHUNK = 1 << 20
_LOCK = threading.Lock()
_MEMO: dict[str, str] = {}


def cache_root() -> Path:
    """The package's cache folder: ``$POSFAIR_CACHE_DIR``, default ``~/.cache/llamaindex-posfair``."""
    root = os.environ.get("POSFAIR_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "llamaindex-posfair")
    return Path(root)


def cache_file() -> Path:
    """Where per-file hashes are cached (``$POSFAIR_CACHE_DIR/file-hashes-v1.json``)."""
    return cache_root() / "file-hashes-v1.json"


def _load_cache() -> dict[str, str]:
    try:
        return json.loads(cache_file().read_text())
    except (OSError, ValueError):
        return {}


def _save_cache(cache: dict[str, str]) -> None:
    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".hashes-")
        with os.fdopen(fd, "w") as fh:
            json.dump(cache, fh)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home only costs re-hashing
        logger.debug("cannot write the weights-hash cache %s: %s", path, exc)


def _file_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's contents, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def weight_files(folder: str | Path) -> list[Path]:
    """The files of ``folder`` whose contents shape the embeddings, sorted."""
    root = Path(folder)
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or any(p in SKIP_DIRS or p.startswith("checkpoint-") for p in rel.parts[:-1]):
            continue
        if path.name.startswith(".") or path.suffix.lower() in SKIP_SUFFIXES or path.name.upper().startswith("README"):
            continue
        out.append(path)
    return out


def folder_identity(folder: str | Path) -> str:
    """Content hash (24 hex digits) of the files of a model folder; stable across machines.

    Raises:
        FileNotFoundError: ``folder`` is not a folder, or holds no model files.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"model folder {str(root)!r} does not exist")
    files = weight_files(root)
    if not files:
        raise FileNotFoundError(f"model folder {str(root)!r} holds no model files")
    with _LOCK:
        keys = [_file_key(f) for f in files]
        missing = [(f, k) for f, k in zip(files, keys) if k not in _MEMO]
        if missing:
            _MEMO.update(_load_cache())
            missing = [(f, k) for f, k in missing if k not in _MEMO]
            for f, k in missing:
                _MEMO[k] = file_sha256(f)
            if missing:
                _save_cache(dict(_MEMO))
        entries = [f"{f.relative_to(root).as_posix()}:{_MEMO[k]}" for f, k in zip(files, keys)]
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:24]


def module_identity(module: Any) -> str:
    """Content hash of an in-memory ``torch.nn.Module``'s parameters and buffers (24 hex digits)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode() + str(tensor.dtype).encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(dtype=_byte_dtype()).numpy().tobytes())
    return digest.hexdigest()[:24]


def _byte_dtype() -> Any:
    import torch

    return torch.uint8


def hub_snapshot_folder(name: str, revision: str | None = None) -> str | None:
    """The local snapshot folder of a hub model if it is already cached, else ``None`` (never downloads)."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, revision=revision, local_files_only=True)
    except Exception:
        return None
