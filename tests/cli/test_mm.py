"""``posfair mm-eval`` user errors: ``posfair CMD: error: ...``, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llamaindex_posfair.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    from llamaindex_posfair.multimodal.tiny import write_synthetic_image_folder

    root = tmp_path_factory.mktemp("images")
    write_synthetic_image_folder(root, count=6, size=32)
    return root


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]


def test_missing_folder_is_a_user_error(tmp_path, capsys):
    assert main(["mm-eval", str(tmp_path / "nope")]) == 2
    line = _error_line(capsys)
    assert line.startswith("posfair mm-eval: error: captions file ") and "pass --captions NAME" in line


def test_missing_state_is_refused_instead_of_silently_refitting(image_dir, tmp_path, capsys):
    assert main(["mm-eval", str(image_dir), "--mm-calibration", str(tmp_path / "cal.safetensors")]) == 2
    assert _error_line(capsys).startswith(
        f"posfair mm-eval: error: --mm-calibration {str(tmp_path / 'cal.safetensors')!r}"
    )


def test_unknown_method_is_refused_before_the_model_loads(image_dir, capsys, monkeypatch):
    import llamaindex_posfair.multimodal.tiny as tiny

    monkeypatch.setattr(tiny, "build_tiny_adapter", lambda *a, **k: pytest.fail("model loaded"))
    assert main(["mm-eval", str(image_dir), "--methods", "vanilla,bogus"]) == 2
    assert _error_line(capsys).startswith("posfair mm-eval: error: --methods: unknown method(s) ['bogus']")


def test_state_fitted_for_another_model_is_a_user_error(image_dir, tmp_path, capsys):
    from llamaindex_posfair.multimodal.calibrator import AttentionGuidedCalibrator
    from research.multimodal.simulator import SimulatedMLLM, make_samples

    state = AttentionGuidedCalibrator().fit(SimulatedMLLM(), make_samples(2, 2, seed=0))
    path = state.save(tmp_path / "sim.safetensors")
    assert main(["mm-eval", str(image_dir), "--n", "2", "--mm-calibration", str(path), "--test-samples", "1"]) == 2
    line = _error_line(capsys)
    assert line.startswith("posfair mm-eval: error: calibration state was fitted for model 'simulated-mllm")


@pytest.mark.parametrize("flag,value", [("--n", "1"), ("--test-samples", "0"), ("--n", "two")])
def test_bad_numbers_are_argparse_errors(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["mm-eval", "imgs", flag, value])
    assert exit_info.value.code == 2
    assert _error_line(capsys).startswith(f"posfair mm-eval: error: argument {flag}: expected an integer >= ")


def test_console_prints_one_line_without_traceback(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "llamaindex_posfair.cli", "mm-eval", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"posfair mm-eval: error: captions file {str(tmp_path / 'nope' / 'captions.json')!r} not found; "
        "pass --captions NAME for another file name"
    ]
