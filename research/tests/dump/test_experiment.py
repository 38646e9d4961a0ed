"""The controls experiment's pieces: arm names, the stored-layout system, the comparison row."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from llamaindex_posfair.eval.metrics import summarize
from research.dump.experiment import comparison_row, layout_system, nodes_per_passage, parse_arms
from research.eval.harness.systems import EncodeCache


def test_arms_parse_into_train_dump_flags():
    arms = parse_arms("plain, full-k4,random_prefix-k2")
    assert [a.cli_args() for a in arms] == [
        ["--mode", "plain"],
        ["--mode", "full", "--num-tokens", "4"],
        ["--mode", "random_prefix", "--num-tokens", "2"],
    ]


@pytest.mark.parametrize("text", ["full", "bogus-k4", "full-k0", ""])
def test_an_invalid_arm_is_refused(text):
    with pytest.raises(ValueError, match="arm|at least one"):
        parse_arms(text)


def test_store_layout_system_finds_each_passage_through_qdrant(fake_encoder_factory):
    docs = [
        "Honeybees dance to show the hive where flowers grow. Bees make honey from nectar.",
        "The moon pulls the oceans into tides. Sailors watch the tide tables every day.",
        "Bread rises because yeast makes gas. Bakers knead the dough before baking.",
    ]
    queries = ["the hive where flowers", "watch the tide tables every", "knead the dough before"]
    system = layout_system("layout", fake_encoder_factory(dimension=64, max_length=64))
    scores = system.score(EncodeCache(docs, queries))
    assert scores.shape == (3, 3) and np.argmax(scores, axis=1).tolist() == [0, 1, 2]
    assert nodes_per_passage(system) == 1.0


def _result(values: dict[str, float], groups: dict[str, str]):
    return SimpleNamespace(per_query=values, ndcg=summarize(values, groups, ("begin", "end")))


def test_comparison_row_reports_harmonic_psi_and_a_paired_interval():
    groups = {f"q{i}": ("begin" if i < 4 else "end") for i in range(8)}
    base = _result({f"q{i}": (1.0 if i < 4 else 0.5) for i in range(8)}, groups)
    better = _result({f"q{i}": 1.0 for i in range(8)}, groups)
    row = comparison_row("better", better, base, None, groups, ("begin", "end"))
    assert row["harmonic"] == 100.0 and row["PSI"] == 0.0 and row["nDCG@10 end"] == 100.0
    assert row["ΔH vs base [95% CI]"] == "+33.3 [+33.3, +33.3]" and row["ΔH vs plain [95% CI]"] == "–"
