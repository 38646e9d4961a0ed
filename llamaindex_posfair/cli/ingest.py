"""``posfair ingest PATH --collection NAME``: embed a folder of documents into Qdrant.

Files are read with LlamaIndex's readers (:mod:`llamaindex_posfair.integrations.readers`):
PDF (page by page, each node names its page), Word (``.docx``, its text) and HTML (its
text), which need the ``readers`` extra; Markdown, plain text, JSON and source code. Their
file metadata and ``--metadata KEY=VALUE`` are stored with every node, for ``posfair query
--filter``.

Storage is embedded at ``./.posfair/qdrant`` unless ``--path`` or ``--qdrant-url``
says otherwise (the API key of a server comes from the ``QDRANT_API_KEY``
environment variable and is never logged). Re-running is idempotent; an
interrupted run is completed by running it again. A large file is read, embedded and
written a window of chunks at a time. Document ids are the files' real paths relative to
PATH, so a file reached twice through links is stored once; links leading out of PATH are
skipped unless ``--follow-links``. ``--prune`` deletes the stored
documents read from under PATH whose file is gone (refused for a single file);
``--dry-run`` prints what would be added, replaced and removed, and writes nothing.

Example:
    posfair ingest examples/data --collection demo
    posfair ingest docs/ --collection docs --metadata team=docs --metadata year=2024
    posfair ingest docs/guides --collection docs --prune --dry-run
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.metadata import add_metadata_arg
from llamaindex_posfair.cli.options import CliError
from qdrant_tools.subchunks import NODE_SOURCES, SubchunkConfig

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

logger = logging.getLogger(__name__)


def add_vector_args(p: argparse.ArgumentParser) -> None:
    """``--vector-name`` / ``--both-vectors`` (shared by ``ingest`` and ``ingest-ray``)."""
    p.add_argument(
        "--vector-name",
        default=None,
        help='Qdrant vector name (default: "vanilla" for the plain encoder, "calibrated" with calibration on)',
    )
    p.add_argument(
        "--both-vectors",
        action="store_true",
        help='store a "vanilla" and a "calibrated" vector per chunk (one model load; the calibration flags\' '
        "calibration, else the published CalibrationConfig)",
    )


def add_layout_args(p: argparse.ArgumentParser) -> None:
    """Layout, file selection and progress flags (shared by ``ingest`` and ``ingest-ray``).

    The layout flags default to the collection's recipe when it exists (and must agree with it),
    else to the default layout (:meth:`Recipe.default`).
    """
    p.add_argument("--chunk-tokens", type=int, default=None, help="tokens per node (default: min(256, model window))")
    p.add_argument(
        "--overlap-tokens",
        type=int,
        default=None,
        help="tokens shared by neighbouring nodes (default: an eighth of the node, at most 32; 31 for the bundled model)",
    )
    p.add_argument(
        "--extensions",
        default=None,
        help="comma-separated file suffixes read (default: PDF, Word, HTML, Markdown, text, JSON and common source code; "
        "the list is in docs/cli.md)",
    )
    p.add_argument("--write-batch-size", type=int, default=256, help="points per Qdrant upsert (default 256)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    g = p.add_argument_group("sub-chunks (each node is also scored by its best sentence-aligned sub-chunk)")
    g.add_argument(
        "--subchunk-tokens",
        type=int,
        default=None,
        help=f"token budget of a sub-chunk (default {SubchunkConfig().max_tokens})",
    )
    g.add_argument(
        "--subchunk-overlap",
        type=int,
        default=None,
        help=f"sentences shared by neighbouring sub-chunks (default {SubchunkConfig().overlap_sentences})",
    )
    g.add_argument(
        "--no-subchunks",
        action="store_true",
        help="the single-vector layout: one vector per node (less storage), calibrated unless --no-calibration",
    )
    g.add_argument(
        "--subchunk-quantization",
        choices=("int8", "none"),
        default=None,
        help="'int8': keep an int8 copy of the sub-chunk vectors (4x smaller); 'none': float only "
        "(default: the default layout's, none)",
    )
    g.add_argument(  # the earlier spelling of --subchunk-quantization int8
        "--subchunk-int8", dest="subchunk_quantization", action="store_const", const="int8", help=argparse.SUPPRESS
    )
    g.add_argument(
        "--subchunk-graph-m",
        type=int,
        default=None,
        help="HNSW m of a graph on the sub-chunks, e.g. 16: better candidates in collections scored through candidates (above 5,000 nodes by default), "
        "a much slower index build (default 0: none)",
    )
    g.add_argument(
        "--node-source",
        choices=NODE_SOURCES,
        default=None,
        help="'encoded': embed each node's text; 'subchunk-mean': the normalised mean of its sub-chunk vectors "
        "(no node pass: about half the encoding) (default: the default layout's)",
    )
    g.add_argument(
        "--fused-weight",
        type=float,
        default=None,
        help="also store the sub-chunks fused with the node vector at this node weight, so a search at that "
        "weight scores in one arm (about half the time; +1 vector per sub-chunk); 0 = none "
        "(default: the default search's node weight)",
    )
    g.add_argument(
        "--node-quantization",
        choices=("int8", "none"),
        default=None,
        help="'int8': the node vectors' HNSW searches an int8 copy kept in RAM (faster candidates above "
        "exact_up_to; the float vectors still score); 'none': float only (default: the default layout's, int8)",
    )
    options.add_compact_storage_args(g)
    h = p.add_argument_group("hybrid search (a BM25 sparse vector of each node, fused in Qdrant)")
    b = h.add_mutually_exclusive_group()
    b.add_argument(
        "--bm25", action="store_true", default=None, help="store the BM25 vector (default: the default layout's)"
    )
    b.add_argument("--no-bm25", dest="bm25", action="store_false", help="store no BM25 vector (dense search only)")


#: Layout field -> its flag (for errors).
LAYOUT_FLAGS = {
    "chunk_tokens": "--chunk-tokens",
    "overlap_tokens": "--overlap-tokens",
    "subchunks": "--subchunk-tokens / --subchunk-overlap / --no-subchunks",
    "subchunk_quantization": "--subchunk-quantization",
    "subchunk_graph_m": "--subchunk-graph-m",
    "node_source": "--node-source",
    "fused_weight": "--fused-weight",
    "node_quantization": "--node-quantization",
    "node_on_disk": "--node-on-disk",
    "fused_quantization": "--fused-quantization",
}

#: Words of a layout's validation error -> the flags' words (a field set to a value: the flag and the value).
_FLAG_WORDS = {
    r"pass subchunks=SubchunkConfig\(\.\.\.\)": "drop --no-subchunks",
    r"\bmax_tokens\b": "--subchunk-tokens",
    r"\boverlap_sentences\b": "--subchunk-overlap",
    **{
        rf"""\b{field}=["']?([\w.-]+)["']?""": rf"{flag} \1"
        for field, flag in LAYOUT_FLAGS.items()
        if field != "subchunks"
    },
    **{rf"\b{field}\b": flag for field, flag in LAYOUT_FLAGS.items() if field != "subchunks"},
}


