"""Run an audit: read the documents, index them into the targets that build their own index, ask every probe.

Example:
    >>> from llamaindex_posfair.audit import ProbeConfig, build_probes, llamaindex_default, posfair_store, run_audit
    >>> # texts = read_documents("my_docs")
    >>> # probes = build_probes(texts, ProbeConfig(per_group=40))
    >>> # report = run_audit(texts, [llamaindex_default(), posfair_store()], probes)
    >>> # report.summaries()[0]["psi"]
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tqdm.auto import tqdm

from .probes import AuditInputError, ProbeSet, evidence_in
from .report import AuditReport, ProbeOutcome, TargetResult, score_ranking
from .targets import AuditTarget

__all__ = ["read_documents", "run_audit"]

#: A target that returns no node for this many first probes is stopped with an error.
EMPTY_PROBES = 5
#: Nodes kept per probe for the report's examples.
KEPT_NODES = 3


def read_documents(path: str | Path, extensions: Iterable[str] | None = None) -> dict[str, str]:
    """The documents under ``path`` as ``{doc_id: text}``, read by LlamaIndex's readers (as ``posfair ingest`` reads).

    Raises:
        AuditInputError: ``path`` does not exist or holds no readable document with text.
    """
    from llamaindex_posfair.integrations.readers import DEFAULT_EXTENSIONS, read_path

    try:
        docs, skipped, n_other = read_path(path, tuple(extensions or DEFAULT_EXTENSIONS))
    except FileNotFoundError as exc:
        raise AuditInputError(str(exc)) from None
    texts = {d.doc_id: d.text for d in docs if d.text.strip()}
    if not texts:
        raise AuditInputError(
            f"no readable document with text under {str(path)!r} ({len(skipped)} files skipped, {n_other} with other "
            "suffixes); pass a folder of .txt/.md/.html/.pdf files (or --extensions for others)"
        )
    return texts


def _check_targets(targets: Sequence[AuditTarget], probes: ProbeSet, top_k: int) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 10:
        raise ValueError(f"top_k must be an integer >= 10 (nDCG@10 needs 10 nodes), got {top_k!r}")
    if not targets:
        raise AuditInputError("no target to audit; pass at least one retriever, index or recipe")
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise AuditInputError(f"target names must differ, got {names}")
    if "planted" in probes.kinds():
        existing = [t.name for t in targets if not t.builds_index]
        if existing:
            raise AuditInputError(
                f"planted probes change the documents, so only targets the audit indexes itself can take them; "
                f"{existing} already hold their index. Use extractive or question probes (--kinds extractive)"
            )


def _ask(target: AuditTarget, probes: ProbeSet, top_k: int, show_progress: bool) -> dict[str, ProbeOutcome]:
    outcomes: dict[str, ProbeOutcome] = {}
    empty = 0
    for i, probe in enumerate(tqdm(probes.probes, desc=target.name[:40], disable=not show_progress, unit="probe")):
        nodes = target.retrieve(probe.query, top_k)[:top_k]
        empty += not nodes
        if i + 1 == min(EMPTY_PROBES, len(probes.probes)) and empty == i + 1:
            raise AuditInputError(
                f"target {target.name!r} returned no node for the first {empty} probes; is its index empty, or built "
                "over other documents? Check it with one query of your own"
            )
        rank = score_ranking([evidence_in(n.text, probe.evidence) for n in nodes])
        outcomes[probe.id] = ProbeOutcome(probe.id, rank, len(nodes), tuple(nodes[:KEPT_NODES]))
    return outcomes


def _load() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover - platform without load averages
        return "n/a"


def run_audit(
    texts: Mapping[str, str],
    targets: Sequence[AuditTarget],
    probes: ProbeSet,
    *,
    top_k: int = 20,
    show_progress: bool = False,
    command: str = "",
) -> AuditReport:
    """Ask every probe of ``probes`` to every target and score where each finds the evidence.

    Args:
        texts: the user's documents (``{doc_id: text}``, :func:`read_documents`); targets that build their own
            index index them with the planted facts in (:meth:`ProbeSet.documents`).
        targets: what to audit, in report order (the first is the baseline of the paired comparisons).
        probes: the probes (:func:`~llamaindex_posfair.audit.build_probes` or :meth:`ProbeSet.load`).
        top_k: nodes taken per probe (recall@top_k; at least 10).
        show_progress: a progress bar per target.
        command: how the report was made, printed on it.

    Returns:
        An :class:`~llamaindex_posfair.audit.report.AuditReport`; the targets are closed.

    Raises:
        AuditInputError: no target, planted probes with a target that holds its own index, documents that are not
            the probes' own, a target that returns nothing.
        ValueError: ``top_k`` below 10.
    """
    _check_targets(targets, probes, top_k)
    documents = probes.documents(texts)
    t_start = time.perf_counter()
    results, warnings = [], []
    try:
        for target in targets:
            t0 = time.perf_counter()
            if target.builds_index:
                target.prepare(documents, show_progress=show_progress)
            outcomes = _ask(target, probes, top_k, show_progress)
            results.append(TargetResult(target.name, outcomes, time.perf_counter() - t0, target.builds_index))
            if not any(o.rank for o in outcomes.values()):
                warnings.append(
                    f"{target.name} found no probe's evidence in its top {top_k}: does it index these documents?"
                )
    finally:
        for target in targets:
            target.close()
    meta = {
        "documents": len(texts),
        "wall_s": round(time.perf_counter() - t_start, 1),
        "load_avg": _load(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return AuditReport(probes, results, top_k, command, meta, warnings)
