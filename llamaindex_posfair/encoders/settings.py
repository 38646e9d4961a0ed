"""``SpecSettings``: read-only properties of an object that holds an encoder spec.

The lowest module of :mod:`llamaindex_posfair.encoders` (no import of its
siblings), so both the loaded encoder (:mod:`.encoder`) and its calibration
views (:mod:`.view`) share these properties without importing each other or
the spec module's loading code.

Example:
    >>> from llamaindex_posfair.encoders.spec import EncoderSpec
    >>> class Holder(SpecSettings):
    ...     def __init__(self, spec):
    ...         self.spec = spec
    >>> Holder(EncoderSpec(calibration=None, batch_size=8)).batch_size
    8
"""

from __future__ import annotations

from typing import Any

__all__ = ["SpecSettings"]


class SpecSettings:
    """Read-only views of an object's ``spec`` (an :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`)."""

    spec: Any  # an EncoderSpec; not imported here, so this module stays below the spec module

    @property
    def model_id(self) -> str:
        """The model's stable id (the bundled alias, a hub name, a folder, or ``"in-memory"``)."""
        return self.spec.model

    @property
    def calibration(self) -> Any:
        """The calibration applied unless a call overrides it (a ``CalibrationConfig`` or ``None``)."""
        return self.spec.calibration

    @property
    def backend_name(self) -> str:
        return self.spec.backend

    @property
    def query_prompt(self) -> str | None:
        return self.spec.query_prompt

    @property
    def document_prompt(self) -> str | None:
        return self.spec.document_prompt

    @property
    def normalize(self) -> bool:
        return self.spec.normalize

    @property
    def batch_size(self) -> int:
        return self.spec.batch_size
