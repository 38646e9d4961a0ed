"""The one-slot registry that turns an :class:`~llamaindex_posfair.encoders.spec.EncoderSpec` into a loaded encoder.

Why a registry: the spec module describes an encoder and the encoder module
loads one; the encoder module needs the spec class (``PosFairEncoder(model,
calibration=...)`` builds a spec), so the spec module cannot import the encoder
module back without an import cycle. :meth:`EncoderSpec.load` therefore calls
:func:`load_encoder`, and the package ``llamaindex_posfair.encoders`` registers
the loader (``PosFairEncoder.from_spec``) when it is imported — which Python
always does before any of its modules, so a spec can always be loaded.

Example:
    >>> from llamaindex_posfair.encoders.spec import EncoderSpec
    >>> registered_loader() is not None   # set by the package on import
    True
    >>> encoder = load_encoder(EncoderSpec())  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["load_encoder", "register_loader", "registered_loader"]

Loader = Callable[[Any], Any]

_loader: Loader | None = None


def register_loader(loader: Loader) -> None:
    """Make ``loader(spec) -> encoder`` the function :meth:`EncoderSpec.load` calls (replaces the previous one)."""
    global _loader
    if not callable(loader):
        raise TypeError(f"loader must be a callable spec -> encoder, got {type(loader).__name__}")
    _loader = loader


def registered_loader() -> Loader | None:
    """The registered loader, or ``None``."""
    return _loader


def load_encoder(spec: Any) -> Any:
    """Load the encoder ``spec`` describes with the registered loader.

    Raises:
        RuntimeError: no loader is registered (only if ``llamaindex_posfair.encoders`` was bypassed).
    """
    if _loader is None:
        raise RuntimeError(
            "no encoder loader is registered; import llamaindex_posfair.encoders (it registers "
            "PosFairEncoder.from_spec), or call llamaindex_posfair.encoders.loader.register_loader(...)"
        )
    return _loader(spec)
