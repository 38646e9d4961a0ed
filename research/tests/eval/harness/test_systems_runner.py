"""Systems, runner and report on a fake encoder with a planted primacy bias (fast, no model)."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from research.eval.benchmarks.data import PositionBenchmark
from research.eval.harness.plots import plot_groups
from research.eval.harness.runner import EvalConfig, evaluate_scores, run_eval
from research.eval.harness.systems import (
    DenseSystem,
    EncodeCache,
    RerankSystem,
    SegmentAverageSystem,
    segment_text,
)
from research.eval.sweep.report import format_markdown, plot_tradeoff, write_csv

FILLER = [f"filler{i}" for i in range(120)]


def _bench() -> PositionBenchmark:
    """12 passages of 120 shared filler words; doc j starts with ``leadj`` and hides ``needlej``
    at the start, middle or end. Query j repeats ``needlej`` and names ``lead(j+1)``, so with
    position-decayed weights a late needle loses to the next passage's lead word."""
    corpus, queries, qrels, groups = {}, {}, {}, {}
    for j in range(12):
        g = ("begin", "middle", "end")[j % 3]
        words = list(FILLER)
        words[0] = f"lead{j}"
        pos = {"begin": 2, "middle": 60, "end": 117}[g]
        words[pos] = f"needle{j}"
        corpus[f"d{j}"] = " ".join(words)
        queries[f"q{j}"] = f"needle{j} needle{j} lead{(j + 1) % 12}"
        qrels[f"q{j}"] = {f"d{j}": 1}
        groups[f"q{j}"] = g
    return PositionBenchmark("toy", corpus, queries, qrels, groups, ("begin", "middle", "end"))


def cal(strength: float, b: int = 128):
    return SimpleNamespace(strength=strength, basket_size=b, layers="last_half")


def test_segment_text_cuts_exact_substrings(fake_encoder):
    text = "one two  three four five"
    assert segment_text(text, fake_encoder.tokenizer, 2) == ["one two", "three four", "five"]
    with pytest.raises(ValueError, match="segment_tokens must be a positive integer, got 0"):
        segment_text(text, fake_encoder.tokenizer, 0)


def test_dense_scores_are_dot_products_and_cached(fake_encoder):
    b = _bench()
    cache = EncodeCache(list(b.corpus.values()), list(b.queries.values()))
    s = DenseSystem("vanilla", fake_encoder).score(cache)
    d = fake_encoder.encode_documents(list(b.corpus.values()))
    q = fake_encoder.encode_queries(list(b.queries.values()))
    np.testing.assert_allclose(s, q @ d.T, rtol=1e-6)
    n = cache.encoded_texts
    DenseSystem("again", fake_encoder).score(cache)
    assert cache.encoded_texts == n  # second system reused the embeddings


def test_planted_bias_shows_up_and_calibration_removes_it(fake_encoder):
    b = _bench()
    res = run_eval(
        b, [DenseSystem("vanilla", fake_encoder), DenseSystem("flat", fake_encoder, cal(1.0))], show_progress_bar=False
    )
    vanilla, flat = res
    assert vanilla.ndcg.groups["begin"] == 1.0
    # a late needle ranks 2nd, behind the passage whose lead word the query names: 1/log2(3)
    assert vanilla.ndcg.groups["middle"] == pytest.approx(1 / np.log2(3))
    assert vanilla.ndcg.groups["end"] == pytest.approx(1 / np.log2(3))
    assert vanilla.ndcg.psi == pytest.approx(1 - 1 / np.log2(3))
    assert flat.ndcg.groups == {"begin": 1.0, "middle": 1.0, "end": 1.0}
    assert flat.ndcg.psi == 0.0 and flat.ndcg.harmonic == 1.0
    assert flat.params == {"B": 128, "lambda": 1.0, "layers": "last_half"}


