"""A few InfoNCE steps on real MiniLM and the shipped triples, in each mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llamaindex_posfair.dump.config import DumpConfig, DumpTrainingConfig
from llamaindex_posfair.dump.model import add_dump_prefix, input_embeddings
from llamaindex_posfair.dump.training import (
    evaluate_retrieval,
    load_triples,
    row_gradient_mask,
    train_dump,
)
from llamaindex_posfair.encoders.prefix_tokens import prefix_token_ids

pytestmark = pytest.mark.slow


def embedding_snapshot(model) -> np.ndarray:
    """A float32 copy of the input embedding matrix (for row-change checks)."""
    return input_embeddings(model).weight.detach().float().cpu().numpy().copy()


STEPS = DumpTrainingConfig(batch_size=8, max_steps=3, warmup_ratio=0.0, logging_steps=1, seed=0)


def _non_embedding_params(model):
    emb = model[0].auto_model.get_input_embeddings().weight
    return {n: p.detach().clone() for n, p in model.named_parameters() if p is not emb}


def _changed_rows(before: np.ndarray, after: np.ndarray) -> list[int]:
    return np.flatnonzero(np.abs(after - before).max(axis=1) > 0).tolist()


def test_a_few_full_mode_steps_lower_the_infonce_loss(fresh_minilm, small_triples):
    model = add_dump_prefix(fresh_minilm, DumpConfig(mode="full"))
    before = evaluate_retrieval(model, small_triples)["infonce"]
    train_dump(model, small_triples, STEPS)
    assert evaluate_retrieval(model, small_triples)["infonce"] < 0.5 * before


def test_dump_only_changes_exactly_the_k_new_rows_and_nothing_else(fresh_minilm, small_triples):
    model = add_dump_prefix(fresh_minilm, DumpConfig(num_tokens=4, mode="dump_only"))
    rows, others = embedding_snapshot(model), _non_embedding_params(model)
    train_dump(model, small_triples, STEPS)
    assert _changed_rows(rows, embedding_snapshot(model)) == prefix_token_ids(model.tokenizer)
    assert all(torch.equal(p, _non_embedding_params(model)[n]) for n, p in others.items())


def test_random_prefix_rows_never_change_while_the_model_trains(fresh_minilm, small_triples):
    model = add_dump_prefix(fresh_minilm, DumpConfig(num_tokens=2, mode="random_prefix"))
    rows = embedding_snapshot(model)
    train_dump(model, small_triples, STEPS)
    after = embedding_snapshot(model)
    changed = _changed_rows(rows, after)
    assert not set(prefix_token_ids(model.tokenizer)) & set(changed) and len(changed) > 100


def test_soft_prompt_trains_only_its_k_rows(fresh_minilm, small_triples):
    model = add_dump_prefix(fresh_minilm, DumpConfig(num_tokens=3, mode="soft_prompt"))
    rows = embedding_snapshot(model)
    train_dump(model, small_triples, STEPS)
    assert _changed_rows(rows, embedding_snapshot(model)) == prefix_token_ids(model.tokenizer, kind="SOFT")


def test_cached_loss_trains_too(fresh_minilm, small_triples):
    model = add_dump_prefix(fresh_minilm, DumpConfig(mode="full"))
    before = evaluate_retrieval(model, small_triples)["infonce"]
    report = train_dump(
        model, small_triples, DumpTrainingConfig(batch_size=8, mini_batch_size=4, max_steps=2, warmup_ratio=0.0)
    )
    assert report.cached and report.steps == 2
    assert evaluate_retrieval(model, small_triples)["infonce"] < before


def test_weight_decay_is_refused_when_rows_are_frozen(fresh_minilm, small_triples):
    model = add_dump_prefix(fresh_minilm, DumpConfig(mode="dump_only"))
    with pytest.raises(ValueError, match="weight_decay must be 0 in mode 'dump_only'"):
        train_dump(model, small_triples, DumpTrainingConfig(weight_decay=0.01))


def test_training_needs_a_prefixed_model(fresh_minilm, small_triples):
    with pytest.raises(ValueError, match="call add_dump_prefix"):
        train_dump(fresh_minilm, small_triples, STEPS)


def test_row_gradient_mask_is_complementary():
    keep = row_gradient_mask(6, [4, 5], keep_prefix=True)
    drop = row_gradient_mask(6, [4, 5], keep_prefix=False)
    assert torch.equal(keep + drop, torch.ones(6, 1))


def test_load_triples_reads_parquet_and_alias_fields(tmp_path):
    import pandas as pd

    path = tmp_path / "t.parquet"
    pd.DataFrame({"anchor": ["q"], "pos": ["p"], "neg": [["n1", "n2"]]}).to_parquet(path)
    assert [(t.query, t.positive, t.negative) for t in load_triples(path)] == [("q", "p", "n1")]


def test_load_triples_names_the_missing_field(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"query": "q", "positive": "p"}\n')
    with pytest.raises(ValueError, match="no negative field"):
        load_triples(path)