def layout_given(args: argparse.Namespace, base: Any) -> dict[str, Any]:
    """The :class:`~qdrant_tools.layout.NodeLayout` fields the flags set explicitly; ``--subchunk-tokens`` and
    ``--subchunk-overlap`` change ``base``'s sub-chunks (the collection's layout, or ``NodeLayout()``).

    Raises:
        CliError: contradictory flags (a sub-chunk quantization, budget or graph with --no-subchunks), or a
            --fused-weight outside [0, 1).
        ValueError: an invalid sub-chunk budget or overlap (the message names the field).
    """
    sub_flags = (args.subchunk_quantization == "int8", args.subchunk_tokens is not None, args.subchunk_graph_m)
    if args.no_subchunks and any(sub_flags):
        raise CliError(
            "--no-subchunks stores no sub-chunks; drop --subchunk-quantization / --subchunk-tokens / --subchunk-graph-m"
        )
    if args.fused_weight is not None and not 0.0 <= args.fused_weight < 1.0:
        raise CliError(
            f"--fused-weight must lie in [0, 1) (0 = none; e.g. 0.5, the node weight), got {args.fused_weight}"
        )
    names = ("chunk_tokens", "overlap_tokens", "subchunk_graph_m", "node_source", "fused_weight", "node_on_disk")
    given = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    if given.get("fused_weight") == 0:  # --fused-weight 0: no fused multivector
        given["fused_weight"] = None
    for field in ("subchunk_quantization", "node_quantization", "fused_quantization"):  # "none": no quantized copy
        value = getattr(args, field)
        if value is not None:
            given[field] = None if value == "none" else value
    if args.no_subchunks:
        given["subchunks"] = None
    elif args.subchunk_tokens is not None or args.subchunk_overlap is not None:
        sub = base.subchunks or SubchunkConfig()
        tokens = sub.max_tokens if args.subchunk_tokens is None else args.subchunk_tokens
        overlap = sub.overlap_sentences if args.subchunk_overlap is None else args.subchunk_overlap
        given["subchunks"] = SubchunkConfig(tokens, overlap)
    return given


