"""Settings of a DUMP-prefixed encoder and of its training run.

Two frozen dataclasses, validated on construction:

* :class:`DumpConfig` — what the prefix is (``K``, which mode trained it, how
  its embedding rows were initialised). Saved next to the model as
  ``posfair_dump.json`` so a reloaded model knows its own prefix.
* :class:`DumpTrainingConfig` — how to train (InfoNCE scale, learning rate,
  epochs, batch sizes, precision).

Modes (:data:`DUMP_MODES`): ``full`` is the published method (model and prefix rows trained); ``dump_only``
trains the prefix rows alone; ``random_prefix`` and ``soft_prompt`` are controls, and ``soft_prompt``'s
``[SOFT_k]`` tokens are content that calibration does not isolate. The table: docs/dump.md, "Modes".
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

DumpMode = Literal["full", "dump_only", "random_prefix", "soft_prompt"]
DUMP_MODES: tuple[str, ...] = ("full", "dump_only", "random_prefix", "soft_prompt")
DUMP_CONFIG_FILENAME = "posfair_dump.json"

#: Modes in which the transformer weights are frozen.
FROZEN_MODEL_MODES = frozenset({"dump_only", "soft_prompt"})
#: Modes in which the prefix rows never change.
FROZEN_PREFIX_MODES = frozenset({"random_prefix"})


@dataclass(frozen=True)
class DumpConfig:
    """What the prefix of a DUMP-prefixed encoder is.

    Args:
        num_tokens: ``K``, the number of prefix tokens (paper: 4; 2 is also good
            for some models).
        mode: Which parameters train and what the prefix is (module docstring).
        seed: Seed of the random part of the row initialisation.
        init_noise: Standard deviation of the noise added to the mean-initialised
            rows, relative to the per-dimension std of the vocabulary rows
            (breaks the symmetry between the K rows).
        soft_prompt_text: Text whose first ``K`` token embeddings initialise the
            ``soft_prompt`` rows (cycled if it has fewer than ``K`` tokens).
        split_special_tokens: If True (default), literal special-token strings in
            the input text (``"[DUMP_1]"``, ``"[CLS]"``) are tokenised as plain
            text, so the prefix can never be applied twice. Set False only for
            models whose prompts rely on literal special tokens.

    Raises:
        ValueError: If a field is out of range.

    Example:
        >>> cfg = DumpConfig(num_tokens=2, mode="dump_only")
        >>> cfg.token_strings
        ('[DUMP_1]', '[DUMP_2]')
        >>> DumpConfig.from_dict(cfg.to_dict()) == cfg
        True
    """

    num_tokens: int = 4
    mode: DumpMode = "full"
    seed: int = 0
    init_noise: float = 0.02
    soft_prompt_text: str = "represent this text for retrieving relevant passages"
    split_special_tokens: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.num_tokens, bool) or not isinstance(self.num_tokens, int) or not 1 <= self.num_tokens <= 64:
            raise ValueError(
                f"num_tokens must be an integer in [1, 64], got {self.num_tokens!r}; "
                "the paper uses 4 (2 is also good for some models)"
            )
        if self.mode not in DUMP_MODES:
            raise ValueError(
                f"mode must be one of {DUMP_MODES}, got {self.mode!r}; use 'full' for the published method"
            )
        if not (isinstance(self.init_noise, (int, float)) and self.init_noise >= 0):
            raise ValueError(f"init_noise must be a float >= 0, got {self.init_noise!r}; typical value 0.02")
        if self.mode == "soft_prompt" and not self.soft_prompt_text.strip():
            raise ValueError("soft_prompt_text must be non-empty text in mode 'soft_prompt', got an empty string")

    @property
    def token_prefix(self) -> str:
        """``"SOFT"`` for the soft-prompt control, ``"DUMP"`` otherwise."""
        return "SOFT" if self.mode == "soft_prompt" else "DUMP"

    @property
    def token_strings(self) -> tuple[str, ...]:
        """The K token strings, ``("[DUMP_1]", ..., "[DUMP_K]")``."""
        return tuple(f"[{self.token_prefix}_{i}]" for i in range(1, self.num_tokens + 1))

    @property
    def isolated(self) -> bool:
        """Whether calibration should treat the prefix as isolated dump positions."""
        return self.mode != "soft_prompt"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (inverse of :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DumpConfig:
        """Build from :meth:`to_dict` output; unknown keys are ignored (forward compatibility)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def save_dump_config(
    path: str | Path, config: DumpConfig, token_ids: list[int], extra: dict[str, Any] | None = None
) -> Path:
    """Write ``posfair_dump.json`` into a saved model folder.

    Args:
        path: The model folder.
        config: The prefix settings.
        token_ids: The prefix token ids in order.
        extra: Optional extra record (e.g. the training settings and losses).

    Returns:
        The path of the written file.
    """
    record = {
        "format_version": 1,
        "dump": config.to_dict(),
        "token_strings": list(config.token_strings),
        "token_ids": [int(i) for i in token_ids],
        "isolated": config.isolated,
    }
    if extra:
        record["extra"] = extra
    out = Path(path) / DUMP_CONFIG_FILENAME
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def read_dump_record(path: str | Path) -> dict[str, Any] | None:
    """Read ``posfair_dump.json`` from a model folder; None if the folder has none."""
    file = Path(path) / DUMP_CONFIG_FILENAME
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None


