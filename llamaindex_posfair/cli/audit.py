"""``posfair audit DOCS``: how blind is a retriever to the end of its passages, on your own documents?

Draws probes from the documents (no LLM): ``extractive`` (a sentence of the text is the query) and
``planted`` (an invented fact inserted at a known place, the query paraphrases it), balanced over
the begin / middle / end thirds of the passages (``SentenceSplitter`` chunks of ``--chunk-size`` /
``--chunk-overlap`` tokens, LlamaIndex's defaults 1024/200), and your own ``--questions``. Each
target answers every probe; the report gives nDCG@10 and recall@k per third, the harmonic mean, PSI
(1 - min/max over the thirds: 0 is fair), paired bootstrap intervals between targets, and the worst
positions with examples. Written to ``--out-dir``: ``report.md``, ``report.html`` (self-contained),
``audit.png``, ``report.json`` and ``probes.json`` (rerun on the same probes with ``--probes``).

Targets (``--target``, repeatable; default: ``llamaindex-default`` and ``posfair``):

* ``llamaindex-default``: LlamaIndex's default pipeline built in memory (``SentenceSplitter``
  ``--chunk-size``/``--chunk-overlap``, ``--embed-model`` as ``HuggingFaceEmbedding``);
* ``posfair``: posfair's default pipeline through ``PosFairVectorStore``, built in memory;
* ``qdrant:COLLECTION``: an existing collection written by LlamaIndex's ``QdrantVectorStore``
  (``--qdrant-path`` or ``--qdrant-url``; queries embedded with ``--embed-model``), not re-indexed;
* ``posfair-collection:COLLECTION``: a ``posfair ingest`` collection (``--path`` or ``--qdrant-url``);
* ``openai:MODEL@URL``: an OpenAI-compatible embeddings endpoint with the chunking recipe, built in memory;
* ``python:MODULE:NAME``: ``NAME()`` returns a LlamaIndex retriever or index (queried as it is) or an
  ``AuditTarget``.

Existing indexes (``qdrant:``, ``posfair-collection:``, ``python:``) must hold DOCS already; planted
probes need a target the audit indexes itself, so with them the default kinds are extractive only.

Exit status: 0, or 1 when a target's PSI is above ``--fail-if-psi-above`` (a CI gate), 2 on bad input.

Example::

    posfair audit docs/ --per-group 40 --out-dir audit-report
    posfair audit docs/ --target qdrant:my_docs --qdrant-url http://localhost:6333 --fail-if-psi-above 0.3
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.options import CliError, comma_list, int_at_least

DEFAULT_TARGETS = ("llamaindex-default", "posfair")
TARGET_FORMS = "llamaindex-default, posfair, qdrant:COLLECTION, posfair-collection:COLLECTION, openai:MODEL@URL, python:MODULE:NAME"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "audit",
        help="measure how a retriever's quality depends on where the evidence sits in its passages, on your documents",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("docs", help="folder (or file) of your documents, read as `posfair ingest` reads them")
    p.add_argument("--target", action="append", default=None, help=f"what to audit (repeatable): {TARGET_FORMS}")
    p.add_argument("--extensions", default=None, help="comma-separated file suffixes read (default: as posfair ingest)")
    g = p.add_argument_group("probes")
    g.add_argument(
        "--kinds", type=comma_list(str), default=None, help="extractive,planted,question (default: see above)"
    )
    g.add_argument("--per-group", type=int_at_least(1), default=40, help="probes per kind and third (default 40)")
    g.add_argument("--seed", type=int, default=0, help="seed of the probes (default 0)")
    g.add_argument("--questions", default=None, help="JSON Lines of {query, answer, doc?, group?}: question probes")
    g.add_argument("--probes", default=None, help="reuse a probe file (probes.json of an earlier run)")
    g.add_argument("--save-probes", default=None, help="also write the probes here (default: OUT_DIR/probes.json)")
    g.add_argument("--max-probes", type=int_at_least(1), default=None, help="ask at most N probes (balanced)")
    g.add_argument("--chunk-size", type=int_at_least(1), default=1024, help="passage tokens (default 1024)")
    g.add_argument("--chunk-overlap", type=int_at_least(0), default=200, help="passage overlap tokens (default 200)")
    t = p.add_argument_group("targets")
    t.add_argument("--embed-model", default=None, help="HuggingFace model of llamaindex-default and qdrant: targets")
    t.add_argument("--qdrant-path", default=None, help="qdrant-client local folder of a qdrant: target")
    options.add_storage_args(p, collection=False)
    t.add_argument("--top-k", type=int, default=20, help="nodes taken per probe, recall@k (default 20, at least 10)")
    o = p.add_argument_group("output")
    o.add_argument("--out-dir", default="audit-report", help="folder of the report files (default audit-report)")
    options.add_json_arg(p, "the report")
    o.add_argument("--fail-if-psi-above", type=float, default=None, help="exit 1 when a target's PSI is above X")
    o.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=run_audit_command, audit_parser=p)


def command_line(args: argparse.Namespace) -> str:
    """The command that ``args`` stand for (flags left at their default omitted), for the report's header."""
    parser = args.audit_parser
    words = ["posfair", "audit", args.docs]
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "docs"):
            continue
        value = getattr(args, action.dest, None)
        if value is None or value == action.default or value is False:
            continue
        flag = action.option_strings[-1]
        if value is True:
            words.append(flag)
        elif isinstance(value, list):
            words += [w for v in value for w in (flag, str(v))]
        else:
            words += [flag, ",".join(map(str, value)) if isinstance(value, tuple) else str(value)]
    return " ".join(shlex.quote(w) for w in words)