def layout_from_args(args: argparse.Namespace, recipe: Any = None) -> Any:
    """The :class:`~qdrant_tools.layout.NodeLayout` the layout flags of ``posfair ingest`` describe.

    Args:
        args: the parsed flags.
        recipe: the collection's recipe, when it exists: its layout is kept, and the flags may only repeat it.
            Without one, the flags apply over the default layout, ``NodeLayout()``.

    Raises:
        CliError: contradictory flags or an invalid value, named by its flag.
        CollectionMismatchError: a flag contradicts ``recipe`` (both values named).
    """
    from qdrant_tools.layout import NodeLayout

    base = NodeLayout() if recipe is None else recipe.layout
    try:
        given = layout_given(args, base)
        layout = base if recipe is not None else NodeLayout(**given)
    except ValueError as exc:
        raise CliError(options.flag_words(str(exc), _FLAG_WORDS.items())) from None
    if recipe is not None:
        recipe.check_layout(given, LAYOUT_FLAGS)
    return layout


def new_recipe(args: argparse.Namespace) -> Any:
    """The recipe of a new collection: the flags over the default layout and search.

    Raises:
        CliError: an invalid value, named by its flag.
    """
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.search import SearchSettings
    from qdrant_tools.sparse import Bm25Sparse

    layout = layout_from_args(args)
    bm25 = None if args.bm25 is False else Bm25Sparse()
    return Recipe.build(encoder_set_from_args(args), layout, SearchSettings(vector=args.vector_name), bm25)


def ingest_recipe(args: argparse.Namespace, client: StoreLike) -> tuple[Any, Any]:
    """The recipe this run writes and its encoders (run-time flags applied).

    An existing collection's recipe is kept: flags may only repeat it (a contradiction names both values).

    Raises:
        CliError: a flag contradicts the collection's recipe, or an invalid value.
    """
    from pydantic import ValidationError

    from llamaindex_posfair.encoders.spec import EncoderSet
    from llamaindex_posfair.integrations.recipe import read_recipe
    from qdrant_tools.spec import CollectionMismatchError

    recipe = read_recipe(client, args.collection) if client.collection_exists(args.collection) else None
    if recipe is None:
        recipe = new_recipe(args)
    else:
        try:
            layout_from_args(args, recipe)
            recipe.check_vectors(*_vectors_given(args))
            recipe.check_bm25(args.bm25, "--bm25" if args.bm25 else "--no-bm25")
            for name in recipe.vectors:
                recipe.encoder_spec(name, options.spec_fields_given(args), names=options.SPEC_FLAGS)
        except CollectionMismatchError as exc:
            raise CliError(str(exc).replace("the collection", f"collection {args.collection!r}", 1)) from None
        except ValidationError as exc:  # e.g. --device cuda for a collection written on runtime onnx
            raise CliError(options.error_message(exc)) from None
    runtime = options.runtime_fields(args)
    return recipe, EncoderSet(vectors={n: s.model_copy(update=runtime) for n, s in recipe.vectors.items()})


