"""Named calibration presets: what each one does to embeddings; the paper's is ``CalibrationConfig()``, and an
encoder without a calibration is plain."""

from __future__ import annotations

import numpy as np
import pytest

from llamaindex_posfair.calibration import PRESETS, preset


@pytest.fixture(scope="module")
def embeddings(tiny_bert_path, mixed_texts):
    """Document embeddings of the tiny BERT per setting: encoder default, plain, ``CalibrationConfig()``, each preset."""
    from llamaindex_posfair import CalibrationConfig, PosFairEncoder

    def encode(**kwargs):
        return PosFairEncoder(tiny_bert_path, device="cpu", **kwargs).encode_documents(mixed_texts, batch_size=5)

    out = {
        "encoder default": encode(),
        "plain": encode(calibration=None),
        "config": encode(calibration=CalibrationConfig()),
    }
    out.update({f"preset {name}": encode(calibration=config) for name, config in PRESETS.items()})
    return out


def test_paper_preset_is_the_published_calibration_config(embeddings):
    np.testing.assert_array_equal(embeddings["preset paper"], embeddings["config"])


def test_an_encoder_without_a_calibration_is_plain(embeddings):
    np.testing.assert_array_equal(embeddings["encoder default"], embeddings["plain"])


@pytest.mark.parametrize(("calibration", "expected"), [("unset", "plain"), ("paper", "preset paper")])
def test_the_llamaindex_default_is_plain_and_calibrates_when_asked(
    calibration, expected, tiny_bert_path, mixed_texts, embeddings
):
    from llamaindex_posfair import PosFairEmbedding

    given = {} if calibration == "unset" else {"calibration": preset(calibration)}
    component = PosFairEmbedding(model_name=tiny_bert_path, device="cpu", embed_batch_size=5, **given)
    got = np.asarray(component.get_text_embedding_batch(mixed_texts))
    np.testing.assert_allclose(got, embeddings[expected], atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_calibrates(name, embeddings):
    assert np.abs(embeddings[f"preset {name}"] - embeddings["plain"]).max() > 1e-5


def test_minilm_preset_changes_embeddings_against_the_paper_default(embeddings):
    diff = np.abs(embeddings["preset posfair-minilm"] - embeddings["preset paper"]).max(axis=1)
    assert diff[0] == 0  # a two-word query is one basket under both: left alone
    assert diff.max() > 1e-5


def test_minilm_preset_applies_its_own_basket_size(embeddings):
    """``mixed_texts[4]`` (~180 tokens) is two baskets at the paper's B=128, one (left alone) at the preset's B=256."""
    plain, paper, tuned = (embeddings[k][4] for k in ("plain", "preset paper", "preset posfair-minilm"))
    assert np.abs(paper - plain).max() > 1e-5
    np.testing.assert_allclose(tuned, plain, atol=1e-7, rtol=0)


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown calibration preset 'minilm'; known presets: paper, posfair-minilm"):
        preset("minilm")