def read_dump_config(path: str | Path) -> DumpConfig | None:
    """The :class:`DumpConfig` saved in a model folder, or None for a plain model.

    Example:
        >>> read_dump_config("/nonexistent") is None
        True
    """
    record = read_dump_record(path)
    return None if record is None else DumpConfig.from_dict(record["dump"])


@dataclass(frozen=True)
class DumpTrainingConfig:
    """How to train a DUMP-prefixed encoder with InfoNCE.

    Args:
        learning_rate: Peak learning rate (paper: 1e-4).
        epochs: Passes over the training triples (paper: 1).
        batch_size: Queries per step; each brings its positive and one hard
            negative, and the other rows act as in-batch negatives (paper: 256).
        mini_batch_size: If set and smaller than ``batch_size``, use the
            gradient-cache loss (``CachedMultipleNegativesRankingLoss``) with
            this many sequences per forward pass; memory then scales with it.
        scale: InfoNCE scale ``1/tau`` (paper: 20).
        max_length: Token limit per text incl. special and prefix tokens; None
            keeps the model's ``max_seq_length`` (paper: 8192).
        warmup_ratio: Linear warm-up share of the steps.
        weight_decay: Must be 0 in modes that freeze some embedding rows
            (decoupled decay would move frozen rows).
        precision: ``"auto"`` = bf16 on a CUDA device that supports it, else fp32.
        max_steps: Stop after this many optimiser steps (None = full epochs).
        seed: Seed of shuffling and dropout.
        logging_steps: Log the training loss every this many steps.

    Raises:
        ValueError: If a value is out of range.

    Example:
        >>> DumpTrainingConfig(batch_size=256, mini_batch_size=32).cached
        True
    """

    learning_rate: float = 1e-4
    epochs: float = 1.0
    batch_size: int = 32
    mini_batch_size: int | None = None
    scale: float = 20.0
    max_length: int | None = None
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    max_steps: int | None = None
    seed: int = 0
    logging_steps: int = 5

    def __post_init__(self) -> None:
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}; the paper uses 1e-4")
        if not self.epochs > 0:
            raise ValueError(f"epochs must be > 0, got {self.epochs!r}; the paper uses 1")
        for name in ("batch_size", "logging_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be >= 2 for in-batch negatives, got {self.batch_size}")
        for name in ("mini_batch_size", "max_length", "max_steps"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be None or a positive integer, got {value!r}")
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0, got {self.scale!r}; the paper uses 20 (tau = 0.05)")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio!r}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ValueError(f"precision must be 'auto', 'bf16' or 'fp32', got {self.precision!r}")

    @property
    def cached(self) -> bool:
        """Whether the gradient-cache loss is used."""
        return self.mini_batch_size is not None and self.mini_batch_size < self.batch_size

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)
