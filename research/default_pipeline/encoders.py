"""The encoders of the default-pipeline sweep, built from one ``EncoderSpec``.

One model load per window (a node size longer than the model's default window
loads it with a longer ``max_length``), a calibration view per calibration
name, every view wrapped in a :class:`~research.eval.memo.MemoEncoder`
over one shared :class:`~research.eval.memo.VectorMemo`. Texts that a
calibration leaves unchanged (they fit in one basket) and that fit every window
are stored once, under the plain encoder of the longest window — after the
claim is checked on probe texts (``MemoEncoder.share_short_texts``).

Example:
    >>> from research.default_pipeline.encoders import SpecEncoders
    >>> # encoders = SpecEncoders(EncoderSpec(), VectorMemo("~/.cache/memo"), probes=texts, windows={510: 512})
    >>> # encoders(510, "paper").encode_documents(["..."])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from research.eval.memo import MemoEncoder, VectorMemo, unchanged_tokens

__all__ = ["SpecEncoders", "calibration_named"]


def calibration_named(name: str) -> Any:
    """``None`` for ``"off"``, else the calibration preset ``name`` (``calibration.presets``).

    Raises:
        KeyError: unknown preset (the message lists the known ones).
    """
    from llamaindex_posfair.calibration.presets import preset

    return None if name == "off" else preset(name)


class SpecEncoders:
    """``(node_tokens, calibration name) -> MemoEncoder`` for the default-pipeline sweep.

    Args:
        spec: the encoder as shipped (its calibration is replaced per name; its ``max_length`` is the
            window of nodes that fit it).
        memo: the shared vector memo.
        probes: texts that check every sharing claim (sub-chunk-sized sentences of the benchmark).
        windows: node size -> ``max_length`` for node sizes that need a longer window than ``spec``'s
            (e.g. ``{510: 512}`` for MiniLM, whose default window is 256).
    """

    def __init__(
        self,
        spec: Any,
        memo: VectorMemo,
        probes: Sequence[str] = (),
        windows: Mapping[int, int] | None = None,
    ) -> None:
        self.spec = spec
        self.memo = memo
        self.probes = list(probes)
        self.windows = dict(windows or {})
        self._models: dict[int | None, Any] = {}
        self._encoders: dict[tuple[int | None, str], MemoEncoder] = {}

    def max_length(self, node_tokens: int) -> int | None:
        """The ``max_length`` a node size is embedded with (``None`` = the spec's own)."""
        return self.windows.get(node_tokens, self.spec.max_length)

    def _model(self, max_length: int | None) -> Any:
        if max_length not in self._models:
            self._models[max_length] = self.spec.model_copy(update={"max_length": max_length}).load()
        return self._models[max_length]

    def _plain_reference(self) -> MemoEncoder:
        """The plain encoder of the longest window: the owner of shared short texts."""
        lengths = {self.spec.max_length, *self.windows.values()}
        longest = max(lengths, key=lambda m: self._model(m).max_length)
        return self._view(longest, "off")

    def _view(self, max_length: int | None, name: str) -> MemoEncoder:
        from llamaindex_posfair.encoders.spec import EncoderSet

        key = (max_length, name)
        if key not in self._encoders:
            model = self._model(max_length)
            spec = model.spec.with_calibration(calibration_named(name))
            view = next(iter(EncoderSet.single(spec).bind(model).values()))
            self._encoders[key] = MemoEncoder(view, self.memo)
        return self._encoders[key]

    def __call__(self, node_tokens: int, calibration: str) -> MemoEncoder:
        """The encoder for ``node_tokens``-token nodes with calibration ``calibration`` (``"off"`` or a preset)."""
        max_length = self.max_length(node_tokens)
        encoder = self._view(max_length, calibration)
        reference = self._plain_reference()
        if encoder is not reference and encoder.sharing is None and self.probes:
            cal = calibration_named(calibration)
            bound = min(unchanged_tokens(cal, encoder.max_length), reference.max_length)
            if bound > 0:
                encoder.share_short_texts(reference, bound, self.probes)
        return encoder
