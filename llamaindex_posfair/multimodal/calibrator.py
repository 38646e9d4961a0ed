"""Attention-guided position-bias calibrator (method C) and its baselines.

Fitting runs ``M`` labelled samples through all ``N`` cyclic shifts once and keeps, per candidate count ``N``,
the conditional bias (:mod:`.bias`), the static attention prior and the PriDe log-prior (:mod:`.pride`); inference
is one forward pass and pure tensor math (docs/multimodal.md, "Calibration and inference"). Methods: :data:`METHODS`;
self-consistency needs ``N`` passes and lives in :func:`self_consistency_scores`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from .bias import conditional_bias, conditional_log_prob_matrix, restricted_log_probs
from .posterior import attention_log_ratio, corrected_scores, select_layers, visual_posterior
from .pride import pride_log_prior, pride_scores
from .types import Candidates, ForwardResult, MultiImageScorer

__all__ = [
    "METHODS",
    "AttentionGuidedCalibrator",
    "CalibrationMismatchError",
    "CalibrationState",
    "CalibratorConfig",
    "SlotTables",
    "check_fitted_size",
    "self_consistency_scores",
]

logger = logging.getLogger(__name__)

METHODS = ("vanilla", "pride", "attention", "ours")
Method = Literal["vanilla", "pride", "attention", "ours"]
STATE_FORMAT = "posfair-mm-calibration/1"


class CalibrationMismatchError(ValueError):
    """A calibration state does not fit the model or the number of candidates."""


@dataclass(frozen=True)
class CalibratorConfig:
    """Settings of :class:`AttentionGuidedCalibrator` (validated on construction).

    Args:
        top_k: layers kept by visual evidence strength ``V_l`` (default 2).
        sharpen: sharpening ``s`` of the attention posterior (default 5.0).
        layer_range: half-open ``(start, end)`` layer range to choose from;
            ``None`` = the upper half of the model's layers.
        variant: ``"linear"`` (published) or ``"log_mixture"`` (ours) correction.
        eps: floor applied to attention masses before logarithms.

    Raises:
        ValueError: naming the setting, the value and what is valid.

    Example:
        >>> CalibratorConfig(top_k=3, sharpen=2.0).resolve_layer_range(8)
        (4, 8)
    """

    top_k: int = 2
    sharpen: float = 5.0
    layer_range: tuple[int, int] | None = None
    variant: Literal["linear", "log_mixture"] = "linear"
    eps: float = 1e-12

    def __post_init__(self) -> None:
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {self.top_k!r}; the default is 2")
        if not (isinstance(self.sharpen, (int, float)) and 0 <= self.sharpen < float("inf")):
            raise ValueError(f"sharpen must be a finite number >= 0, got {self.sharpen!r}; the default is 5.0")
        if self.layer_range is not None:
            lr = tuple(self.layer_range)
            if len(lr) != 2 or not all(isinstance(x, int) for x in lr) or not 0 <= lr[0] < lr[1]:
                raise ValueError(
                    f"layer_range must be (start, end) with 0 <= start < end, got {self.layer_range!r}; "
                    "use None for the upper half of the layers"
                )
            object.__setattr__(self, "layer_range", (int(lr[0]), int(lr[1])))
        if self.variant not in ("linear", "log_mixture"):
            raise ValueError(f"variant must be 'linear' or 'log_mixture', got {self.variant!r}")
        if not 0 < self.eps < 1:
            raise ValueError(f"eps must be in (0, 1), got {self.eps!r}; the default is 1e-12")

    def resolve_layer_range(self, num_layers: int) -> tuple[int, int]:
        """The concrete layer range for a model with ``num_layers`` layers."""
        if self.layer_range is None:
            return (num_layers // 2, num_layers)
        if self.layer_range[1] > num_layers:
            raise ValueError(
                f"layer_range {self.layer_range} ends after the model's {num_layers} layers; use an end <= {num_layers}"
            )
        return self.layer_range


@dataclass
class SlotTables:
    """What calibration learned for one candidate count ``n``."""

    bias: torch.Tensor  # [n, n]
    attention_prior: torch.Tensor  # [L, n]
    pride_log_prior: torch.Tensor  # [n]
    num_samples: int

    @property
    def n(self) -> int:
        return int(self.bias.shape[0])


#: The tensors of a :class:`SlotTables`, saved as ``n{N}.{name}``.
_TABLE_TENSORS = ("bias", "attention_prior", "pride_log_prior")


def check_fitted_size(n: int, fitted: Sequence[int]) -> None:
    """Raise :class:`CalibrationMismatchError` unless a state fitted for ``fitted`` sizes covers ``n`` candidates."""
    if n in fitted:
        return
    fitted = sorted(fitted)
    if fitted and n > max(fitted):
        raise CalibrationMismatchError(
            f"got {n} candidate images but the calibration was fitted for at most N={max(fitted)} "
            f"(fitted sizes: {fitted}); retrieve at most {max(fitted)} images or refit with samples of {n} candidates"
        )
    raise CalibrationMismatchError(
        f"got {n} candidate images but the calibration has no tables for N={n} (fitted sizes: {fitted}); "
        f"refit including samples of {n} candidates"
    )


@dataclass
class CalibrationState:
    """Fitted calibration: model identity, layer range and per-``N`` tables.

    Saved as safetensors (tensors + JSON metadata; no pickle). Loading checks
    the model identity and the candidate count.

    Example:
        >>> # state.save("cal.safetensors"); CalibrationState.load("cal.safetensors", model_id=adapter.model_id, n=4)
    """

    model_id: str
    num_layers: int
    layer_range: tuple[int, int]
    config: CalibratorConfig
    tables: dict[int, SlotTables] = field(default_factory=dict)

    @property
    def sizes(self) -> list[int]:
        return sorted(self.tables)

    def table(self, n: int) -> SlotTables:
        """The tables for ``n`` candidates, or a clear error if not fitted."""
        check_fitted_size(n, self.sizes)
        return self.tables[n]

    def check_model(self, model_id: str) -> None:
        """Raise :class:`CalibrationMismatchError` if fitted for another model/prompt."""
        if model_id != self.model_id:
            raise CalibrationMismatchError(
                f"calibration state was fitted for model {self.model_id!r} but is used with {model_id!r}; "
                "refit the calibrator on this model (the bias is specific to a model and prompt)"
            )

    # ------------------------------------------------------------------ I/O
    def save(self, path: str | Path) -> Path:
        """Write the state as a ``.safetensors`` file; returns the path."""
        from safetensors.torch import save_file

        tensors: dict[str, torch.Tensor] = {}
        samples: dict[str, int] = {}
        for n, t in self.tables.items():
            tensors.update({f"n{n}.{name}": getattr(t, name).contiguous() for name in _TABLE_TENSORS})
            samples[str(n)] = t.num_samples
        meta = {
            "format": STATE_FORMAT,
            "model_id": self.model_id,
            "num_layers": str(self.num_layers),
            "layer_range": json.dumps(list(self.layer_range)),
            "sizes": json.dumps(self.sizes),
            "num_samples": json.dumps(samples),
            "config": json.dumps({**asdict(self.config), "layer_range": self.config.layer_range}),
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path), metadata=meta)
        return path

    @classmethod
    def load(cls, path: str | Path, *, model_id: str | None = None, n: int | None = None) -> CalibrationState:
        """Read a state written by :meth:`save`.

        Args:
            path: the ``.safetensors`` file.
            model_id: if given, the state must have been fitted for this model.
            n: if given, the state must hold tables for ``n`` candidates.

        Raises:
            FileNotFoundError: if ``path`` does not exist.
            CalibrationMismatchError: wrong format, model or ``n``.
        """
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"calibration state {str(path)!r} does not exist; fit one with "
                "AttentionGuidedCalibrator().fit(scorer, samples) and write it with .save(path)"
            )
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open is not iterable
        except Exception as exc:  # safetensors raises its own error types
            raise CalibrationMismatchError(
                f"{str(path)!r} is not a readable safetensors calibration state: {exc}"
            ) from exc
        if meta.get("format") != STATE_FORMAT:
            raise CalibrationMismatchError(
                f"{str(path)!r} has format {meta.get('format')!r}, expected {STATE_FORMAT!r}; refit the calibrator"
            )
        cfg = json.loads(meta["config"])
        if cfg.get("layer_range") is not None:
            cfg["layer_range"] = tuple(cfg["layer_range"])
        samples = json.loads(meta["num_samples"])
        tables = {
            int(s): SlotTables(**{k: tensors[f"n{s}.{k}"] for k in _TABLE_TENSORS}, num_samples=int(samples[str(s)]))
            for s in json.loads(meta["sizes"])
        }
        state = cls(
            model_id=meta["model_id"],
            num_layers=int(meta["num_layers"]),
            layer_range=tuple(json.loads(meta["layer_range"])),
            config=CalibratorConfig(**cfg),
            tables=tables,
        )
        if model_id is not None:
            state.check_model(model_id)
        if n is not None:
            state.table(n)
        return state


class AttentionGuidedCalibrator:
    """Fit and apply attention-guided position-bias calibration.

    Args:
        config: a :class:`CalibratorConfig` (defaults: top-2 layers of the
            upper half, sharpening 5, linear correction).
        state: an already fitted :class:`CalibrationState` (e.g. loaded).

    Example (the simulated MLLM of the repository's ``research/multimodal``, not shipped):
        >>> from research.multimodal.simulator import SimulatedMLLM, make_samples
        >>> sim = SimulatedMLLM()
        >>> cal = AttentionGuidedCalibrator()
        >>> _ = cal.fit(sim, make_samples(5, 4, seed=0))
        >>> test = make_samples(1, 4, seed=1)[0]
        >>> scores = cal.scores(sim.score(test.query, test.images))
        >>> scores.shape
        torch.Size([4])
    """

    def __init__(self, config: CalibratorConfig | None = None, state: CalibrationState | None = None) -> None:
        self.config = config or (state.config if state is not None else CalibratorConfig())
        self.state = state

    # ---------------------------------------------------------------- fitting
    def fit(self, scorer: MultiImageScorer, samples: Sequence[Candidates]) -> CalibrationState:
        """Run every sample through all ``N`` cyclic shifts and fit the tables.

        Samples may have different candidate counts; one table is fitted per count.

        Raises:
            ValueError: if a sample is unlabelled or there are no samples.
        """
        if not samples:
            raise ValueError("samples must hold at least one labelled Candidates; the default calibration uses 5")
        passes: list[tuple[int, ForwardResult]] = []
        for i, s in enumerate(samples):
            if s.answer is None:
                raise ValueError(f"samples[{i}] has no answer; calibration needs labelled samples")
            for shift in range(s.n):
                shifted = s.shifted(shift)
                passes.append((int(shifted.answer), scorer.score(shifted.query, shifted.images)))
        return self.fit_from_results(scorer.model_id, passes)

    def fit_from_results(self, model_id: str, passes: Sequence[tuple[int, ForwardResult]]) -> CalibrationState:
        """Fit from precomputed ``(gold_slot, ForwardResult)`` passes (cyclic shifts included).

        Raises:
            ValueError: if passes disagree in their number of layers, or a slot
                never holds the right image for some ``N``.
        """
        if not passes:
            raise ValueError("passes must not be empty")
        num_layers = passes[0][1].num_layers
        if any(r.num_layers != num_layers for _, r in passes):
            raise ValueError("all passes must come from the same model (different numbers of layers seen)")
        layer_range = self.config.resolve_layer_range(num_layers)
        by_n: dict[int, list[tuple[int, ForwardResult]]] = {}
        for gold, r in passes:
            by_n.setdefault(r.n_images, []).append((gold, r))
        tables = {}
        for n, group in sorted(by_n.items()):
            gold = torch.tensor([g for g, _ in group], dtype=torch.long)
            lp = torch.stack([restricted_log_probs(r.logits) for _, r in group])
            ev = torch.stack([r.evidence.to(torch.float64) for _, r in group])
            tables[n] = SlotTables(
                bias=conditional_bias(conditional_log_prob_matrix(lp, gold)),
                attention_prior=ev.mean(dim=0),
                pride_log_prior=pride_log_prior(lp),
                num_samples=len(group) // n,
            )
        self.state = CalibrationState(model_id, num_layers, layer_range, self.config, tables)
        logger.info("fitted calibration for %s: sizes %s, layers %s", model_id, sorted(tables), layer_range)
        return self.state

    # -------------------------------------------------------------- inference
    def _require_state(self) -> CalibrationState:
        if self.state is None:
            raise RuntimeError("the calibrator is not fitted; call fit(...) or pass a loaded CalibrationState")
        return self.state

    def posterior(self, result: ForwardResult) -> torch.Tensor:
        """The attention posterior ``π`` over slots for one pass."""
        state = self._require_state()
        table = state.table(result.n_images)
        if result.num_layers != state.num_layers:
            raise CalibrationMismatchError(
                f"the pass has {result.num_layers} layers but the state was fitted on {state.num_layers}; "
                "the state belongs to another model"
            )
        layers = select_layers(result.evidence, state.layer_range, self.config.top_k)
        return visual_posterior(result.evidence, table.attention_prior, layers, self.config.sharpen, self.config.eps)

    def scores(self, result: ForwardResult, method: Method = "ours") -> torch.Tensor:
        """``[N]`` scores of one pass under ``method`` (higher is better).

        Args:
            result: one forward pass.
            method: ``"ours"`` (default), ``"vanilla"``, ``"pride"`` or ``"attention"``.

        Raises:
            ValueError: for an unknown method.
            CalibrationMismatchError: if the state does not cover ``N``.
        """
        if method == "vanilla":
            return restricted_log_probs(result.logits)
        state = self._require_state()
        table = state.table(result.n_images)
        if method == "pride":
            return pride_scores(result.logits, table.pride_log_prior)
        if method == "attention":
            layers = select_layers(result.evidence, state.layer_range, self.config.top_k)
            return attention_log_ratio(result.evidence, table.attention_prior, layers, self.config.eps)
        if method == "ours":
            pi = self.posterior(result)
            return corrected_scores(result.logits, pi, table.bias, self.config.variant)
        raise ValueError(f"method must be one of {METHODS}, got {method!r} (self-consistency: self_consistency_scores)")


def self_consistency_scores(scorer: MultiImageScorer, query: Any, images: Sequence[Any]) -> torch.Tensor:
    """Self-consistency baseline: mean restricted log-prob of each image over all ``N`` cyclic shifts.

    Costs ``N`` forward passes. Returns ``[N]`` scores in the order of ``images``.
    """
    n = len(images)
    total = torch.zeros(n, dtype=torch.float64)
    base = Candidates(query, tuple(images), None)
    for shift in range(n):
        r = scorer.score(query, base.shifted(shift).images)
        lp = restricted_log_probs(r.logits)
        total += lp[(torch.arange(n) + shift) % n]  # image i sits at slot (i + shift) % n
    return total / n
