"""The select-on-dev, report-on-test protocol on the fake encoder with a planted primacy bias (fast)."""

from __future__ import annotations

from types import SimpleNamespace as N

import pytest

from llamaindex_posfair.calibration.config import CalibrationConfig
from research.eval.benchmarks.data import PositionBenchmark
from research.eval.benchmarks.splits import HeldApartError, check_held_apart
from research.eval.sweep.grid import SweepGrid
from research.eval.sweep.protocol import (
    Protocol,
    SelectionSpace,
    combine_variants,
    grid_caption,
    summary_caption,
)
from research.eval.sweep.variants import variant_configs
from research.tests.eval.harness.test_systems_runner import _bench


def _splits() -> tuple[PositionBenchmark, PositionBenchmark]:
    """Disjoint queries over one corpus: q0-q5 select ("dev"), q6-q11 report ("test")."""
    whole = _bench()
    ids = list(whole.query_ids)
    dev = whole.subset(ids[:6], name="toy/dev")
    test = whole.subset(ids[6:], name="toy/test")
    return (
        PositionBenchmark(**{**dev.__dict__, "meta": {"split": "dev"}}),
        PositionBenchmark(**{**test.__dict__, "meta": {"split": "test"}}),
    )


DEFAULT = CalibrationConfig(strength=0.2)  # too weak to remove the planted bias on the toy benchmark


def _protocol(**kw) -> Protocol:
    space = SelectionSpace(
        SweepGrid(basket_sizes=(128,), strengths=(0.2, 1.0), layers=("last_half",)),
        variants={"documents only": CalibrationConfig(strength=0.2, calibrate_queries=False)},
        mix_alphas=(0.0, 0.5, 1.0),
    )
    return Protocol(default=DEFAULT, default_label="paper default", selection=space, **kw)


def test_selection_runs_on_the_selection_split_only(fake_encoder):
    dev, test = _splits()
    outcome = _protocol().run(fake_encoder, test, dev)
    record = outcome.selection
    assert {r.benchmark for r in [*record.results, *record.mix]} == {"toy/dev"}
    assert {r.benchmark for r in outcome.results} == {"toy/test"}
    assert [r.name for r in record.grid] == ["B=128 λ=0.2 last_half", "B=128 λ=1 last_half"]
    # strength 1 removes the planted bias: it is chosen, and the mix picks the calibrated side alone
    assert record.best_grid.name == "B=128 λ=1 last_half" and record.best_grid.ndcg.harmonic == 1.0
    assert record.alpha == 0.0 and record.mixed.name == "B=128 λ=1 last_half"
    assert record.default is record.grid[0]  # the paper default is a grid point
    assert record.best_variant.name == "documents only" and record.combination == ()


def test_reported_systems_name_the_selection_split(fake_encoder):
    dev, test = _splits()
    names = [
        r.name
        for r in _protocol(fixed={"preset p": CalibrationConfig(strength=0.7)}).run(fake_encoder, test, dev).results
    ]
    assert names == [
        "vanilla",
        "paper default",
        "best grid (dev-selected) B=128 λ=1 last_half",
        "best variant (dev-selected): documents only",
        "preset p",
        "mix α=0·vanilla + 1·(B=128 λ=1 last_half)",
    ]


def test_fixed_configs_already_reported_are_not_repeated(fake_encoder):
    dev, test = _splits()
    outcome = _protocol(fixed={"preset same": DEFAULT}).run(fake_encoder, test, dev)
    assert "preset same" not in [r.name for r in outcome.results]


def test_the_protocol_refuses_to_select_on_the_reported_data(fake_encoder):
    _dev, test = _splits()
    with pytest.raises(HeldApartError, match=r"shares 6 of the 6 reported queries"):
        _protocol().run(fake_encoder, test, test)


def test_renumbered_copies_of_the_reported_queries_are_caught():
    """A loader that ignores ``split`` and numbers rows per file returns the same queries under other ids."""
    dev, test = _splits()
    renamed = PositionBenchmark(
        name="toy/dev",
        corpus=test.corpus,
        queries={f"x{q}": t for q, t in test.queries.items()},
        qrels={f"x{q}": r for q, r in test.qrels.items()},
        groups={f"x{q}": g for q, g in test.groups.items()},
    )
    with pytest.raises(HeldApartError, match="held-apart split"):
        check_held_apart(renamed, test)
    check_held_apart(dev, test)  # disjoint queries over a shared corpus are fine


def test_selection_plan_and_benchmark_come_together(fake_encoder):
    _dev, test = _splits()
    with pytest.raises(ValueError, match="exactly when the protocol has a selection space"):
        _protocol().run(fake_encoder, test)
    plain = Protocol(default=DEFAULT).run(fake_encoder, test)
    assert plain.selection is None and [r.name for r in plain.results] == ["vanilla", "paper default"]


def test_mix_alphas_are_checked():
    with pytest.raises(ValueError, match=r"mix_alphas must lie in \[0, 1\], got 1.5"):
        SelectionSpace(SweepGrid(), mix_alphas=(0.5, 1.5))


def test_combination_adds_the_variants_that_beat_the_paper_default_in_order_of_gain():
    def res(name, h):
        return N(name=name, ndcg=N(harmonic=h))

    best = CalibrationConfig(basket_size=256, strength=0.7)
    var = [
        res("equal baskets", 0.25),
        res("equal baskets B=64", 0.30),
        res("length-weighted baskets", 0.21),
        res("documents only", 0.10),
    ]
    variants = variant_configs(6)
    labels, cfg = combine_variants(best, res("paper", 0.20), var, variants, CalibrationConfig())
    # "equal baskets B=64" helped most but sets B: skipped; "documents only" hurt: left out
    assert labels == ["equal baskets", "length-weighted baskets"]
    assert cfg == CalibrationConfig(basket_size=256, strength=0.7, basket_layout="equal", basket_weighting="length")
    assert combine_variants(best, res("paper", 0.5), var, variants, CalibrationConfig()) is None
    assert combine_variants(best, None, var, variants, CalibrationConfig()) is None


def test_captions_name_the_selection_benchmark(fake_encoder):
    dev, test = _splits()
    outcome = _protocol().run(fake_encoder, test, dev)
    assert "on `toy/dev` (selection split)" in grid_caption(outcome.selection)
    assert "α=0 H=100.0" in grid_caption(outcome.selection)
    caption = summary_caption(test, "fake", 512, 20, outcome.selection)
    assert caption.startswith("`toy/test` (6 queries, 12 passages, groups begin=2, middle=2, end=2)")
    assert caption.endswith("Best grid point chosen by harmonic mean on `toy/dev`.")
    assert "Best grid point" not in summary_caption(test, "fake", 512, 20, None)
