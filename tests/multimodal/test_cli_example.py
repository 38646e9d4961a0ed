import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_cli_module_imports_nothing_heavy():
    import subprocess
    import sys

    code = "import sys, llamaindex_posfair.cli.mm; print('torch' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert res.stdout.strip() == "False"


def test_coco_hard_negatives_share_words(image_dir):
    from llamaindex_posfair.multimodal.coco import build_problems, load_captions

    pairs = load_captions(image_dir)
    probs = build_problems(pairs, 3, 4, negatives="hard", seed=0)
    assert all(p.n == 3 and 0 <= p.answer < 3 for p in probs)
    with pytest.raises(ValueError, match="negatives must be"):
        build_problems(pairs, 3, 1, negatives="adversarial")


@pytest.mark.slow
def test_example_runs_offline(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("image_rerank_example", ROOT / "examples" / "image_rerank.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--n", "4", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("p=") == 3  # top_n=3 reranked images printed
    assert (tmp_path / "calibration.safetensors").is_file()