def _vectors_given(args: argparse.Namespace) -> tuple[list[str] | None, str]:
    """The vector names ``--both-vectors`` / ``--vector-name`` ask for (``None``: neither given), and the flag."""
    if args.both_vectors:
        return ["calibrated", "vanilla"], "--both-vectors"
    return ([args.vector_name] if args.vector_name else None), "--vector-name"


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The run-time fields of this ingestion (the layout's come from the recipe: :meth:`Recipe.ingest_settings`)."""
    return {
        "extensions": read_extensions(args),
        "follow_links": args.follow_links,
        "prune": args.prune,
        "show_progress": not args.no_progress,
    }


def encoder_set_from_args(args: argparse.Namespace) -> Any:
    """The named vectors the flags describe (an ``EncoderSet`` of one model).

    Without calibration flags the sub-chunk layout is stored uncalibrated (``EncoderSpec()``'s default:
    calibration buys nothing at 32-token sub-chunks and costs ingest time;
    research/results/default_pipeline/sweep.md); the single-vector layout and ``--both-vectors`` calibrate
    with ``CalibrationConfig()`` (whole nodes, where calibration helps; a calibrated vector).
    """
    from llamaindex_posfair.calibration.config import CalibrationConfig
    from llamaindex_posfair.encoders.spec import EncoderSet

    if args.both_vectors and args.runtime not in (None, "torch"):
        raise CliError(
            f"--both-vectors stores a calibrated vector, which --runtime {args.runtime} cannot compute (calibration "
            "needs attention hooks, which only --runtime torch has); drop --both-vectors to store the plain vector, "
            "or pass --runtime torch"
        )
    calibration = CalibrationConfig() if args.no_subchunks or args.both_vectors else None
    try:
        return EncoderSet.single(
            options.spec_from_args(args, calibration), both=args.both_vectors, name=args.vector_name
        )
    except ValueError as exc:
        raise CliError(
            str(exc).replace("both vectors", "--both-vectors").replace("the vector name", "--vector-name")
        ) from None


def read_extensions(args: argparse.Namespace) -> tuple[str, ...]:
    """The suffixes ``--extensions`` names (default: the readers', ``integrations.readers.DEFAULT_EXTENSIONS``).

    Raises:
        CliError: an empty list.
    """
    if args.extensions is None:
        from llamaindex_posfair.integrations.readers import DEFAULT_EXTENSIONS

        return DEFAULT_EXTENSIONS
    return options.parse_extensions(args.extensions)


def check_source(args: argparse.Namespace) -> None:
    """Raise :class:`CliError` unless PATH exists, and for ``--prune`` with a single file (before anything opens).

    Document ids are paths relative to PATH, so a single file's id is its name, and pruning the
    documents "no longer under PATH" would delete every other document of the collection.
    """
    path = args.source
    if not os.path.exists(path):
        raise CliError(f"PATH {path!r} does not exist; pass a folder or one file")
    if args.prune and os.path.isfile(path):
        folder = os.path.dirname(path) or "."
        raise CliError(
            f"--prune with the single file {path!r} would delete every other document of collection "
            f"{args.collection!r}; nothing was written. Drop --prune to ingest the file, or prune its folder: "
            f"posfair ingest {folder} --collection {args.collection} --prune"
        )


def read_input(args: argparse.Namespace, report: Any) -> list[Any]:
    """PATH's documents, read with LlamaIndex's readers (``--metadata`` added); files seen and skipped go in ``report``.

    Raises:
        CliError: a PDF, Word or HTML file without the ``readers`` extra.
    """
    import functools

    from llamaindex_posfair.cli.metadata import metadata_dict
    from llamaindex_posfair.integrations.readers import read_path
    from qdrant_tools.driver import read_folder

    load = functools.partial(read_path, metadata=metadata_dict(args.metadata), follow_links=args.follow_links)
    try:
        docs, _ = read_folder(args.source, read_extensions(args), report, load=load)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return docs


def add_ingest_args(p: argparse.ArgumentParser) -> None:
    """Everything ``ingest`` and ``ingest-ray`` share: PATH, storage, model, vectors, layout, metadata, prune,
    ``--dry-run``, ``--json``."""
    p.add_argument("source", metavar="PATH", help="a folder (read recursively) or one file")
    options.add_storage_args(p)
    options.add_model_args(p)
    add_vector_args(p)
    add_layout_args(p)
    add_metadata_arg(p)
    p.add_argument(
        "--prune",
        action="store_true",
        help="delete stored documents read from under PATH whose file is gone (refused for a single file)",
    )
    p.add_argument(
        "--follow-links",
        action="store_true",
        help="read the files and folders that links under PATH lead to outside it (default: skipped, and "
        "reported); a file reached twice is read once, under the id of its real path",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be added, replaced and removed; write nothing (no collection is created)",
    )
    options.add_json_arg(p, "the ingestion report (with --dry-run: the plan)")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ingest",
        help="embed a folder (PDF, Word, HTML, Markdown, text, JSON, code) or one file into a Qdrant collection "
        "(idempotent)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_ingest_args(p)
    p.set_defaults(handler=run_ingest)


def _config(args: argparse.Namespace, recipe: Any, encoder_set: Any) -> Any:
    from qdrant_tools.ingest import IngestConfig

    try:
        return recipe.ingest_settings(IngestConfig, batch_size=args.write_batch_size, **run_settings(args))
    except ValueError as exc:
        raise CliError(str(exc)) from None


def open_for_run(args: argparse.Namespace) -> Any:
    """The storage client of an ingestion; a dry run against embedded storage that does not exist yet reads an
    empty in-memory store instead, so it creates nothing."""
    path = getattr(args, "path", None) or options.DEFAULT_STORAGE
    if args.dry_run and not args.qdrant_url and not os.path.exists(path):
        from qdrant_tools.store import open_store

        return open_store(":memory:")
    return options.open_client(args, auto_index=False)


def load_vectors(args: argparse.Namespace, encoder_set: Any) -> Any:
    """``encoder_set`` bound to its model, loaded once (every vector of a set shares one model)."""
    return encoder_set.bind(options.load_spec(next(iter(encoder_set.vectors.values())), args))


def run_ingestion(args: argparse.Namespace, report: Any, make_config: Any, write: Any) -> int:
    """The steps ``ingest`` and ``ingest-ray`` share: read PATH, settle the recipe, then print the dry run's plan
    or ``write(client, docs, encoder_set, config, report)`` and print its report.

    ``make_config(args, recipe, encoder_set)``: the command's ingestion settings. A failure after the first write
    keeps what is stored and says how to finish (exit status 1).
    """
    from qdrant_tools.driver import plan_run, scoped_to
    from qdrant_tools.spec import CollectionMismatchError

    docs = read_input(args, report)  # reading problems surface before storage opens or the model loads
    client = open_for_run(args)
    try:
        recipe, encoder_set = ingest_recipe(args, client)
        config = scoped_to(make_config(args, recipe, encoder_set), args.source)
        if args.dry_run:  # the plan needs the encoders' fingerprints and chunking: the model loads here
            encoding = config.point_encoding(load_vectors(args, encoder_set))
            print_plan(args, plan_run(client, args.collection, docs, encoding, config)[1], report)
            return 0
        report = write(client, docs, encoder_set, config, report)
    except (CollectionMismatchError, ValueError) as exc:
        raise CliError(str(exc)) from None
    except CliError:
        raise
    except Exception as exc:
        print(
            f"posfair {args.command}: stopped by {type(exc).__name__}: {exc}\n"
            "chunks already stored are kept; rerun the same command to finish (nothing is duplicated)",
            file=sys.stderr,
        )
        return 1
    finally:
        client.close()
    print_report(args, report, recipe_precision(recipe))
    return 0


def run_ingest(args: argparse.Namespace) -> int:
    from qdrant_tools.ingest import ingest_documents
    from qdrant_tools.report import IngestReport

    def write(client: StoreLike, docs: list[Any], encoder_set: Any, config: Any, report: Any) -> Any:
        return ingest_documents(client, args.collection, docs, load_vectors(args, encoder_set), config, report=report)

    check_source(args)
    return run_ingestion(args, IngestReport(collection=args.collection), _config, write)


def recipe_precision(recipe: Any) -> str:
    """The precision the recipe's vectors are computed in (``"bfloat16"``, ``"float32"``, ``"float16"``)."""
    from llamaindex_posfair.encoders.precision import precision_name

    return precision_name(next(iter(recipe.vectors.values())).dtype)


#: Plan action -> what the dry run calls it.
PLAN_WORDS = {
    "new": "add",
    "changed": "replace",
    "partial": "complete",
    "cleanup": "clean up",
    "unchanged": "unchanged",
}


def plan_dict(plan: Any, report: Any) -> dict[str, Any]:
    """The dry run's plan as JSON: document ids per action, the ids ``--prune`` would remove, the files skipped."""
    out: dict[str, Any] = {"dry_run": True, "collection": report.collection}
    for action, word in PLAN_WORDS.items():
        out[word.replace(" ", "_")] = plan.doc_ids(action)
    out["remove"] = list(plan.prune)
    out["skipped"] = [{"source": s.source, "reason": s.reason} for s in report.skipped]
    return out


def print_plan(args: argparse.Namespace, plan: Any, report: Any) -> None:
    """The dry run: what would be added, replaced and removed (``--json``: :func:`plan_dict`)."""
    data = plan_dict(plan, report)
    if args.json:
        print(json.dumps({**data, "storage": options.storage_label(args)}, indent=2))
        return
    print(f"dry run: nothing written to collection {args.collection!r} in {options.storage_label(args)}")
    for key in ("add", "replace", "complete", "clean_up", "remove"):
        ids = data[key]
        if ids:
            print(f"  would {key.replace('_', ' ')} {len(ids)}: {', '.join(ids)}")
    print(f"  unchanged: {len(data['unchanged'])}")
    for s in report.skipped:
        print(f"  skipped {s.source}: {s.reason}")


def print_report(args: argparse.Namespace, report: Any, precision: str) -> None:
    """The ingestion report as JSON (``--json``: ``report.to_dict()`` plus ``storage`` and ``precision``, the
    collection's recorded precision) or as a summary."""
    where = options.storage_label(args)
    if args.json:
        print(json.dumps({**report.to_dict(), "storage": where, "precision": precision}, indent=2))
        return
    print(report.summary())
    print(
        f"stored in {where} ({precision}), vectors {sorted(report.to_dict().get('vectors', {}))}; query with: "
        f'posfair query "..." --collection {args.collection}'
    )
