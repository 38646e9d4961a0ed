"""One process per storage folder: an advisory lock file that names its holder.

The lock is a ``portalocker`` lock on ``<folder>/.store.lock`` (``flock`` on
POSIX, ``LockFileEx`` / ``msvcrt.locking`` on Windows); the file holds the
holder's pid, so an open by a second process fails with "in use by process N"
(a second open in the same process shares the first one's engine,
:mod:`qdrant_tools.store.shared`, and never reaches the lock). The
operating system drops the lock when the holder exits, even on ``kill -9``,
so a crash never leaves a stale lock behind. Windows locks are mandatory, so
there the holder's pid cannot be read and the message says "another process".

Example:
    >>> import tempfile
    >>> from qdrant_tools.store.lock import FolderLock
    >>> lock = FolderLock.acquire(tempfile.mkdtemp())
    >>> lock.release()
"""

from __future__ import annotations

import os
from pathlib import Path

import portalocker

from qdrant_tools.store.errors import StoreError, StoreLockedError

LOCK_NAME = ".store.lock"


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:  # Windows: the holder's lock keeps the file unreadable
        pid = ""
    if pid == str(os.getpid()):  # open_store shares a folder within a process, so only a bare lock gets here
        return f"process {pid} (this process, which locked it outside open_store: close that lock first)"
    return f"process {pid}" if pid.isdigit() else "another process"


class FolderLock:
    """An exclusive lock on a storage folder, held until :meth:`release` (or process exit).

    Args:
        path: the lock file.
        lock: the held ``portalocker.Lock`` (``None`` once released).

    Use :meth:`acquire`, not the constructor.
    """

    def __init__(self, path: Path, lock: portalocker.Lock | None) -> None:
        self.path = path
        self._lock = lock

    @classmethod
    def acquire(cls, folder: str | Path) -> FolderLock:
        """Lock ``folder`` (which must exist) for this process, without waiting.

        Raises:
            StoreLockedError: another process holds it (or this process, through a lock taken outside
                :func:`qdrant_tools.store.open_store`).
            StoreError: the file system cannot lock files (e.g. some network mounts).
        """
        path = Path(folder) / LOCK_NAME
        flags = portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING
        # mode "w": portalocker truncates only once the lock is held, so a holder's pid is never wiped
        lock = portalocker.Lock(path, mode="w", timeout=0, fail_when_locked=True, flags=flags)
        try:
            handle = lock.acquire()
        except portalocker.AlreadyLocked:
            raise StoreLockedError(
                f"embedded Qdrant storage {str(folder)!r} is in use by {_holder(path)} (one process at a time); "
                "close that store or wait for the process to finish, pass another path (--path), "
                "or run a Qdrant server (--qdrant-url) for concurrent access"
            ) from None
        except portalocker.LockException as exc:
            raise StoreError(
                f"cannot lock embedded Qdrant storage {str(folder)!r} ({exc}); put it on a local disk (--path) "
                "or run a Qdrant server (--qdrant-url)"
            ) from None
        handle.write(str(os.getpid()))
        handle.flush()
        return cls(path, lock)

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()  # unlocks and closes the file; the file itself stays
