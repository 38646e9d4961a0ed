"""Re-export of :class:`llamaindex_posfair.encoders.view.CalibrationView` (its home is ``encoders``)."""

from llamaindex_posfair.encoders.view import CalibrationView

__all__ = ["CalibrationView"]
