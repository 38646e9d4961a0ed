"""Family-independent part of an MLLM adapter: one forward pass → ``ForwardResult``.

A family adapter (Qwen2-VL / Qwen2.5-VL today; LLaVA-OneVision and InternVL
fit the same shape) only implements :meth:`MLLMAdapter.build_inputs`: turn
``(query, images)`` into model inputs, the token span of every image and
the answer position. This base class switches the text model to the row-capturing attention function
(:mod:`.attention_capture`), scores the index labels ``"1" … "N"`` at the answer position (two-token labels
jointly, in the same pass) and sums the head-mean attention row over each image's span, per layer: how, in
docs/multimodal.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from .attention_capture import AttentionRowCapture, register_capture_attention
from .types import ForwardResult

__all__ = ["MLLMAdapter", "PreparedInputs", "PromptTemplate", "config_fingerprint"]

_VOLATILE_KEYS = {"transformers_version", "_name_or_path", "dtype", "torch_dtype", "architectures", "use_cache"}


@dataclass(frozen=True)
class PromptTemplate:
    """The multi-image selection prompt (part of the model identity: the bias depends on it).

    Fields are ``str.format`` templates; ``{query}``, ``{n}`` and ``{index}``
    (1-based) are available where noted.
    """

    system: str = "You are a helpful assistant."
    preamble: str = "Query: {query}\nThere are {n} candidate images."
    image_label: str = "\nImage {index}: "
    instruction: str = "\nWhich image best matches the query? Answer with the number of the image only (1-{n})."

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]


@dataclass
class PreparedInputs:
    """Model inputs for one prompt plus where things are.

    Args:
        model_inputs: keyword arguments of the model's forward (batch size 1).
        image_spans: ``[(start, end)]`` half-open token span of each image.
        answer_position: index of the last prompt token (predicts the answer).
    """

    model_inputs: dict[str, torch.Tensor]
    image_spans: list[tuple[int, int]]
    answer_position: int


def _strip(d: Any) -> Any:
    if isinstance(d, dict):
        return {
            str(k): _strip(v)
            for k, v in sorted(d.items(), key=lambda kv: str(kv[0]))
            if str(k) not in _VOLATILE_KEYS and not str(k).startswith("_")
        }
    if isinstance(d, (list, tuple)):
        return [_strip(v) for v in d]
    return d


def config_fingerprint(config: Any) -> str:
    """16-hex-digit hash of a transformers config without run-time fields."""
    blob = json.dumps(_strip(config.to_dict()), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class MLLMAdapter(ABC):
    """Base class of the multimodal LLM adapters (see the module docstring).

    Args:
        model: a transformers image-text-to-text model whose text decoder
            dispatches attention through ``AttentionInterface``.
        tokenizer: its tokenizer.
        name: a human-readable model name for the identity (defaults to
            ``config._name_or_path``).
        prompt: the :class:`PromptTemplate`.
        max_images: largest ``N`` accepted (labels must score within one pass).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str | None = None,
        prompt: PromptTemplate | None = None,
        max_images: int = 19,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.prompt = prompt or PromptTemplate()
        self.name = name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.max_images = max_images
        self._capture_name = register_capture_attention()
        self._text_config._attn_implementation = self._capture_name
        self._label_cache: dict[int, list[list[int]]] = {}
        self._lock = threading.Lock()  # the attention switch is per model, not per thread

    # ---------------------------------------------------------------- family hooks
    @property
    def _text_config(self) -> Any:
        """Config object read by the text decoder's attention layers."""
        return getattr(self.model.config, "text_config", self.model.config)

    @abstractmethod
    def build_inputs(self, query: str, images: Sequence[Any]) -> PreparedInputs:
        """Tokenise ``query`` + ``images`` into one prompt ending at the answer position."""

    # ------------------------------------------------------------------ identity
    @property
    def model_id(self) -> str:
        return f"{self.name}@{config_fingerprint(self.model.config)}+prompt:{self.prompt.fingerprint()}"

    @property
    def num_layers(self) -> int:
        return int(self._text_config.num_hidden_layers)

    # ------------------------------------------------------------------ scoring
    def _label_tokens(self, n: int) -> list[list[int]]:
        if n not in self._label_cache:
            labels = [self.tokenizer.encode(str(i), add_special_tokens=False) for i in range(1, n + 1)]
            if any(not 1 <= len(t) <= 2 for t in labels):
                raise ValueError(f"index labels 1..{n} must be one or two tokens with this tokenizer, got {labels}")
            prefixes = {t[0] for t in labels if len(t) == 2}
            if len(prefixes) > 1:
                raise ValueError(
                    f"n={n} needs index labels with {len(prefixes)} different first tokens; one pass can score "
                    f"only one shared prefix; use at most {self.max_images} images"
                )
            self._label_cache[n] = labels
        return self._label_cache[n]

    def _check_n(self, n: int) -> None:
        if not 2 <= n <= self.max_images:
            raise ValueError(
                f"the number of images must be between 2 and {self.max_images}, got {n}; "
                "rerank fewer candidates (retrieve with a smaller top-k)"
            )

    @contextlib.contextmanager
    def _attn(self, name: str) -> Iterator[None]:
        old = self._text_config._attn_implementation
        self._text_config._attn_implementation = name
        try:
            yield
        finally:
            self._text_config._attn_implementation = old

    def _run(self, query: str, images: Sequence[Any], capture: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        n = len(images)
        self._check_n(n)
        labels = self._label_tokens(n)
        prep = self.build_inputs(query, images)
        prefix = next((t[0] for t in labels if len(t) == 2), None)
        inputs = dict(prep.model_inputs)
        keep = 1
        if prefix is not None:  # append the shared first token: p(second | prefix) from the same pass
            pad = torch.tensor([[prefix]], dtype=inputs["input_ids"].dtype)
            inputs["input_ids"] = torch.cat([inputs["input_ids"], pad], dim=1)
            inputs["attention_mask"] = torch.cat([inputs["attention_mask"], torch.ones_like(pad)], dim=1)
            if "mm_token_type_ids" in inputs:
                inputs["mm_token_type_ids"] = torch.cat(
                    [inputs["mm_token_type_ids"], torch.zeros_like(pad, dtype=inputs["mm_token_type_ids"].dtype)], dim=1
                )
            keep = 2
        device = next(self.model.parameters()).device
        inputs = {k: v.to(device) for k, v in inputs.items()}
        evidence = None
        with torch.inference_mode():
            if capture:
                with self._attn(self._capture_name), AttentionRowCapture([prep.answer_position]) as cap:
                    out = self.model(**inputs, logits_to_keep=keep, use_cache=False)
                rows = cap.rows()[:, 0, 0, :].float().cpu()  # [L, K]
                if rows.shape[0] != self.num_layers:
                    raise RuntimeError(f"captured {rows.shape[0]} layers, expected {self.num_layers}")
                evidence = torch.stack([rows[:, s:e].sum(dim=1) for s, e in prep.image_spans], dim=1)
            else:
                with self._attn("sdpa"):
                    out = self.model(**inputs, logits_to_keep=keep, use_cache=False)
        logp = torch.log_softmax(out.logits[0].double().cpu(), dim=-1)  # [keep, V]
        first = logp[0]
        scores = torch.empty(n, dtype=torch.float64)
        if prefix is not None:
            second = logp[1]
            conts = [t[1] for t in labels if len(t) == 2]
            stop = torch.log1p(-second[conts].exp().sum().clamp(max=1 - 1e-12))
        for i, t in enumerate(labels):
            if len(t) == 2:
                scores[i] = first[t[0]] + second[t[1]]
            elif prefix is not None and t[0] == prefix:
                scores[i] = first[t[0]] + stop  # "1" followed by anything but a continuation digit
            else:
                scores[i] = first[t[0]]
        return scores, evidence

    def score(self, query: str, images: Sequence[Any]) -> ForwardResult:
        """One forward pass: label log-probs ``[N]`` and attention evidence ``[L, N]``.

        Raises:
            ValueError: if ``N`` is outside ``[2, max_images]``.
        """
        with self._lock:
            scores, evidence = self._run(query, images, capture=True)
        return ForwardResult(logits=scores.float(), evidence=evidence)

    def vanilla_logits(self, query: str, images: Sequence[Any]) -> torch.Tensor:
        """Label log-probs from a plain SDPA forward (no capture): the vanilla cost baseline."""
        with self._lock:
            return self._run(query, images, capture=False)[0].float()