# ------------------------------------------------------------------ targets
def _python_target(ref: str) -> Any:
    module, _, name = ref.rpartition(":")
    if not module or not name:
        raise CliError(f"--target python:{ref}: expected python:MODULE:NAME, e.g. python:my_app.rag:make_retriever")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"--target python:{ref}: {exc}") from None
    return factory()


def make_target(spec: str, args: argparse.Namespace) -> Any:
    """The :class:`~llamaindex_posfair.audit.targets.AuditTarget` a ``--target`` value names.

    Raises:
        CliError: an unknown form or a missing flag the form needs.
    """
    from llamaindex_posfair.audit import targets as T

    kind, _, rest = spec.partition(":")
    if spec == "llamaindex-default":
        return T.llamaindex_default(T.bundled_embedding(args.embed_model), args.chunk_size, args.chunk_overlap)
    if spec == "posfair":
        return T.posfair_store()
    if kind == "qdrant" and rest:
        if (args.qdrant_path is None) == (args.qdrant_url is None):
            raise CliError(f"--target {spec} needs one of --qdrant-path and --qdrant-url")
        return T.qdrant_collection(
            rest, T.bundled_embedding(args.embed_model), path=args.qdrant_path, url=args.qdrant_url
        )
    if kind == "posfair-collection" and rest:
        return T.posfair_collection(rest, path=args.path or options.DEFAULT_STORAGE, url=args.qdrant_url)
    if kind == "openai" and "@" in rest:
        model, _, url = rest.partition("@")
        return T.openai_endpoint(url, model, args.chunk_size, args.chunk_overlap)
    if kind == "python" and rest:
        made = _python_target(rest)
        return made if isinstance(made, T.AuditTarget) else T.RetrieverTarget(rest, made)
    raise CliError(f"--target {spec!r} is not a target; use one of: {TARGET_FORMS}")


# ------------------------------------------------------------------ probes
def _probes(args: argparse.Namespace, texts: dict[str, str], all_build: bool) -> Any:
    from llamaindex_posfair.audit.probes import ProbeConfig, ProbeSet, build_probes, read_questions

    if args.probes:
        return ProbeSet.load(args.probes)
    kinds = args.kinds or (("extractive", "planted") if all_build else ("extractive",))
    if args.questions and "question" not in kinds:
        kinds = (*kinds, "question")
    config = ProbeConfig(
        per_group=args.per_group,
        kinds=tuple(kinds),
        seed=args.seed,
        passage_tokens=args.chunk_size,
        passage_overlap=args.chunk_overlap,
    )
    questions = read_questions(args.questions) if args.questions else ()
    return build_probes(texts, config, questions)


# ------------------------------------------------------------------ output
def write_report(report: Any, out_dir: str) -> dict[str, str]:
    """Write report.md, report.html, audit.png and report.json to ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = report.plot_png()
    files = {"png": out / "audit.png", "markdown": out / "report.md", "html": out / "report.html"}
    files["png"].write_bytes(png)
    files["markdown"].write_text(report.to_markdown("audit.png"), encoding="utf-8")
    files["html"].write_text(report.to_html(png), encoding="utf-8")
    files["json"] = out / "report.json"
    files["json"].write_text(json.dumps(report.to_dict(), indent=1, ensure_ascii=False), encoding="utf-8")
    return {k: str(v) for k, v in files.items()}


def _gate(report: Any, limit: float | None) -> int:
    if limit is None:
        return 0
    over = [(s["target"], s["psi"]) for s in report.summaries() if s["kind"] == "all" and s["psi"] > limit]
    for name, value in over:
        print(f"posfair audit: PSI {value:.3f} of {name!r} is above --fail-if-psi-above {limit}", file=sys.stderr)
    return 1 if over else 0


@options.user_errors(ValueError)
def run_audit_command(args: argparse.Namespace) -> int:
    """Read, draw the probes, build or open the targets, ask, write the report; exit status per the gate."""
    from llamaindex_posfair.audit.run import read_documents, run_audit

    if args.fail_if_psi_above is not None and not 0.0 <= args.fail_if_psi_above <= 1.0:
        raise CliError(f"--fail-if-psi-above must lie in [0, 1], got {args.fail_if_psi_above}; e.g. 0.3")
    if args.top_k < 10:
        raise CliError(f"--top-k must be at least 10 (nDCG@10 needs 10 nodes), got {args.top_k}")
    exts = options.parse_extensions(args.extensions) if args.extensions else None
    texts = read_documents(args.docs, exts)
    specs = args.target or list(DEFAULT_TARGETS)
    targets = [make_target(s, args) for s in specs]
    try:
        probes = _probes(args, texts, all(t.builds_index for t in targets))
    except BaseException:
        for t in targets:
            t.close()
        raise
    probes.save(args.save_probes or Path(args.out_dir) / "probes.json")
    report = run_audit(
        texts, targets, probes.subset(args.max_probes), top_k=args.top_k, show_progress=not args.no_progress,
        command=command_line(args),
    )  # fmt: skip
    files = write_report(report, args.out_dir)
    if args.json:
        print(json.dumps({**report.to_dict(), "files": files}, indent=1, ensure_ascii=False))
    else:
        print(report.to_markdown(image=None))
        print(f"report: {files['html']} (and report.md, audit.png, report.json)")
    return _gate(report, args.fail_if_psi_above)
