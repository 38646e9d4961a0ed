"""Configuration of position-fair attention calibration (docs/methods.md, part A)."""

from __future__ import annotations

import hashlib
import json
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Pooling = Literal["cls", "last", "mean"]
IsolatedKind = Literal["cls", "bos", "sep", "eos", "dump", "prompt"]
IsolatedPolicy = Union[Literal["equal", "original"], float]  # noqa: UP007 - pydantic reads it at runtime on 3.10
LayerSpec = Union[Literal["last", "last_half"], tuple[int, ...]]  # noqa: UP007

#: Isolated tokens per pooling when ``isolate`` is left at ``None`` (docs/methods.md A.1):
#: ``[CLS]``/BOS for ``[CLS]`` pooling, BOS and EOS for last-token pooling, nothing
#: for mean pooling. DUMP prefix tokens are isolated whenever the model has them.
DEFAULT_ISOLATED: dict[str, tuple[str, ...]] = {
    "cls": ("cls", "bos", "dump"),
    "last": ("bos", "eos", "dump"),
    "mean": ("dump",),
}

#: Weight policy of each isolated kind unless ``isolated_policy`` says otherwise.
#: The reference code keeps BOS at its original weight and gives EOS an equal share.
DEFAULT_POLICY: dict[str, IsolatedPolicy] = {
    "cls": "original",
    "bos": "original",
    "sep": "equal",
    "eos": "equal",
    "dump": "original",
    "prompt": "original",
}


