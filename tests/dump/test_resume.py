"""Training stops and resumes cleanly: checkpoints, resume, same result as an uninterrupted run (tiny BERT)."""

from __future__ import annotations

import pytest
import torch

from llamaindex_posfair.dump.config import DumpConfig, DumpTrainingConfig
from llamaindex_posfair.dump.model import add_dump_prefix
from llamaindex_posfair.dump.training import Triple, latest_checkpoint, train_contrastive, train_dump

STEPS = DumpTrainingConfig(batch_size=4, max_steps=4, warmup_ratio=0.0, logging_steps=1, seed=0)
TRIPLES = [
    Triple(f"question {w} {i}", f"the {w} answer number {i} is here", f"an unrelated {w} note {i}")
    for i, w in enumerate("red green blue cyan pink gold gray teal lime navy rose sand".split())
]


class Stop(Exception):
    pass


class StopAt:
    """A TrainerCallback that interrupts training after ``step`` steps (like a killed job)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def __getattr__(self, name):  # every other callback event: no-op
        return lambda *args, **kwargs: None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            raise Stop


def _model(path):
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    return add_dump_prefix(SentenceTransformer(path, device="cpu"), DumpConfig(num_tokens=2, mode="full"))


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_an_interrupted_run_resumes_from_its_checkpoint_and_matches_an_uninterrupted_one(tiny_bert_path, tmp_path):
    reference = _model(tiny_bert_path)
    train_dump(reference, TRIPLES, STEPS)

    ckpt = tmp_path / "checkpoints"
    with pytest.raises(Stop):
        train_dump(
            _model(tiny_bert_path), TRIPLES, STEPS, checkpoint_dir=ckpt, checkpoint_steps=2, callbacks=[StopAt(3)]
        )
    assert latest_checkpoint(ckpt).endswith("checkpoint-2")

    resumed = _model(tiny_bert_path)
    report = train_dump(resumed, TRIPLES, STEPS, checkpoint_dir=ckpt, checkpoint_steps=2)
    assert report.resumed_from.endswith("checkpoint-2") and report.steps == 4
    ref, got = _weights(reference), _weights(resumed)
    assert all(torch.allclose(ref[k], got[k], atol=1e-6) for k in ref)


def test_plain_fine_tune_trains_a_model_without_prefix(tiny_bert_path):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(tiny_bert_path, device="cpu")
    before = _weights(model)
    report = train_contrastive(model, TRIPLES, STEPS, mode="full")
    after = _weights(model)
    assert report.steps == 4 and any(not torch.equal(before[k], after[k]) for k in before)


def test_frozen_row_modes_refuse_a_model_without_prefix(tiny_bert_path):
    from sentence_transformers import SentenceTransformer

    with pytest.raises(ValueError, match="dump_only"):
        train_contrastive(SentenceTransformer(tiny_bert_path, device="cpu"), TRIPLES, STEPS, mode="dump_only")
