"""`open_client`: server clients used for ingestion retry idempotent calls."""

from __future__ import annotations

import argparse

import qdrant_client

from llamaindex_posfair.cli.options import open_client
from qdrant_tools.retry import RetryingClient


class _FakeServerClient:
    def __init__(self, url=None, api_key=None, timeout=None, **kwargs):
        self.url = url
        self.calls = 0

    def get_collections(self):
        return []

    def count(self, collection_name):
        self.calls += 1
        if self.calls == 1:
            raise TimeoutError("transient")
        return 7


def _args(**kw):
    base = dict(qdrant_url="https://qdrant.example:6333", allow_insecure_api_key=False, path=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_ingestion_client_for_a_server_retries_idempotent_calls(monkeypatch):
    monkeypatch.setattr(qdrant_client, "QdrantClient", _FakeServerClient)
    client = open_client(_args(), retry=True)
    assert isinstance(client, RetryingClient)
    assert client.count("docs") == 7
    assert client.wrapped.calls == 2


def test_query_client_is_not_wrapped(monkeypatch):
    monkeypatch.setattr(qdrant_client, "QdrantClient", _FakeServerClient)
    assert isinstance(open_client(_args()), _FakeServerClient)


def _calib_args(**kw):
    base = dict(no_calibration=False, basket_size=None, strength=None, layers=None, preset=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_preset_flag_selects_the_named_calibration():
    from llamaindex_posfair.calibration.presets import preset
    from llamaindex_posfair.cli.options import calibration_from_args

    assert calibration_from_args(_calib_args(preset="posfair-minilm")) == preset("posfair-minilm")


def test_preset_and_explicit_flags_conflict():
    import pytest

    from llamaindex_posfair.cli.options import CliError, calibration_from_args

    with pytest.raises(CliError, match="--preset replaces"):
        calibration_from_args(_calib_args(preset="paper", strength=0.9))


def test_unknown_preset_names_the_valid_ones():
    import pytest

    from llamaindex_posfair.cli.options import CliError, calibration_from_args

    with pytest.raises(CliError, match="posfair-minilm"):
        calibration_from_args(_calib_args(preset="nope"))


def test_no_calibration_flag_is_the_plain_default_unless_the_command_calibrates():
    from llamaindex_posfair.calibration.config import CalibrationConfig
    from llamaindex_posfair.cli.options import calibration_from_args
    from llamaindex_posfair.encoders.spec import EncoderSpec

    assert calibration_from_args(_calib_args()) is None is EncoderSpec().calibration
    assert calibration_from_args(_calib_args(), CalibrationConfig(strength=0.3)) == CalibrationConfig(strength=0.3)
    assert calibration_from_args(_calib_args(no_calibration=True), CalibrationConfig()) is None
    assert calibration_from_args(_calib_args(strength=0.7)) == CalibrationConfig(strength=0.7)  # a flag calibrates
    assert calibration_from_args(_calib_args(preset="paper")) == CalibrationConfig()