def test_rerank_only_reorders_first_stage_candidates(fake_encoder):
    b = _bench()
    cache = EncodeCache(list(b.corpus.values()), list(b.queries.values()))
    first = DenseSystem("vanilla", fake_encoder)
    rr = RerankSystem("rr", first, fake_encoder, cal(1.0), k=3)
    s = rr.score(cache)
    f = first.score(cache)
    for i in range(s.shape[0]):
        top = np.argsort(-f[i], kind="stable")[:3]
        assert set(np.argsort(-s[i], kind="stable")[:3]) == set(top)  # candidates first
        rest = np.argsort(-s[i], kind="stable")[3:]
        assert list(rest) == [j for j in np.argsort(-f[i], kind="stable") if j not in top]  # first-stage order
    full = RerankSystem("rr-all", first, fake_encoder, cal(1.0), k=12).score(cache)
    np.testing.assert_allclose(full, DenseSystem("flat", fake_encoder, cal(1.0)).score(cache), rtol=1e-6)


def test_segment_average_is_mean_of_segment_embeddings(fake_encoder):
    b = _bench()
    cache = EncodeCache(list(b.corpus.values())[:2], list(b.queries.values())[:1])
    s = SegmentAverageSystem("seg", fake_encoder, segment_tokens=40).score(cache)
    segs = segment_text(cache.docs[1], fake_encoder.tokenizer, 40)
    assert len(segs) == 3
    v = fake_encoder.encode_documents(segs).mean(axis=0)
    v /= np.linalg.norm(v)
    q = fake_encoder.encode_queries(cache.queries)[0]
    assert s[0, 1] == pytest.approx(float(q @ v), rel=1e-5)


def test_evaluate_scores_hand_checked():
    b = PositionBenchmark(
        "t",
        {"a": "x", "b": "y"},
        {"q1": "x", "q2": "y"},
        {"q1": {"a": 1}, "q2": {"b": 1}},
        {"q1": "begin", "q2": "end"},
        ("begin", "end"),
    )
    summary, recall, per_q = evaluate_scores(np.array([[1.0, 0.0], [1.0, 0.0]]), b, EvalConfig(k=10, recall_ks=(1,)))
    assert per_q["q1"] == 1.0
    assert per_q["q2"] == pytest.approx(1 / np.log2(3))
    assert summary.psi == pytest.approx(1 - 1 / np.log2(3))
    assert recall == {1: 0.5}


def test_report_writes_table_csv_and_plots(fake_encoder, tmp_path):
    b = _bench()
    res = run_eval(
        b,
        [
            DenseSystem("vanilla", fake_encoder),
            DenseSystem("B=128 λ=0.5", fake_encoder, cal(0.5)),
            DenseSystem("B=64 λ=1", fake_encoder, cal(1.0, 64)),
        ],
        show_progress_bar=False,
    )
    md = format_markdown(res, b.group_order, caption="cap")
    assert md.startswith("cap\n\n| system | nDCG@10 begin | nDCG@10 middle | nDCG@10 end | harmonic")
    assert f"| {100 * res[0].ndcg.groups['begin']:.1f} |" in md
    path = write_csv(res, b.group_order, tmp_path / "t.csv")
    rows = list(csv.DictReader(Path(path).read_text().splitlines()))
    assert [r["system"] for r in rows] == ["vanilla", "B=128 λ=0.5", "B=64 λ=1"]
    assert float(rows[0]["psi"]) == pytest.approx(res[0].ndcg.psi, abs=1e-4)
    p1 = plot_groups(res, b.group_order, tmp_path / "g.png")
    p2 = plot_tradeoff(res[1:], tmp_path / "t.png", reference=res[:1])
    for p in (p1, p2):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_disk_cache_resumes_without_encoding(fake_encoder, tmp_path):
    b = _bench()
    docs, queries = list(b.corpus.values()), list(b.queries.values())
    first = EncodeCache(docs, queries, cache_dir=str(tmp_path))
    s1 = DenseSystem("v", fake_encoder, cal(0.5)).score(first)
    assert first.encoded_texts == len(docs) + len(queries)
    second = EncodeCache(docs, queries, cache_dir=str(tmp_path))
    s2 = DenseSystem("v", fake_encoder, cal(0.5)).score(second)
    assert second.encoded_texts == 0
    np.testing.assert_array_equal(s1, s2)
    other = EncodeCache([*docs[:-1], "a passage no run has seen"], queries, cache_dir=str(tmp_path))
    s3 = DenseSystem("v", fake_encoder, cal(0.5)).score(other)
    assert other.encoded_texts == 1  # per text: the known passages come from disk, only the new one is embedded
    np.testing.assert_array_equal(s3[:, :-1], s1[:, :-1])