class CalibrationConfig(BaseModel):
    """Settings of inference-time position-fair attention calibration.

    The pooling token's attention row(s) in the chosen layers get equal mass per basket of ``basket_size`` content
    tokens, interpolated with the original row by ``strength`` (docs/methods.md, part A).

    Args:
        basket_size: Content tokens per basket (``B``). Typical values 64-512.
        strength: Interpolation ``lambda`` in ``[0, 1]``; ``0`` is the unmodified model.
        layers: ``"last"``, ``"last_half"`` (the last ``ceil(N/2)`` layers) or explicit
            layer indices (negative indices count from the end).
        pooling: ``"cls"``, ``"last"`` or ``"mean"``; ``None`` detects it from the
            sentence-transformers ``Pooling`` module.
        isolate: Token kinds kept out of the baskets, each its own basket
            (``"cls"``, ``"bos"``, ``"sep"``, ``"eos"``, ``"dump"``, ``"prompt"``).
            ``None`` uses the default for the pooling (see ``DEFAULT_ISOLATED``).
        isolated_policy: Weight of each isolated kind: ``"equal"`` (``1/n_total``),
            ``"original"`` (keeps its attention) or a fixed float in ``[0, 1)``.
            Kinds not listed use ``DEFAULT_POLICY``.
        basket_layout: ``"fixed"`` (published: baskets of exactly ``B``, a short last
            one) or ``"equal"`` (``ceil(C/B)`` baskets of near-equal length; ours).
        skip_single_basket: Leave a sequence unchanged when its content fits in one
            basket, as the reference code does.
        basket_weighting: ``"equal"`` (published) or ``"length"`` (share proportional
            to basket length; ours).
        strength_schedule: per-layer factor on ``strength`` (ours): ``"constant"``,
            ``"increasing"``, ``"decreasing"`` or one float per calibrated layer.
        length_reference: if set, ``strength`` is scaled per text by
            ``min(1, content_tokens / length_reference)`` (ours).
        calibrate_queries: Apply calibration when encoding queries.
        calibrate_documents: Apply calibration when encoding documents.

    Raises:
        pydantic.ValidationError: a setting is out of range; the message names it.

    Example:
        >>> from llamaindex_posfair import CalibrationConfig
        >>> cfg = CalibrationConfig(basket_size=128, strength=0.5, layers="last_half")
        >>> cfg.resolve_layers(6)
        (3, 4, 5)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    basket_size: int = Field(128, description="Content tokens per basket (B); typical values are 64-512.")
    strength: float = Field(0.5, description="Interpolation strength lambda in [0, 1]; 0 leaves the model unchanged.")
    layers: LayerSpec = Field("last_half", description='"last", "last_half", or a tuple of layer indices.')
    pooling: Pooling | None = Field(None, description='"cls", "last" or "mean"; None detects it from the model.')
    isolate: tuple[IsolatedKind, ...] | None = Field(
        None, description="Token kinds kept out of baskets; None uses the pooling's default."
    )
    isolated_policy: tuple[tuple[IsolatedKind, IsolatedPolicy], ...] = Field(
        (), description='Per-kind weight policy: "equal", "original" or a float; unlisted kinds use the defaults.'
    )
    basket_layout: Literal["fixed", "equal"] = Field(
        "fixed", description='"fixed": baskets of exactly B (short last one); "equal": near-equal baskets.'
    )
    skip_single_basket: bool = Field(
        True, description="Leave sequences whose content fits in one basket unchanged (as the reference does)."
    )
    basket_weighting: Literal["equal", "length"] = Field(
        "equal",
        description='"equal": every content basket gets the same share (published); "length": share '
        "proportional to basket length.",
    )
    strength_schedule: Literal["constant", "increasing", "decreasing"] | tuple[float, ...] = Field(
        "constant",
        description="Per-layer factor on strength over the calibrated layers: constant, increasing "
        "(1/n ... 1), decreasing (1 ... 1/n), or one factor per calibrated layer.",
    )
    length_reference: int | None = Field(
        None, description="If set, strength is scaled per text by min(1, content tokens / length_reference)."
    )
    calibrate_queries: bool = Field(True, description="Calibrate when encoding queries.")
    calibrate_documents: bool = Field(True, description="Calibrate when encoding documents.")

    @field_validator("basket_size")
    @classmethod
    def _check_basket_size(cls, value: int) -> int:
        if isinstance(value, bool) or value < 1:
            raise ValueError(f"basket_size must be a positive integer, got {value!r}; typical values are 64-512")
        return value

    @field_validator("strength")
    @classmethod
    def _check_strength(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(
                f"strength must lie in [0, 1], got {value!r}; 0 leaves the model unchanged, 0.3-0.5 works best"
            )
        return float(value)

    @field_validator("layers", mode="before")
    @classmethod
    def _check_layers(cls, value):
        if isinstance(value, str):
            if value not in ("last", "last_half"):
                raise ValueError(f'layers must be "last", "last_half" or a list of layer indices, got {value!r}')
            return value
        try:
            indices = tuple(int(v) for v in value)
        except TypeError as exc:
            raise ValueError(f'layers must be "last", "last_half" or a list of layer indices, got {value!r}') from exc
        if not indices:
            raise ValueError("layers must name at least one layer; use calibration=None to switch calibration off")
        return indices

    @field_validator("isolated_policy", mode="before")
    @classmethod
    def _check_policy(cls, value):
        if isinstance(value, dict):
            value = tuple(value.items())
        out = []
        for kind, policy in value:
            if isinstance(policy, str):
                if policy not in ("equal", "original"):
                    raise ValueError(
                        f'isolated_policy[{kind!r}] must be "equal", "original" or a float in [0, 1), got {policy!r}'
                    )
            else:
                policy = float(policy)
                if not 0.0 <= policy < 1.0:
                    raise ValueError(f"isolated_policy[{kind!r}] must be a float in [0, 1), got {policy!r}")
            out.append((kind, policy))
        return tuple(out)

    @field_validator("strength_schedule", mode="before")
    @classmethod
    def _check_schedule(cls, value):
        if isinstance(value, str):
            if value not in ("constant", "increasing", "decreasing"):
                raise ValueError(
                    f'strength_schedule must be "constant", "increasing", "decreasing" or a list of floats, got {value!r}'
                )
            return value
        factors = tuple(float(v) for v in value)
        if not factors or any(not 0.0 <= f <= 1.0 for f in factors):
            raise ValueError(f"strength_schedule factors must be floats in [0, 1], got {value!r}")
        return factors

    @field_validator("length_reference")
    @classmethod
    def _check_length_reference(cls, value):
        if value is not None and value < 1:
            raise ValueError(f"length_reference must be a positive number of tokens or None, got {value!r}")
        return value

    @model_validator(mode="after")
    def _check_isolate(self) -> CalibrationConfig:
        if self.isolate is not None and len(set(self.isolate)) != len(self.isolate):
            raise ValueError(f"isolate lists a token kind twice: {self.isolate!r}")
        return self

    # ------------------------------------------------------------------ helpers
    def resolve_layers(self, num_layers: int) -> tuple[int, ...]:
        """Return the sorted, non-negative indices of the calibrated layers.

        Raises:
            ValueError: an explicit index is outside ``[-num_layers, num_layers)``.
        """
        if num_layers < 1:
            raise ValueError(f"num_layers must be positive, got {num_layers}")
        if self.layers == "last":
            return (num_layers - 1,)
        if self.layers == "last_half":
            half = -(-num_layers // 2)
            return tuple(range(num_layers - half, num_layers))
        resolved = set()
        for idx in self.layers:
            if not -num_layers <= idx < num_layers:
                raise ValueError(
                    f"layers contains {idx}, but the model has {num_layers} layers; "
                    f"use indices in [{-num_layers}, {num_layers - 1}]"
                )
            resolved.add(idx % num_layers)
        return tuple(sorted(resolved))

    def layer_strengths(self, num_layers: int) -> dict[int, float]:
        """``lambda`` of every calibrated layer, after the schedule.

        Raises:
            ValueError: an explicit schedule does not have one factor per calibrated layer.
        """
        layers = self.resolve_layers(num_layers)
        n = len(layers)
        if self.strength_schedule == "constant":
            factors = [1.0] * n
        elif self.strength_schedule == "increasing":
            factors = [(i + 1) / n for i in range(n)]
        elif self.strength_schedule == "decreasing":
            factors = [(n - i) / n for i in range(n)]
        else:
            factors = list(self.strength_schedule)
            if len(factors) != n:
                raise ValueError(
                    f"strength_schedule has {len(factors)} factors but {n} layers are calibrated ({layers}); "
                    "give one factor per calibrated layer"
                )
        return {layer: self.strength * f for layer, f in zip(layers, factors)}

    def isolated_kinds(self, pooling: str) -> tuple[str, ...]:
        """The isolated token kinds in force for ``pooling``."""
        return self.isolate if self.isolate is not None else DEFAULT_ISOLATED[pooling]

    def policy_for(self, kind: str) -> IsolatedPolicy:
        """The weight policy of one isolated kind."""
        return dict(self.isolated_policy).get(kind, DEFAULT_POLICY[kind])

    def applies_to(self, role: str) -> bool:
        """Whether calibration is on for ``role`` (``"query"``, ``"document"`` or ``"text"``)."""
        return {"query": self.calibrate_queries, "document": self.calibrate_documents}.get(role, True)

    def fingerprint(self) -> str:
        """A short stable hash of every setting (used in cache keys and payloads)."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def layer_strength_map(layers: tuple[int, ...], strength: float | dict[int, float]) -> dict[int, float]:
    """``{layer: lambda}`` from one strength for every layer or an explicit per-layer map.

    Both backends accept either form; a map keeps only the layers in ``layers``.
    """
    wanted = {int(layer) for layer in layers}
    if isinstance(strength, dict):
        return {int(k): float(v) for k, v in strength.items() if int(k) in wanted}
    return {layer: float(strength) for layer in sorted(wanted)}
