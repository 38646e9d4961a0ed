"""The calibration grid of the sweep (``eval/sweep/grid.py``)."""

from __future__ import annotations

import pytest

from research.eval.sweep.grid import SweepGrid, layers_label


def test_sweep_grid_skips_lambda_zero_and_validates():
    pytest.importorskip("pydantic")
    grid = SweepGrid()
    assert grid.size() == 3 * 4 * 2
    labels = [label for label, _ in grid.points()]
    assert "B=128 λ=0.5 last_half" in labels and not any("λ=0 " in label for label in labels)
    with pytest.raises(ValueError, match="strengths must lie in"):
        SweepGrid(strengths=(1.5,))
    with pytest.raises(ValueError, match="basket_sizes must be positive"):
        SweepGrid(basket_sizes=(0,))


def test_layers_label_names_named_and_indexed_layer_sets():
    assert layers_label("last_half") == "last_half"
    assert layers_label((3, 4, 5)) == "L3,4,5"
