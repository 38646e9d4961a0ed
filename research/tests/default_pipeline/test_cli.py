"""``python -m research.default_pipeline`` user errors: one line on stderr, exit status 2, before any model loads."""

from __future__ import annotations

import pytest

from research.default_pipeline.cli import build_parser, main


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m research.default_pipeline: error: ") and "Traceback" not in err
    return err


def test_selecting_on_the_reported_split_is_refused(capsys):
    assert "held-apart" in _error(capsys, ["--split", "dev", "--select-split", "dev"])


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--subchunk-overlaps", "1,-1"], "--subchunk-overlaps"),
        (["--windows", "510=512"], "--windows"),
        (["--calibrations", "off,nope"], "unknown calibration preset 'nope'"),
    ],
)
def test_bad_values_are_user_errors(capsys, argv, needle):
    assert needle in _error(capsys, [*argv, "--out-dir", "unused"])


def test_grids_are_comma_separated():
    args = build_parser().parse_args(["--chunk-tokens-grid", "128,254", "--subchunk-tokens-grid", "32,48"])
    assert (args.chunk_tokens_grid, args.subchunk_tokens_grid) == ((128, 254), (32, 48))
