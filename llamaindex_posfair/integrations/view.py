"""``CalibrationView``: one loaded encoder seen through a fixed calibration setting."""

from __future__ import annotations

from typing import Any


class CalibrationView:
    """An encoder seen through a fixed calibration setting (e.g. ``None`` = plain).

    Shares the loaded model, so a collection can hold a vanilla and a calibrated
    vector per chunk without loading the model twice. Satisfies
    ``qdrant_tools.ingest.Encoder`` and can be passed as ``encoder=`` to
    ``PosFairEmbedding`` / ``PositionFairRerank``.

    Example:
        >>> from llamaindex_posfair import BUNDLED_MINILM, PosFairEncoder
        >>> enc = PosFairEncoder(BUNDLED_MINILM)             # doctest: +SKIP
        >>> plain = CalibrationView(enc, None)               # doctest: +SKIP
        >>> vectors = {"vanilla": plain, "calibrated": enc}  # doctest: +SKIP
    """

    def __init__(self, encoder: Any, calibration: Any) -> None:
        self._encoder = encoder
        self._calibration = calibration

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    @property
    def calibration(self) -> Any:
        return self._calibration

    @property
    def dimension(self) -> int:
        return self._encoder.dimension

    @property
    def max_length(self) -> int:
        return self._encoder.max_length

    def encode_documents(self, texts, **kwargs):
        return self._encoder.encode_documents(texts, calibration=self._calibration, **kwargs)

    def encode_queries(self, texts, **kwargs):
        return self._encoder.encode_queries(texts, calibration=self._calibration, **kwargs)

    def fingerprint(self) -> str:
        return self._encoder.fingerprint(calibration=self._calibration)
