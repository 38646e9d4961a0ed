from __future__ import annotations

import pytest

from llamaindex_posfair.dump.config import DumpConfig, DumpTrainingConfig, read_dump_config


@pytest.mark.parametrize("bad", [0, -1, 65, 2.5, True])
def test_num_tokens_out_of_range_names_the_parameter(bad):
    with pytest.raises(ValueError, match="num_tokens must be an integer in \\[1, 64\\]"):
        DumpConfig(num_tokens=bad)


def test_unknown_mode_lists_the_valid_modes():
    with pytest.raises(ValueError, match="mode must be one of .*'full'.*got 'frozen'"):
        DumpConfig(mode="frozen")


def test_config_round_trips_through_dict():
    cfg = DumpConfig(num_tokens=2, mode="random_prefix", seed=7)
    assert DumpConfig.from_dict(cfg.to_dict() | {"future_key": 1}) == cfg


def test_token_strings_are_dump_for_the_paper_and_soft_for_the_soft_prompt():
    assert DumpConfig(num_tokens=3).token_strings == ("[DUMP_1]", "[DUMP_2]", "[DUMP_3]")
    assert DumpConfig(num_tokens=2, mode="soft_prompt").token_strings == ("[SOFT_1]", "[SOFT_2]")


def test_only_the_soft_prompt_is_not_isolated():
    assert [DumpConfig(mode=m).isolated for m in ("full", "dump_only", "random_prefix", "soft_prompt")] == [
        True,
        True,
        True,
        False,
    ]


def test_cached_loss_is_used_only_when_the_mini_batch_is_smaller():
    assert DumpTrainingConfig(batch_size=64, mini_batch_size=16).cached is True
    assert DumpTrainingConfig(batch_size=16, mini_batch_size=16).cached is False
    assert DumpTrainingConfig(batch_size=16).cached is False


def test_batch_of_one_is_rejected_for_lack_of_in_batch_negatives():
    with pytest.raises(ValueError, match="batch_size must be >= 2"):
        DumpTrainingConfig(batch_size=1)


def test_read_dump_config_of_a_plain_folder_is_none(tmp_path):
    assert read_dump_config(tmp_path) is None
