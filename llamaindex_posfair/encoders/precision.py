"""Automatic precision: the encoder runs in bfloat16 where the device has native bfloat16 matrix units.

:func:`default_dtype` is the one place that decides (the rule, and what a collection records: docs/encoders.md,
"Precision"). The capability probes (:func:`cuda_has_bf16`, :func:`cpu_has_bf16`) are separate functions, so a
test can replace them; ``POSFAIR_BF16=off`` (:data:`BF16_ENV`) makes both answer ``False`` in every process that
inherits it. The query-side check accepts a difference in precision or runtime alone and says so once
(:func:`notice_precision_difference`, :func:`notice_runtime_difference`).

Example:
    >>> from llamaindex_posfair.encoders.precision import default_dtype, same_precision
    >>> default_dtype("mps")
    'float32'
    >>> same_precision(None, "float32"), same_precision("bfloat16", "float32")
    (True, False)
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from typing import Literal

__all__ = [
    "AUTO",
    "BF16_ENV",
    "bf16_allowed",
    "cpu_has_bf16",
    "cpuinfo_has_bf16",
    "cuda_has_bf16",
    "default_dtype",
    "notice_precision_difference",
    "notice_runtime_difference",
    "precision_name",
    "resolve_dtype",
    "same_precision",
]

logger = logging.getLogger(__name__)

#: ``EncoderSpec.dtype`` value meaning "chosen by the hardware" (:func:`default_dtype`).
AUTO = "auto"
Precision = Literal["bfloat16", "float32"]

#: Environment variable: ``off`` makes the bfloat16 probes answer ``False`` (automatic precision is float32).
BF16_ENV = "POSFAIR_BF16"

#: ``/proc/cpuinfo`` flags of native bfloat16 matrix units on x86 CPUs.
_CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
_CPUINFO = "/proc/cpuinfo"
_noticed: set[tuple[str, ...]] = set()


def cpuinfo_has_bf16(path: str = _CPUINFO) -> bool:
    """Whether the ``flags`` line of a Linux ``/proc/cpuinfo`` names AMX-BF16 or AVX512-BF16 (``False`` if unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return not _CPU_BF16_FLAGS.isdisjoint(line.partition(":")[2].split())
    except OSError:
        return False
    return False


def bf16_allowed() -> bool:
    """Whether automatic precision may pick bfloat16: ``False`` when ``$POSFAIR_BF16`` is ``off``.

    Raises:
        ValueError: ``$POSFAIR_BF16`` is set to something other than ``auto`` or ``off``.
    """
    value = os.environ.get(BF16_ENV, "auto").strip().lower()
    if value not in ("auto", "off"):
        raise ValueError(f"{BF16_ENV}={value!r} is not a setting; use {BF16_ENV}=off (float32) or unset it (auto)")
    return value == "auto"


@functools.lru_cache(maxsize=1)
def _cpu_bf16_units() -> bool:
    return sys.platform.startswith("linux") and cpuinfo_has_bf16()


def cpu_has_bf16() -> bool:
    """Whether this CPU has native bfloat16 matrix units: :func:`cpuinfo_has_bf16` on Linux, ``False`` elsewhere
    (and where :func:`bf16_allowed` says no)."""
    return bf16_allowed() and _cpu_bf16_units()


def cuda_has_bf16() -> bool:
    """Whether the current CUDA GPU computes bfloat16 natively (not emulated; ``False`` where
    :func:`bf16_allowed` says no)."""
    if not bf16_allowed():
        return False
    import torch

    if not torch.cuda.is_available():
        return False
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # a torch without the keyword reports native support only
        return bool(torch.cuda.is_bf16_supported())


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def default_dtype(device: str | None = None, runtime: str = "torch") -> Precision:
    """The precision an encoder runs in on ``device`` when none is asked for.

    Args:
        device: a torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...); ``None`` = CUDA when
            available, else the CPU (as :class:`EncoderSpec` picks it).
        runtime: the inference runtime (``EncoderSpec.runtime``); every runtime but ``"torch"`` computes
            in float32.

    Returns:
        ``"bfloat16"`` where the device has native bfloat16 matrix units and the runtime is torch, else
        ``"float32"``.
    """
    if runtime != "torch":
        return "float32"
    kind = str(device).split(":", 1)[0] if device is not None else ("cuda" if _cuda_available() else "cpu")
    probe = {"cuda": cuda_has_bf16, "cpu": cpu_has_bf16}.get(kind)  # other devices: float32
    return "bfloat16" if probe is not None and probe() else "float32"


def resolve_dtype(dtype: str | None, device: str | None = None, runtime: str = "torch") -> str | None:
    """``dtype`` with :data:`AUTO` replaced by :func:`default_dtype` of ``device`` and ``runtime`` (other values
    unchanged)."""
    return default_dtype(device, runtime) if dtype == AUTO else dtype


def precision_name(dtype: str | None) -> str:
    """The precision a recorded ``dtype`` means: ``None`` (as saved, before automatic precision) is float32."""
    return "float32" if dtype is None else dtype


def same_precision(a: str | None, b: str | None) -> bool:
    """Whether two recorded dtypes compute in the same precision (``None`` counts as float32)."""
    return precision_name(a) == precision_name(b)


def notice_precision_difference(where: str, stored: str | None, used: str | None) -> None:
    """Log once per (``where``, precisions) that queries run in another precision than the stored vectors."""
    key = (where, precision_name(stored), precision_name(used))
    if key in _noticed:
        return
    _noticed.add(key)
    logger.warning(
        "%s was written in %s and is queried in %s: accepted, rankings agree across these precisions "
        "(pass dtype=%r / --dtype %s to query in the stored precision)",
        *key,
        key[1],
        key[1],
    )


def notice_runtime_difference(where: str, stored: tuple[str, str | None], used: tuple[str, str | None]) -> None:
    """Log once per (``where``, runtimes and precisions) that queries run in another runtime than the stored vectors.

    Args:
        where: what was written, for the notice.
        stored / used: ``(runtime, dtype)`` of the stored vectors and of the query encoder.
    """
    key = (where, stored[0], precision_name(stored[1]), used[0], precision_name(used[1]))
    if key in _noticed:
        return
    _noticed.add(key)
    logger.warning(
        "%s was written with runtime %s in %s and is queried with runtime %s in %s: accepted, the runtimes "
        "compute the same vectors up to rounding (pass runtime=%r to query with the stored runtime; writes "
        "must use it)",
        *key,
        key[1],
    )
