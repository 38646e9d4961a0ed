"""Named calibration variants: valid configs over the base, "all layers" from the encoder's depth."""

from __future__ import annotations

import numpy as np
import pytest

from llamaindex_posfair.calibration.config import CalibrationConfig
from research.eval.sweep.variants import ALL_LAYERS, VARIANTS, resolve_variant, variant_configs


def test_variants_are_valid_configs_over_the_base():
    cfgs = variant_configs(6)
    assert list(cfgs) == list(VARIANTS)
    assert cfgs["equal baskets"] == CalibrationConfig(basket_layout="equal")
    assert cfgs["documents only"].calibrate_queries is False
    assert variant_configs(6, base={"basket_size": 256})["equal baskets"].basket_size == 256


@pytest.mark.parametrize("depth", [2, 6, 12])
def test_all_layers_means_every_layer_of_the_encoder(depth):
    assert variant_configs(depth)["all layers λ=0.3"].layers == tuple(range(depth))
    assert resolve_variant({"layers": ALL_LAYERS}, depth) == {"layers": tuple(range(depth))}


def test_num_layers_must_be_positive():
    with pytest.raises(ValueError, match="num_layers must be a positive integer .* got 0"):
        variant_configs(0)


def test_all_layers_variant_runs_on_a_three_layer_model(tiny_qwen3_path):
    from llamaindex_posfair.encoders.encoder import PosFairEncoder

    enc = PosFairEncoder(tiny_qwen3_path, calibration=None, max_length=64)
    assert enc.num_layers == 3
    cfg = variant_configs(enc.num_layers, base={"basket_size": 4})["all layers λ=0.3"]  # several baskets
    vanilla = enc.encode_documents(["a river carried silt past old mills toward the sea"], calibration=None)
    calibrated = enc.encode_documents(["a river carried silt past old mills toward the sea"], calibration=cfg)
    assert calibrated.shape == vanilla.shape
    assert not np.allclose(calibrated, vanilla)  # the variant reaches the model, on all of its 3 layers
