"""ServeConfig: scaling options as Ray Serve reads them; invalid ranges named."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from llamaindex_posfair.serve.config import ImageModelConfig, ScalingConfig, ServeConfig, token_digest


def test_fixed_replicas_and_gpus_become_deployment_options():
    opts = ScalingConfig(replicas=4, num_gpus=1, num_cpus=2).deployment_options(max_batch_size=32)
    assert opts == {"ray_actor_options": {"num_cpus": 2, "num_gpus": 1}, "max_ongoing_requests": 64, "num_replicas": 4}


def test_autoscaling_range_targets_one_batch_per_replica():
    opts = ScalingConfig(min_replicas=1, max_replicas=8).deployment_options(max_batch_size=16)
    assert "num_replicas" not in opts
    assert opts["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 8, "target_ongoing_requests": 16}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_replicas": 2}, "min_replicas and max_replicas go together"),
        ({"min_replicas": 3, "max_replicas": 2}, "must not exceed"),
    ],
)
def test_bad_replica_ranges_are_named(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        ScalingConfig(**kwargs)


def test_image_replicas_keep_their_own_gpus():
    text = ScalingConfig(replicas=4, num_gpus=0.5)
    assert (
        ImageModelConfig(model="m", replicas=2, num_gpus=1)
        .scaling(text)
        .deployment_options()["ray_actor_options"]["num_gpus"]
        == 1
    )
    assert ImageModelConfig(model="m").scaling(text).num_gpus == 0.5


def test_config_is_frozen_and_keeps_only_the_token_digest():
    cfg = ServeConfig(token_sha256=token_digest("s3cret"))
    assert "s3cret" not in cfg.model_dump_json()
    with pytest.raises(ValidationError):
        cfg.app_name = "other"
