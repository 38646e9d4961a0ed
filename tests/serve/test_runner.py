"""Resource check: a local Ray that cannot place a replica is refused instead of waiting forever."""

from __future__ import annotations

from llamaindex_posfair.serve.config import ImageModelSpec, ScalingConfig, ServeConfig
from llamaindex_posfair.serve.runner import missing_resources, resources_needed


def test_needs_count_embed_rerank_and_image_replicas():
    cfg = ServeConfig(
        scaling=ScalingConfig(replicas=4, num_gpus=0.5, num_cpus=1), image=ImageModelSpec(model="m", num_gpus=1)
    )
    assert resources_needed(cfg) == {"CPU": 9.0, "GPU": 5.0}


def test_missing_resources_names_what_is_short():
    cfg = ServeConfig(scaling=ScalingConfig(replicas=2, num_cpus=1))
    assert missing_resources(cfg, {"CPU": 4.0}) is None
    assert missing_resources(cfg, {"CPU": 2.0}) == "the replicas (embed + rerank + image) need 4 CPUs (have 2)"


def test_autoscaling_needs_its_minimum():
    cfg = ServeConfig(scaling=ScalingConfig(min_replicas=1, max_replicas=8, num_gpus=1))
    assert resources_needed(cfg)["GPU"] == 2.0
