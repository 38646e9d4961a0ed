"""``posfair train-dump`` user errors: ``posfair train-dump: error: ...``, exit 2, before any training."""

from __future__ import annotations

from llamaindex_posfair.cli import main


def test_missing_training_file_is_a_user_error(tmp_path, capsys):
    assert main(["train-dump", "--save-model", str(tmp_path / "out"), "--data", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("posfair train-dump: error: ") and "missing.jsonl" in err[-1]
    assert not (tmp_path / "out").exists()


def test_non_empty_output_folder_is_refused(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    assert main(["train-dump", "--save-model", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"posfair train-dump: error: --save-model {str(tmp_path / 'out')!r} exists and is not empty; choose a new folder"
    )


def test_invalid_setting_names_it(tmp_path, capsys):
    assert main(["train-dump", "--save-model", str(tmp_path / "out"), "--num-tokens", "0"]) == 2
    assert capsys.readouterr().err.startswith("posfair train-dump: error: ")


def test_missing_model_names_the_flag(tmp_path, capsys):
    missing = str(tmp_path / "no-model")
    assert main(["train-dump", "--save-model", str(tmp_path / "out"), "--model", missing, "--no-eval"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .startswith(f"posfair train-dump: error: --model {missing!r} cannot be loaded")
    )
