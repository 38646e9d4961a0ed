"""The two default targets with the bundled model: posfair's store sees the end of a passage, LlamaIndex's default
(1024-token nodes embedded through a 256-token window) does not."""

from __future__ import annotations

import pytest

from llamaindex_posfair.audit import ProbeConfig, build_probes, llamaindex_default, posfair_store, run_audit
from research.eval.benchmarks.loaders import load_shipped


@pytest.mark.slow
def test_the_default_targets_on_natural_docs_passages():
    pytest.importorskip("llama_index.embeddings.huggingface")
    corpus = load_shipped("natural-docs", "test").corpus
    texts = {f"{doc_id}.txt": corpus[doc_id] for doc_id in sorted(corpus)[:24]}
    probes = build_probes(texts, ProbeConfig(per_group=4, seed=0))
    report = run_audit(texts, [llamaindex_default(), posfair_store()], probes, top_k=20)
    default, posfair = (report.summary(r) for r in report.results)
    assert posfair["ndcg@10"]["end"] > default["ndcg@10"]["end"]
    assert posfair["psi"] < default["psi"]
    assert min(posfair["recall@20"].values()) == 1.0
