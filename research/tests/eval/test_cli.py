"""``python -m research.eval`` user errors: one line on stderr, exit status 2, no traceback; selection held apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from research.eval.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m research.eval: error: ") and err.count("\n") == 1
    assert "Traceback" not in err
    return err


def test_selecting_on_the_reported_split_is_refused(capsys):
    err = _error(capsys, ["--split", "test", "--select-split", "test"])
    assert "--select-split 'test' is the reported --split 'test'" in err and "--no-grid" in err


def test_in_sample_selection_is_no_longer_offered(capsys):
    assert "--no-grid" in _error(capsys, ["--select-split", "none"])


def test_a_loader_that_ignores_the_split_cannot_make_selection_in_sample(capsys, monkeypatch):
    from research.eval.benchmarks import loaders

    real = loaders.load_benchmark
    monkeypatch.setattr(loaders, "load_benchmark", lambda fmt, path, split="test", **kw: real(fmt, path, "test"))
    err = _error(capsys, ["--max-queries", "3"])
    assert "shares 3 of the 3 reported queries" in err


def test_a_split_the_data_cannot_provide_is_a_user_error(capsys):
    err = _error(capsys, ["--format", "fineweb-posq", "--data", str(FIXTURES / "fineweb_posq.jsonl")])
    assert "load_fineweb_posq: split='test' was asked for, but" in err and "single file" in err


def test_a_missing_benchmark_folder_is_a_user_error(capsys, tmp_path):
    assert "is not a folder" in _error(capsys, ["--format", "beir", "--data", str(tmp_path / "nope")])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--layer-sets", "last,top"],
            'a layer set in --layer-sets must be "last", "last_half" or layer indices joined by "+" such as 3+4+5; '
            "got 'top'",
        ),
        (["--encode-batch-size", "0"], "expected an integer >= 1, got 0"),
        (["--layer-sets", "last;4,5"], "argument --layer-sets"),
    ],
)
def test_bad_flags_exit_2_with_one_error_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "python -m research.eval: error: " in err and message in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["--batch-size", "8"], ["--layers", "last"]])
def test_renamed_flags_are_gone(capsys, argv):
    """--batch-size is now --encode-batch-size; eval's grid of layer sets is --layer-sets."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert f"error: unrecognized arguments: {' '.join(argv)}" in capsys.readouterr().err
