"""The default-pipeline sweep chooses on the selection split only, by its stated rule, and reports on the other."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from qdrant_client import QdrantClient

from llamaindex_posfair.eval.metrics import summarize
from qdrant_tools.subchunks import SubchunkConfig
from research.default_pipeline.protocol import DefaultPipelineGrid, DefaultPipelineProtocol, Scored, Setting, choose
from research.default_pipeline.system import DefaultPipelineStats, StorageStats
from research.eval.benchmarks.data import PositionBenchmark
from research.eval.harness.runner import SystemResult

SMALL, LARGE = SubchunkConfig(32, 0), SubchunkConfig(128, 0)


def _scored(setting: Setting, groups: dict[str, float], n_sub: int = 4, bench: str = "dev") -> Scored:
    values = {f"q{i}": v for i, v in enumerate(groups.values())}
    summary = summarize(values, {f"q{i}": g for i, g in enumerate(groups)})
    result = SystemResult(setting.label(), "default-pipeline", {}, bench, summary, {10: 1.0}, 1.0, 0.0, values)
    storage = StorageStats(nodes=10, passages=10, dim=4, dense_per_node=1, subchunk_vectors=10 * n_sub)
    return Scored(setting, result, DefaultPipelineStats(storage, 1.0, 1.0, 1.0))


def test_choose_prefers_fewer_bytes_within_the_tolerance():
    big = _scored(Setting(510, SMALL, "paper"), {"a": 0.80, "b": 0.80}, n_sub=12)
    small = _scored(Setting(510, LARGE, "paper"), {"a": 0.795, "b": 0.795}, n_sub=4)
    assert choose([big, small], tolerance=0.01).setting == small.setting
    assert choose([big, small], tolerance=0.001).setting == big.setting


def test_choose_breaks_equal_storage_by_lower_psi():
    fair = _scored(Setting(510, SMALL, "paper", node_weight=0.1), {"a": 0.75, "b": 0.77})
    unfair = _scored(Setting(510, SMALL, "paper"), {"a": 0.66, "b": 0.99})
    assert unfair.harmonic > fair.harmonic
    assert choose([unfair, fair], tolerance=0.05).setting == fair.setting


def test_choose_breaks_identical_results_by_calibration_off():
    calibrated = _scored(Setting(510, SMALL, "paper"), {"a": 0.9, "b": 0.8})
    plain = _scored(Setting(510, SMALL, "off", prefetch_limit=20), {"a": 0.9, "b": 0.8})
    assert choose([calibrated, plain]).setting == plain.setting
    assert choose([plain, calibrated]).setting == plain.setting


class Planted(DefaultPipelineProtocol):
    """Scores are planted: on dev the small budget wins, on test the large one (a dev/test disagreement)."""

    calls: list[tuple[str, Setting]]

    def score(self, bench, settings, stage):
        self.calls = getattr(self, "calls", []) + [(bench.name, s) for s in settings]
        dev = bench.name == "dev"
        out = []
        for s in settings:
            good = (s.subchunks == SMALL) == dev and s.subchunks is not None
            out.append(replace(_scored(s, {"a": 0.9 if good else 0.5, "b": 0.9 if good else 0.5}), stage=stage))
        return out


def _bench(name: str, query: str) -> PositionBenchmark:
    return PositionBenchmark(name, {"d": "text"}, {"q": query}, {"q": {"d": 1}}, {"q": "a"})


def test_the_sweep_selects_on_dev_only_and_reports_the_choice_on_test():
    grid = DefaultPipelineGrid(
        node_tokens=(510,), subchunk_tokens=(32, 128), subchunk_overlaps=(0,), calibrations=("paper",)
    )
    protocol = Planted(encoder_for=lambda n, c: None, grid=grid)
    outcome = protocol.run(_bench("dev", "dev question"), _bench("test", "test question"))
    assert outcome.chosen.setting.subchunks == SMALL  # dev's winner, although LARGE wins on test
    reported = [s.setting for s in outcome.reported]
    assert reported[0] == protocol.shipped and outcome.chosen.setting in reported
    assert all(s.subchunks != LARGE for s in reported)
    on_test = {s for b, s in protocol.calls if b == "test"}
    assert on_test == set(reported)  # nothing was swept on test


def test_a_selection_split_sharing_queries_with_the_report_is_refused():
    from research.eval.benchmarks.splits import HeldApartError

    protocol = Planted(encoder_for=lambda n, c: None, grid=DefaultPipelineGrid(node_tokens=(510,)))
    with pytest.raises(HeldApartError):
        protocol.run(_bench("dev", "same question"), _bench("test", "same question"))


def test_finalists_get_every_calibration_prefetch_and_weight():
    grid = DefaultPipelineGrid(calibrations=("off", "paper"), prefetch_limits=(20, 100), node_weights=(0.0, 0.3))
    settings = grid.finalist_settings(Setting(510, SMALL, "paper", 100, 0.0))
    got = {(s.calibration, s.prefetch_limit, s.node_weight) for s in settings}
    assert got == {(c, p, 0.0) for c in ("off", "paper") for p in (20, 100)} | {("off", 100, 0.3), ("paper", 100, 0.3)}


def test_a_tiny_real_sweep_runs_through_the_store(fake_encoder_factory):
    """End to end on the fake encoder: every stage goes through ingestion and search."""
    enc = fake_encoder_factory(dimension=64, calibration=None)
    words = ["alpha", "beta", "gamma", "delta", "zebra", "quail", "heron", "otter", "lynx", "crane"]
    rng = np.random.default_rng(0)

    def bench(name: str, seed: int) -> PositionBenchmark:
        docs = {f"{name}{i}": ". ".join(" ".join(rng.choice(words, 4)) for _ in range(5)) + "." for i in range(6)}
        queries = {f"q{i}": docs[d].split(". ")[i % 5] + f" {name}{seed}" for i, d in enumerate(docs)}
        qrels = {f"q{i}": {d: 1} for i, d in enumerate(docs)}
        groups = {q: ("begin", "end")[i % 2] for i, q in enumerate(queries)}
        return PositionBenchmark(name, docs, queries, qrels, groups)

    grid = DefaultPipelineGrid(
        node_tokens=(12,), subchunk_tokens=(8,), subchunk_overlaps=(0,), calibrations=("off",),
        prefetch_limits=(3, 6), node_weights=(0.0, 0.5), finalists=1,
    )  # fmt: skip
    protocol = DefaultPipelineProtocol(lambda n, c: enc, grid, client_factory=lambda folder: QdrantClient(":memory:"))
    outcome = protocol.run(bench("dev", 1), bench("test", 2))
    assert outcome.reported[0].setting.subchunks is None
    assert {s.stage for s in outcome.sweep} == {"layout", "finalist"}
    exact = next(s for s in outcome.reported if s.setting.scoring == "exact")
    assert exact.stats.storage.subchunk_vectors > 0
