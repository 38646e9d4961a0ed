"""``posfair eval`` end to end on the shipped benchmark with the real bundled MiniLM (slow)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llamaindex_posfair.cli import build_parser, main


def test_eval_subcommand_is_registered_with_defaults():
    args = build_parser().parse_args(["eval", "--calib-option", "basket_layout=equal", "--layer-sets", "last;4,5"])
    assert args.handler.__name__ == "run"
    assert args.basket_sizes == (64, 128, 256)
    assert args.strengths == (0.3, 0.5, 0.7, 1.0)
    assert args.layer_sets == ("last", (4, 5))  # ";" separates sets, "," joins the indices of one set
    assert build_parser().parse_args(["eval", "--layer-sets", "last_half;3+4"]).layer_sets == ("last_half", (3, 4))
    assert build_parser().parse_args(["eval"]).layer_sets == ("last_half",)
    assert build_parser().parse_args(["eval", "--default-layers", "3,4,5"]).default_layers == (3, 4, 5)
    assert build_parser().parse_args(["eval", "--encode-batch-size", "8"]).encode_batch_size == 8
    assert args.chunk_sizes == (64, 128, 256) and args.multivector_tokens == 128
    assert args.preset == "posfair-minilm" and args.fusion_alphas[0] == 0.0 and args.fusion_alphas[-1] == 1.0
    assert args.calib_option == [("basket_layout", "equal")]
    assert args.split == "test" and args.select_split == "dev" and args.max_length == 512


@pytest.mark.slow
def test_eval_end_to_end_real_minilm(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    rc = main(
        [
            "eval",
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
            "--out",
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
        "fusion α=",
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
    from llamaindex_posfair.eval.variants import VARIANTS

    systems = [g["system"] for g in grid]
    assert systems[:2] == ["vanilla", "B=128 λ=1 last"]
    assert systems[2 : 2 + len(VARIANTS)] == list(VARIANTS)
    assert systems[2 + len(VARIANTS) :] == [f"fusion α={i / 10:g}" for i in range(11)]
    assert grid[0]["benchmark"] == "needle-prose/dev"
    meta = json.loads((out / "run.json").read_text())
    assert meta["truncated_passages"] == 0 and meta["max_length"] == 512
    assert len(list((tmp_path / "emb").glob("*.npy"))) >= 4  # resumable: embeddings kept on disk
    per_query = list(csv.DictReader(Path(out / "per_query.csv").read_text().splitlines()))
    assert len(per_query) == 2 * len(rows)
    assert "ΔH vs vanilla [95% CI]" in (out / "summary.md").read_text()
    for png in ("ndcg_by_group.png", "psi_vs_harmonic.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
