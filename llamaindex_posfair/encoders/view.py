"""``CalibrationView``: one loaded encoder seen through another calibration setting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.settings import SpecSettings


class CalibrationView(SpecSettings):
    """An encoder seen through a fixed calibration setting (e.g. ``None`` = plain).

    Shares the loaded model, so a collection can hold a vanilla and a calibrated
    vector per chunk without loading the model twice
    (:meth:`~llamaindex_posfair.encoders.spec.EncoderSet.load` builds views). Every
    encoding method applies the view's calibration; its :attr:`spec` and
    :meth:`fingerprint` describe the view, not the wrapped encoder. Only the
    attributes listed here are exposed, so nothing reaches the wrapped encoder's
    own calibration by accident.

    Example:
        >>> from llamaindex_posfair import BUNDLED_MINILM, CalibrationConfig, PosFairEncoder
        >>> enc = PosFairEncoder(BUNDLED_MINILM, calibration=CalibrationConfig())  # doctest: +SKIP
        >>> plain = CalibrationView(enc, None)                                     # doctest: +SKIP
        >>> vectors = {"vanilla": plain, "calibrated": enc}                        # doctest: +SKIP
    """

    def __init__(self, encoder: Any, calibration: CalibrationConfig | None) -> None:
        self._encoder = getattr(encoder, "base_encoder", encoder)
        self.spec = self._encoder.spec.with_calibration(calibration)

    @property
    def base_encoder(self) -> Any:
        """The wrapped encoder (holding the model)."""
        return self._encoder

    @property
    def dimension(self) -> int:
        return self._encoder.dimension

    @property
    def max_length(self) -> int:
        return self._encoder.max_length

    @property
    def num_layers(self) -> int:
        return self._encoder.num_layers

    @property
    def tokenizer(self) -> Any:
        return self._encoder.tokenizer

    @property
    def dump_tokens(self) -> int:
        return self._encoder.dump_tokens

    @property
    def device(self) -> Any:
        return self._encoder.device

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._encoder.count_tokens(texts)

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        kwargs.setdefault("calibration", self.calibration)
        return self._encoder.encode(texts, **kwargs)

    def encode_documents(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        kwargs.setdefault("calibration", self.calibration)
        return self._encoder.encode_documents(texts, **kwargs)

    def encode_queries(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        kwargs.setdefault("calibration", self.calibration)
        return self._encoder.encode_queries(texts, **kwargs)

    def encode_query(self, inputs: str | Sequence[str], **kwargs: Any) -> np.ndarray:
        kwargs.setdefault("calibration", self.calibration)
        return self._encoder.encode_query(inputs, **kwargs)

    def encode_document(self, inputs: str | Sequence[str], **kwargs: Any) -> np.ndarray:
        kwargs.setdefault("calibration", self.calibration)
        return self._encoder.encode_document(inputs, **kwargs)

    def fingerprint(self, **kwargs: Any) -> str:
        if "calibration" in kwargs:
            return self._encoder.fingerprint(calibration=kwargs["calibration"])
        return self.spec.fingerprint()

    def __repr__(self) -> str:
        return f"CalibrationView({self._encoder!r}, calibration={self.calibration!r})"
