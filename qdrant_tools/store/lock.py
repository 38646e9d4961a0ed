"""One process per storage folder: an advisory lock file that names its holder.

The lock is an ``flock`` on ``<folder>/.store.lock``; the file holds the
holder's pid, so a second open fails with "in use by process N". The
operating system drops the lock when the holder exits, even on ``kill -9``,
so a crash never leaves a stale lock behind. Platforms without ``fcntl``
(Windows) skip the lock file and rely on Qdrant Edge's own WAL lock.

Example:
    >>> import tempfile
    >>> from qdrant_tools.store.lock import FolderLock
    >>> lock = FolderLock.acquire(tempfile.mkdtemp())
    >>> lock.release()
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from qdrant_tools.store.errors import StoreLockedError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".store.lock"


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        pid = ""
    return f"process {pid}" if pid else "another process"


@dataclass
class FolderLock:
    """An exclusive lock on a storage folder, held until :meth:`release` (or process exit)."""

    path: Path
    fd: int | None

    @classmethod
    def acquire(cls, folder: str | Path) -> FolderLock:
        """Lock ``folder`` (which must exist) for this process.

        Raises:
            StoreLockedError: another process, or another store object of this process, holds it.
        """
        path = Path(folder) / LOCK_NAME
        if fcntl is None:  # pragma: no cover - Windows
            return cls(path, None)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreLockedError(
                f"embedded Qdrant storage {str(folder)!r} is in use by {_holder(path)} (one process at a time); "
                "close that store or wait for the process to finish, pass another path (--path), "
                "or run a Qdrant server (--qdrant-url) for concurrent access"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return cls(path, fd)

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        os.close(fd)  # closing the descriptor releases the flock
