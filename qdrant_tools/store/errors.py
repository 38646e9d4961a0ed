"""Errors of :mod:`qdrant_tools.store`: each names what happened and the fix.

Example:
    >>> from qdrant_tools.store.errors import StoreError, StoreLockedError
    >>> issubclass(StoreLockedError, StoreError)
    True
"""

from __future__ import annotations


class StoreError(RuntimeError):
    """Storage cannot be opened as asked (the message says why and what to do)."""


class StoreLockedError(StoreError):
    """Another process (or another open store in this one) holds the storage folder."""


class StoreNotFoundError(StoreError):
    """``must_exist=True`` and there is no storage at the path."""


class LegacyStorageError(StoreError):
    """The folder was written by qdrant-client's local mode, the embedded store before Qdrant Edge."""


class NotAStoreError(StoreError):
    """The folder holds other files: it is neither an embedded store nor empty."""


class ServerUnreachableError(StoreError):
    """The Qdrant server did not answer."""


class UnsupportedCallError(NotImplementedError):
    """A qdrant-client method or argument the embedded Qdrant Edge store does not implement."""
