"""The shared attention hook: plain SDPA outside its scope, the handler with its state inside."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from transformers import BertConfig, BertModel

from llamaindex_posfair.backends.hooks import AttentionHook, sdpa_attention


@pytest.fixture(scope="module")
def tiny_bert():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
    model = BertModel(config).eval()
    ids = torch.randint(5, 50, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0  # padding, so transformers must build a mask
    return model, {"input_ids": ids, "attention_mask": mask}


def _run(model, inputs, implementation: str) -> torch.Tensor:
    model.set_attn_implementation(implementation)
    with torch.no_grad():
        return model(**inputs).last_hidden_state


def test_outside_its_scope_the_hook_is_plain_sdpa(tiny_bert):
    model, inputs = tiny_bert

    def refuse(*args, **kwargs):
        raise AssertionError("the handler must not run without an active state")

    hook = AttentionHook("posfair_test_passthrough", refuse)
    expected = _run(model, inputs, "sdpa")
    got = _run(model, inputs, hook.register())
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_inside_its_scope_the_handler_gets_the_state_and_a_mask(tiny_bert):
    model, inputs = tiny_bert
    seen: list[tuple[str, bool]] = []

    def scaled(state, module, query, key, value, attention_mask, **kwargs):
        seen.append((state["tag"], attention_mask is not None))
        out, _ = sdpa_attention(module, query, key, value, attention_mask, **kwargs)
        return out * state["factor"], None

    hook = AttentionHook("posfair_test_scaled", scaled)
    plain = _run(model, inputs, hook.register())
    with hook.activate({"tag": "on", "factor": 0.0}):
        changed = _run(model, inputs, hook.name)
    assert seen == [("on", True), ("on", True)]  # both layers; the SDPA mask function was registered too
    assert not torch.allclose(changed, plain, atol=1e-3)
    torch.testing.assert_close(_run(model, inputs, hook.name), plain, atol=1e-6, rtol=0)
    assert len(seen) == 2  # the scope ended with the block


def test_register_is_idempotent(tiny_bert):
    model, inputs = tiny_bert
    hook = AttentionHook("posfair_test_twice", lambda *a, **k: None)
    assert hook.register() == hook.register() == "posfair_test_twice"
    torch.testing.assert_close(_run(model, inputs, hook.name), _run(model, inputs, "sdpa"), atol=1e-6, rtol=0)


def test_scopes_nest_and_restore():
    hook = AttentionHook("posfair_test_nesting", lambda *a, **k: None)
    with hook.activate(1):
        with hook.activate(2):
            assert hook.current() == 2
        assert hook.current() == 1
    assert hook.current() is None


def test_state_does_not_leak_into_other_threads():
    hook = AttentionHook("posfair_test_threads", lambda *a, **k: None)
    with hook.activate("main"), ThreadPoolExecutor(1) as pool:
        assert pool.submit(hook.current).result() is None
        assert hook.current() == "main"
