"""``posfair audit`` as an API: how blind is a retriever to the end of its passages, on your own documents?

Probes (:mod:`.probes`) are drawn from the user's text without an LLM, balanced over the begin / middle / end
thirds of the passages; targets (:mod:`.targets`) are LlamaIndex retrievers and indexes, existing Qdrant
collections, posfair's store, or recipes the audit indexes itself; the report (:mod:`.report`) gives nDCG@10 and
recall per third, harmonic mean, PSI, paired bootstrap intervals and the worst positions with examples.
docs/audit.md explains the measure.

Example:
    >>> from llamaindex_posfair.audit import ProbeConfig, build_probes, read_documents, run_audit, RetrieverTarget
    >>> # texts = read_documents("my_docs")
    >>> # probes = build_probes(texts, ProbeConfig(per_group=40, seed=0)); probes.save("probes.json")
    >>> # report = run_audit(texts, [RetrieverTarget("mine", my_index)], probes)
    >>> # print(report.to_markdown())
"""

from llamaindex_posfair._lazy import lazy_exports

_EXPORTS = {
    "AuditInputError": "llamaindex_posfair.audit.probes",
    "GROUPS": "llamaindex_posfair.audit.probes",
    "KINDS": "llamaindex_posfair.audit.probes",
    "Probe": "llamaindex_posfair.audit.probes",
    "ProbeConfig": "llamaindex_posfair.audit.probes",
    "ProbeSet": "llamaindex_posfair.audit.probes",
    "build_probes": "llamaindex_posfair.audit.probes",
    "read_questions": "llamaindex_posfair.audit.probes",
    "AuditTarget": "llamaindex_posfair.audit.targets",
    "BuiltTarget": "llamaindex_posfair.audit.targets",
    "RetrieverTarget": "llamaindex_posfair.audit.targets",
    "llamaindex_default": "llamaindex_posfair.audit.targets",
    "openai_endpoint": "llamaindex_posfair.audit.targets",
    "posfair_collection": "llamaindex_posfair.audit.targets",
    "posfair_store": "llamaindex_posfair.audit.targets",
    "qdrant_collection": "llamaindex_posfair.audit.targets",
    "AuditReport": "llamaindex_posfair.audit.report",
    "read_documents": "llamaindex_posfair.audit.run",
    "run_audit": "llamaindex_posfair.audit.run",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
