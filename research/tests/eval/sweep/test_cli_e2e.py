"""``python -m research.eval`` end to end on the shipped benchmark with the real bundled MiniLM (slow)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llamaindex_posfair.calibration import CalibrationConfig, preset
from research.eval.benchmarks.loaders import load_shipped
from research.eval.cli import build_parser, main


def _defaults():
    return build_parser().parse_args([])


def test_layer_sets_and_calibration_options_parse():
    args = build_parser().parse_args(["--calib-option", "basket_layout=equal", "--layer-sets", "last,4+5"])
    assert args.layer_sets == ("last", (4, 5))  # "," separates sets, "+" joins the indices of one set
    assert build_parser().parse_args(["--layer-sets", "last_half,3+4"]).layer_sets == ("last_half", (3, 4))
    assert args.calib_option == [("basket_layout", "equal")]
    assert build_parser().parse_args(["--basket-sizes", "64,128"]).basket_sizes == (64, 128)


def test_default_system_is_the_paper_preset():
    args = _defaults()
    default = CalibrationConfig(
        basket_size=args.default_basket_size, strength=args.default_strength, layers=args.default_layers
    )
    assert default == preset("paper")


def test_default_grid_contains_the_default_point():
    args, paper = _defaults(), preset("paper")
    assert (
        paper.basket_size in args.basket_sizes and paper.strength in args.strengths and paper.layers in args.layer_sets
    )


def test_default_protocol_never_selects_on_the_reported_split():
    args = _defaults()
    assert args.select_split not in (args.split, "none")


def test_default_preset_is_known_and_differs_from_the_default_system():
    assert preset(_defaults().preset) != preset("paper")


def test_default_mix_sweep_includes_both_pure_systems():
    alphas = _defaults().mix_alphas
    assert (alphas[0], alphas[-1]) == (0.0, 1.0) and list(alphas) == sorted(alphas)


def test_default_window_and_pieces_fit_the_shipped_benchmark(minilm_tokenizer):
    """No shipped passage is truncated, and chunks/segments fit in the window."""
    args = _defaults()
    corpus = [text for split in ("dev", "test") for text in load_shipped(split=split).corpus.values()]
    assert args.max_length >= max(len(minilm_tokenizer(text)["input_ids"]) for text in corpus)
    assert max(*args.chunk_sizes, args.multivector_tokens, args.segment_tokens) <= args.max_length


def test_default_rerank_depth_is_well_below_the_corpus():
    """At or near the corpus size the rerank would equal the calibrated system."""
    assert _defaults().rerank_k * 4 <= len(load_shipped(split="test").corpus)


@pytest.mark.slow
def test_eval_end_to_end_real_minilm(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    rc = main(
        [
            "--max-queries",
            "2",
            "--basket-sizes",
            "128",
            "--strengths",
            "0,1",
            "--layer-sets",
            "last",
            "--rerank-k",
            "2",
            "--out-dir",
            str(out),
            "--no-progress",
            "--cache-dir",
            str(tmp_path / "emb"),
        ]
    )
    assert rc == 0
    rows = list(csv.DictReader(Path(out / "summary.csv").read_text().splitlines()))
    names = [r["system"] for r in rows]
    assert names[0] == "vanilla" and names[1].startswith("default B=128 λ=0.5 last_half")
    assert any(n.startswith("Segment Embed Average") for n in names)
    assert any(n.startswith("rerank") for n in names)
    for prefix in (
        "chunk-max 64",
        "chunk-max 128",
        "chunk-max 256",
        "Qdrant MaxSim, independent",
        "Qdrant MaxSim, contextual 128-tok segments, vanilla",
        "Qdrant MaxSim, contextual 128-tok segments, paper default",
        "mix α=",
        "best variant",
    ):
        assert any(n.startswith(prefix) for n in names), prefix
    by_name = {r["system"]: r for r in rows}
    # independent-segment MaxSim through Qdrant is chunk-max over the same 128-token chunks
    mv = next(r for n, r in by_name.items() if n.startswith("Qdrant MaxSim, independent"))
    assert mv["harmonic"] == by_name["chunk-max 128 tok"]["harmonic"]
    assert (
        float(by_name["chunk-max 64 tok"]["vectors/passage"])
        > float(by_name["chunk-max 256 tok"]["vectors/passage"])
        > 1
    )
    assert float(by_name["vanilla"]["vectors/passage"]) == 1.0
    for r in rows:
        assert 0.0 <= float(r["harmonic"]) <= float(r["arithmetic"]) + 1e-9 <= 1.0 + 1e-9
        assert 0.0 <= float(r["psi"]) <= 1.0
    grid = list(csv.DictReader(Path(out / "grid.csv").read_text().splitlines()))
    from research.eval.sweep.variants import VARIANTS

    systems = [g["system"] for g in grid]
    assert systems[:2] == ["vanilla", "B=128 λ=1 last"]
    assert systems[2 : 2 + len(VARIANTS)] == list(VARIANTS)
    assert systems[2 + len(VARIANTS) :] == [f"mix α={i / 10:g}" for i in range(11)]
    assert grid[0]["benchmark"] == "needle-prose/dev"
    meta = json.loads((out / "run.json").read_text())
    assert meta["truncated_passages"] == 0 and meta["max_length"] == 512
    assert meta["command"].startswith("python -m research.eval --max-queries 2 --basket-sizes 128 ")
    assert len(list((tmp_path / "emb").rglob("*.npz"))) >= 4  # resumable: embeddings kept on disk (VectorMemo)
    per_query = list(csv.DictReader(Path(out / "per_query.csv").read_text().splitlines()))
    assert len(per_query) == 2 * len(rows)
    assert "ΔH vs vanilla [95% CI]" in (out / "summary.md").read_text()
    for png in ("ndcg_by_group.png", "psi_vs_harmonic.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
