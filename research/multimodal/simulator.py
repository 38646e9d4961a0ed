"""A simulated multi-image selector with a planted position bias.

**An evaluation tool, not a model**: it exists to prove the calibration
math end to end, with a *known* bias and a *known* attention signal, on
CPU in seconds. Nothing in the production path (adapter, postprocessor)
uses it.

Generative story for one pass (right image at slot ``g``, image ``k`` at
slot ``k`` with latent relevance ``r_k``, fixed per image):

* answer logits ``z_k = c·r_k + P[g, k] + ε``, ``ε ~ N(0, logit_noise²)``;
  the planted bias ``P[g, k] = β_k + γ_g·[k = g]`` has a static part
  ``β_k = slot_bias·exp(−k)`` (slot 0 favoured) and a conditional part
  ``γ_g = −gold_penalty·g/(N−1)`` (the right image is under-rated when it
  sits late), which a static prior (PriDe) cannot remove;
* attention mass ``e_l(k) = V_l · softmax_k(log ā(k) + σ_l·r_k + η)``,
  ``η ~ N(0, attention_noise²)``: a static slot prior ``ā`` (first-slot
  sink + recency), a true-but-noisy content signal ``σ_l`` that is strong
  only in the ``visual_layers``, and a visual evidence strength ``V_l``
  that is larger there (so top-``K`` selection by ``V_l`` finds them).

``SimulatedMLLM(SimulatorConfig(unbiased=True))`` is the same model with
``P = 0``: the reference the calibrator should approach.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from llamaindex_posfair.multimodal.types import Candidates, ForwardResult

__all__ = ["SimImage", "SimulatedMLLM", "SimulatorConfig", "make_samples"]


@dataclass(frozen=True)
class SimImage:
    """A simulated image: an id, its latent relevance to the query, and whether it is the right one."""

    id: int
    relevance: float
    gold: bool = False


@dataclass(frozen=True)
class SimulatorConfig:
    """Planted bias and signal of :class:`SimulatedMLLM` (see the module docstring).

    Raises:
        ValueError: for a negative noise/strength or visual layers outside the model.
    """

    num_layers: int = 12
    content_scale: float = 2.0
    logit_noise: float = 0.5
    slot_bias: float = 4.0
    gold_penalty: float = 2.0
    attention_signal: float = 1.5
    attention_noise: float = 0.7
    visual_layers: tuple[int, ...] = (8, 10)
    seed: int = 0
    unbiased: bool = False

    def __post_init__(self) -> None:
        for name in (
            "content_scale",
            "logit_noise",
            "slot_bias",
            "gold_penalty",
            "attention_signal",
            "attention_noise",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.num_layers < 2:
            raise ValueError(f"num_layers must be >= 2, got {self.num_layers}")
        if not self.visual_layers or any(not 0 <= layer < self.num_layers for layer in self.visual_layers):
            raise ValueError(
                f"visual_layers must be non-empty indices in [0, {self.num_layers}), got {self.visual_layers}"
            )


class SimulatedMLLM:
    """Scorer with a planted position bias (implements :class:`~.types.MultiImageScorer`).

    Deterministic: the per-pass noise is seeded by the query, the candidate
    order and ``config.seed``.

    Example:
        >>> sim = SimulatedMLLM()
        >>> s = make_samples(1, 4, seed=0)[0]
        >>> sim.score(s.query, s.images).evidence.shape
        torch.Size([12, 4])
    """

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.config = config or SimulatorConfig()

    @property
    def model_id(self) -> str:
        c = self.config
        return f"simulated-mllm(layers={c.num_layers},bias={0 if c.unbiased else c.slot_bias},seed={c.seed})"

    @property
    def num_layers(self) -> int:
        return self.config.num_layers

    def unbiased(self) -> SimulatedMLLM:
        """The same simulator with the planted bias removed."""
        return SimulatedMLLM(replace(self.config, unbiased=True))

    def planted_bias(self, n: int) -> torch.Tensor:
        """``[n, n]`` planted bias ``P[g, k]`` (zeros when unbiased)."""
        c = self.config
        if c.unbiased:
            return torch.zeros(n, n, dtype=torch.float64)
        beta = self._static_bias(n)
        gamma = -c.gold_penalty * torch.arange(n, dtype=torch.float64) / max(n - 1, 1)
        return beta.unsqueeze(0).expand(n, n) + torch.diag(gamma)

    def _static_bias(self, n: int) -> torch.Tensor:
        if self.config.unbiased:
            return torch.zeros(n, dtype=torch.float64)
        return self.config.slot_bias * torch.exp(-torch.arange(n, dtype=torch.float64))

    def attention_prior(self, n: int) -> torch.Tensor:
        """``[n]`` static slot attention pattern ``ā`` (first-slot sink + recency), sums to 1."""
        w = torch.exp(0.15 * torch.arange(n, dtype=torch.float64))
        w[0] *= 2.0
        return w / w.sum()

    def _generator(self, query: Any, images: Sequence[SimImage]) -> torch.Generator:
        key = f"{self.config.seed}|{query}|{','.join(str(i.id) for i in images)}".encode()
        g = torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(key).digest()[:8], "little") >> 1)
        return g

    def score(self, query: Any, images: Sequence[SimImage]) -> ForwardResult:
        """One simulated forward pass over ``images`` in order."""
        c = self.config
        n = len(images)
        if n < 2:
            raise ValueError(f"need at least 2 images, got {n}")
        gen = self._generator(query, images)
        rel = torch.tensor([im.relevance for im in images], dtype=torch.float64)
        golds = [k for k, im in enumerate(images) if im.gold]
        bias = self.planted_bias(n)
        # without a right image only the static part of the bias applies
        row = bias[golds[0]] if golds else self._static_bias(n)
        z = c.content_scale * rel + row + c.logit_noise * torch.randn(n, generator=gen, dtype=torch.float64)

        prior = self.attention_prior(n).log()
        visual = torch.zeros(c.num_layers, dtype=torch.float64)
        visual[list(c.visual_layers)] = 1.0
        signal = c.attention_signal * (0.1 + 0.9 * visual)  # weak everywhere, strong in visual layers
        strength = (0.05 + 0.45 * visual) * torch.exp(
            0.2 * torch.randn(c.num_layers, generator=gen, dtype=torch.float64)
        )
        noise = c.attention_noise * torch.randn(c.num_layers, n, generator=gen, dtype=torch.float64)
        att = torch.softmax(prior.unsqueeze(0) + signal.unsqueeze(1) * rel.unsqueeze(0) + noise, dim=1)
        evidence = strength.unsqueeze(1) * att
        return ForwardResult(logits=z.float(), evidence=evidence.float())


def make_samples(m: int, n: int, *, seed: int = 0, content_noise: float = 0.35, hard: bool = False) -> list[Candidates]:
    """``m`` labelled simulated problems with ``n`` candidates each.

    The right image has relevance ``1 + N(0, content_noise²)``, a negative
    ``N(0, content_noise²)`` (``hard=True``: ``0.6 + N(0, content_noise²)``).
    The right image's slot is uniform. Image ids are unique across samples.

    Example:
        >>> [s.n for s in make_samples(2, 3)]
        [3, 3]
    """
    if m < 1 or n < 2:
        raise ValueError(f"need m >= 1 and n >= 2, got m={m}, n={n}")
    rng = random.Random(seed)
    out = []
    next_id = seed * 1_000_003
    for i in range(m):
        base = 0.6 if hard else 0.0
        imgs = [SimImage(next_id, 1.0 + rng.gauss(0.0, content_noise), gold=True)]
        imgs += [SimImage(next_id + j, base + rng.gauss(0.0, content_noise)) for j in range(1, n)]
        next_id += n
        answer = rng.randrange(n)
        order = imgs[1:]
        order.insert(answer, imgs[0])
        out.append(Candidates(query=f"q{seed}-{i}", images=tuple(order), answer=answer))
    return out
