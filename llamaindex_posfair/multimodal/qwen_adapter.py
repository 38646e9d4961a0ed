"""Qwen2-VL / Qwen2.5-VL adapter (transformers), without torchvision.

The stock ``Qwen2VLProcessor`` cannot be constructed without torchvision
(its video processor needs it), so this adapter uses the PIL image
processor (``Qwen2VLImageProcessorPil``) directly and expands the image
tokens itself: each image becomes ``<|vision_start|>`` + ``t·h·w / merge²``
× ``<|image_pad|>`` + ``<|vision_end|>``, and ``mm_token_type_ids`` (1 on
image pads, required by transformers 5 for M-RoPE) is built alongside.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .mllm_adapter import MLLMAdapter, PreparedInputs, PromptTemplate

__all__ = ["QWEN_FAMILIES", "QwenVLAdapter"]

QWEN_FAMILIES = ("qwen2_vl", "qwen2_5_vl")


class QwenVLAdapter(MLLMAdapter):
    """Multi-image selection scorer for Qwen2-VL and Qwen2.5-VL.

    Args:
        model: ``Qwen2VLForConditionalGeneration`` or ``Qwen2_5_VLForConditionalGeneration``.
        tokenizer: the Qwen tokenizer (``<|image_pad|>`` must match ``config.image_token_id``).
        image_processor: a ``Qwen2VLImageProcessorPil`` (``max_pixels`` bounds tokens per image).
        name: model name for the identity recorded in calibration states.
        prompt: the :class:`~.mllm_adapter.PromptTemplate`.

    Raises:
        ValueError: if the model family is not Qwen2-VL/2.5-VL or the
            tokenizer's special-token ids disagree with the model config.

    Example:
        >>> adapter = QwenVLAdapter.from_pretrained("Qwen/Qwen2.5-VL-3B-Instruct")  # doctest: +SKIP
        >>> result = adapter.score("a red bus", [img1, img2, img3, img4])  # doctest: +SKIP
        >>> result.logits.shape, result.evidence.shape  # doctest: +SKIP
        (torch.Size([4]), torch.Size([36, 4]))
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        image_processor: Any,
        *,
        name: str | None = None,
        prompt: PromptTemplate | None = None,
    ) -> None:
        model_type = getattr(model.config, "model_type", None)
        if model_type not in QWEN_FAMILIES:
            raise ValueError(f"model must be one of {QWEN_FAMILIES}, got model_type={model_type!r}")
        cfg = model.config
        for token, attr in (
            ("<|image_pad|>", "image_token_id"),
            ("<|vision_start|>", "vision_start_token_id"),
            ("<|vision_end|>", "vision_end_token_id"),
        ):
            tid = tokenizer.convert_tokens_to_ids(token)
            if tid != getattr(cfg, attr):
                raise ValueError(
                    f"tokenizer maps {token} to {tid} but the model's {attr} is {getattr(cfg, attr)}; "
                    "use the tokenizer that ships with this model"
                )
        super().__init__(model, tokenizer, name=name, prompt=prompt)
        self.image_processor = image_processor
        self.merge_size = int(cfg.vision_config.spatial_merge_size)
        self._ids = {
            a: int(getattr(cfg, a)) for a in ("image_token_id", "vision_start_token_id", "vision_end_token_id")
        }

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        dtype: torch.dtype = torch.float32,
        device: str = "cpu",
        max_pixels: int = 448 * 448,
        prompt: PromptTemplate | None = None,
    ) -> QwenVLAdapter:
        """Load model, tokenizer and PIL image processor from a local folder or hub id."""
        from transformers import AutoConfig, AutoTokenizer
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        config = AutoConfig.from_pretrained(path)
        if config.model_type == "qwen2_vl":
            from transformers import Qwen2VLForConditionalGeneration as Model
        elif config.model_type == "qwen2_5_vl":
            from transformers import Qwen2_5_VLForConditionalGeneration as Model
        else:
            raise ValueError(f"{str(path)!r} is a {config.model_type!r} model; QwenVLAdapter handles {QWEN_FAMILIES}")
        model = Model.from_pretrained(path, dtype=dtype, attn_implementation="sdpa").to(device)
        tokenizer = AutoTokenizer.from_pretrained(path)
        processor = Qwen2VLImageProcessorPil.from_pretrained(path, max_pixels=max_pixels)
        return cls(model, tokenizer, processor, name=str(path), prompt=prompt)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def build_inputs(self, query: str, images: Sequence[Any]) -> PreparedInputs:
        n = len(images)
        p = self.prompt
        vis = self.image_processor(images=list(images), return_tensors="pt")
        grid = vis["image_grid_thw"]
        per_image = [int(g.prod()) // (self.merge_size**2) for g in grid]
        ids: list[int] = self._encode(
            f"<|im_start|>system\n{p.system}<|im_end|>\n<|im_start|>user\n" + p.preamble.format(query=query, n=n)
        )
        types: list[int] = [0] * len(ids)
        spans = []
        for k, count in enumerate(per_image):
            label = self._encode(p.image_label.format(index=k + 1, n=n))
            ids += label + [self._ids["vision_start_token_id"]]
            types += [0] * (len(label) + 1)
            spans.append((len(ids), len(ids) + count))
            ids += [self._ids["image_token_id"]] * count + [self._ids["vision_end_token_id"]]
            types += [1] * count + [0]
        tail = self._encode(p.instruction.format(n=n, query=query) + "<|im_end|>\n<|im_start|>assistant\n")
        ids += tail
        types += [0] * len(tail)
        input_ids = torch.tensor([ids], dtype=torch.long)
        return PreparedInputs(
            model_inputs={
                "input_ids": input_ids,
                "attention_mask": torch.ones_like(input_ids),
                "mm_token_type_ids": torch.tensor([types], dtype=torch.int32),
                "pixel_values": vis["pixel_values"],
                "image_grid_thw": grid,
            },
            image_spans=spans,
            answer_position=len(ids) - 1,
        )
