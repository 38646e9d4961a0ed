"""``python -m research.multimodal.simulate``: the table, and user errors as one line with exit status 2."""

from __future__ import annotations

import pytest

from research.multimodal.simulate import main


def test_simulate_prints_the_table(capsys):
    assert main(["--n", "3", "--test-samples", "20"]) == 0
    out = capsys.readouterr().out
    assert "| ours (attention-guided) | 3 |" in out and "| unbiased simulator | 3 |" in out


@pytest.mark.parametrize(("flag", "value"), [("--n", "1"), ("--test-samples", "0"), ("--top-layers", "0")])
def test_bad_numbers_are_argparse_errors(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([flag, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"python -m research.multimodal.simulate: error: argument {flag}: expected an integer >= ")
