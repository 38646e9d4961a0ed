"""One process per storage folder: an open by a second process fails with the holder's pid and never touches the data."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from qdrant_tools.store import StoreLockedError, open_store
from tests.qdrant_tools.store.conftest import fill

_HOLD = textwrap.dedent(
    """
    import sys, time
    from qdrant_tools.store import open_store
    store = open_store(sys.argv[1])
    print("open", flush=True)
    time.sleep(60)
    """
)


def test_a_second_open_in_the_same_process_shares_the_first(tmp_path):
    with open_store(tmp_path / "s") as first, open_store(tmp_path / "s") as second:
        fill(first)
        assert second.count("c").count == 60


def test_another_process_holding_the_folder_is_named_and_the_data_is_intact(tmp_path):
    with open_store(tmp_path / "s") as store:
        fill(store)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path / "s")], stdout=subprocess.PIPE, env=env)
    try:
        assert holder.stdout.readline().strip() == b"open"
        with pytest.raises(StoreLockedError, match=f"in use by process {holder.pid}.*--qdrant-url"):
            open_store(tmp_path / "s")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with open_store(tmp_path / "s") as store:  # a killed holder leaves no stale lock
        assert store.count("c").count == 60


def test_closing_releases_the_folder(tmp_path):
    open_store(tmp_path / "s").close()
    with open_store(tmp_path / "s") as store:
        assert store.get_collections().collections == []


def test_the_lock_file_holds_only_the_current_holders_pid(tmp_path):
    from qdrant_tools.store.lock import LOCK_NAME, FolderLock

    (tmp_path / LOCK_NAME).write_text("999999999 from a crashed run")
    lock = FolderLock.acquire(tmp_path)
    try:
        assert (tmp_path / LOCK_NAME).read_text() == str(os.getpid())
    finally:
        lock.release()
    lock.release()  # idempotent
    FolderLock.acquire(tmp_path).release()


def test_a_file_system_without_locks_is_a_clear_error(tmp_path, monkeypatch):
    import portalocker

    from qdrant_tools.store import StoreError
    from qdrant_tools.store.lock import FolderLock

    def refuse(self, *args, **kwargs):
        raise portalocker.LockException("locks not supported")

    monkeypatch.setattr(portalocker.Lock, "acquire", refuse)
    with pytest.raises(
        StoreError, match=f"cannot lock embedded Qdrant storage '{tmp_path}'.*locks not supported"
    ) as info:
        FolderLock.acquire(tmp_path)
    assert not isinstance(info.value, StoreLockedError)
