"""``posfair ingest PATH --collection NAME``: embed a folder of .txt/.md files into Qdrant.

Storage is Qdrant's embedded local mode at ``./.posfair/qdrant`` unless
``--path`` or ``--qdrant-url`` says otherwise (the API key of a server comes
from the ``QDRANT_API_KEY`` environment variable and is never logged).
Re-running is idempotent; an interrupted run is completed by running it again.

Example:
    posfair ingest examples/data --collection demo
    posfair ingest docs/ --collection docs --both-vectors --strength 0.3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_STORAGE = os.path.join(".posfair", "qdrant")
DEFAULT_MODEL = "bundled:all-MiniLM-L6-v2"
API_KEY_ENV = "QDRANT_API_KEY"


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


# --------------------------------------------------------------------------- shared with `posfair query`
def add_storage_args(p: argparse.ArgumentParser) -> None:
    """``--collection``, ``--path``, ``--qdrant-url``, ``--allow-insecure-api-key``."""
    p.add_argument("--collection", default="posfair", help="Qdrant collection name (default: posfair)")
    p.add_argument(
        "--path",
        default=None,
        help=f"embedded Qdrant storage folder (default: {DEFAULT_STORAGE}); one process at a time",
    )
    p.add_argument(
        "--qdrant-url",
        default=None,
        help=f"use a Qdrant server instead of embedded storage; API key from ${API_KEY_ENV}",
    )
    p.add_argument(
        "--allow-insecure-api-key",
        action="store_true",
        help=f"allow sending ${API_KEY_ENV} over plain http (refused by default)",
    )


def add_model_args(p: argparse.ArgumentParser) -> None:
    """Model and calibration options."""
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="sentence-transformers model name or path (default: the bundled all-MiniLM-L6-v2, offline)",
    )
    p.add_argument("--no-calibration", action="store_true", help="plain model, no position-fair calibration")
    p.add_argument("--basket-size", type=int, default=128, help="calibration basket size B (default 128)")
    p.add_argument("--strength", type=float, default=0.5, help="calibration strength lambda in [0, 1] (default 0.5)")
    p.add_argument("--layers", default="last_half", help='"last", "last_half" or comma-separated layer indices')
    p.add_argument(
        "--preset",
        default=None,
        help='a named calibration preset instead of --basket-size/--strength/--layers, e.g. "paper" or '
        '"posfair-minilm" (chosen on the shipped benchmark; see README)',
    )
    p.add_argument("--max-length", type=int, default=None, help="tokens per text incl. special (default: model's)")
    p.add_argument("--encode-batch-size", type=int, default=32, help="texts per forward pass (default 32)")
    p.add_argument("--query-prompt", default=None, help="text prepended to queries")
    p.add_argument("--document-prompt", default=None, help="text prepended to documents")
    p.add_argument("--device", default=None, help='torch device, e.g. "cpu" or "cuda" (default: auto)')
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"], help="model dtype")
    p.add_argument("--trust-remote-code", action="store_true", help="run code shipped with a hub model")


def calibration_from_args(args: argparse.Namespace) -> Any:
    """The ``CalibrationConfig`` the flags describe (None with --no-calibration)."""
    from pydantic import ValidationError

    from llamaindex_posfair.calibration.config import CalibrationConfig

    if args.no_calibration:
        return None
    if getattr(args, "preset", None):
        from llamaindex_posfair.calibration.presets import preset

        if (args.basket_size, args.strength, args.layers) != (128, 0.5, "last_half"):
            raise CliError("--preset replaces --basket-size/--strength/--layers; pass either the preset or the flags")
        try:
            return preset(args.preset)
        except (KeyError, ValueError) as exc:
            raise CliError(str(exc).strip("'\"")) from None
    layers: Any = args.layers
    if layers not in ("last", "last_half"):
        try:
            layers = tuple(int(x) for x in layers.split(","))
        except ValueError:
            raise CliError(
                f'--layers must be "last", "last_half" or comma-separated integers, got {args.layers!r}'
            ) from None
    try:
        return CalibrationConfig(basket_size=args.basket_size, strength=args.strength, layers=layers)
    except ValidationError as exc:
        raise CliError("; ".join(e["msg"] for e in exc.errors())) from None


def load_encoder_from_args(args: argparse.Namespace) -> Any:
    """Load the ``PosFairEncoder`` the flags describe; unknown models become a CliError."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # pragma: no cover - cosmetic
        pass
    from llamaindex_posfair.integrations.embedding import load_encoder

    if not getattr(args, "verbose", False):
        for name in ("sentence_transformers", "transformers", "httpx"):
            logging.getLogger(name).setLevel(logging.WARNING)
    calibration = calibration_from_args(args)
    try:
        return load_encoder(
            args.model,
            calibration,
            max_length=args.max_length,
            device=args.device,
            dtype=args.dtype,
            query_prompt=args.query_prompt,
            document_prompt=args.document_prompt,
            batch_size=args.encode_batch_size,
            trust_remote_code=args.trust_remote_code,
        )
    except (OSError, ValueError) as exc:
        raise CliError(f"--model {args.model!r}: {exc}") from None


def open_client(args: argparse.Namespace, *, must_exist: bool = False, retry: bool = False) -> Any:
    """Open embedded storage (default) or a server, with clear errors.

    With ``retry=True`` a server client is wrapped in
    :class:`qdrant_tools.retry.RetryingClient` (idempotent calls are retried with
    bounded backoff on timeouts, 5xx and 429; never on 4xx).

    Raises:
        CliError: the embedded folder is locked by another process, does not exist
            (``must_exist``), the server is unreachable, or an API key would be sent
            over plain http.
    """
    from qdrant_client import QdrantClient

    if args.qdrant_url:
        url = args.qdrant_url
        api_key = os.environ.get(API_KEY_ENV) or None
        if api_key and url.lower().startswith("http://") and not args.allow_insecure_api_key:
            raise CliError(
                f"refusing to send ${API_KEY_ENV} over plain http to {url}; use an https:// URL, "
                f"unset {API_KEY_ENV}, or pass --allow-insecure-api-key"
            )
        try:
            client = QdrantClient(url=url, api_key=api_key, timeout=10)
            client.get_collections()
        except Exception as exc:  # network: report, do not retry here
            raise CliError(
                f"cannot reach Qdrant at {url} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                "start the server, check --qdrant-url and the API key, or drop --qdrant-url to use embedded storage"
            ) from None
        if retry:
            from qdrant_tools.retry import RetryingClient

            return RetryingClient(client)
        return client
    path = args.path or DEFAULT_STORAGE
    if must_exist and not os.path.isdir(path):
        raise CliError(
            f"no embedded Qdrant storage at {path!r}; run `posfair ingest PATH --collection NAME` first "
            "(or pass --path / --qdrant-url)"
        )
    try:
        return QdrantClient(path=path)
    except RuntimeError as exc:
        if "already accessed" in str(exc):
            raise CliError(
                f"embedded Qdrant storage {path!r} is in use by another process (embedded mode allows one client "
                "per folder); wait for it to finish, use another --path, or run a Qdrant server (--qdrant-url)"
            ) from None
        raise


# --------------------------------------------------------------------------- ingest
def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ingest",
        help="embed a folder of .txt/.md files into a Qdrant collection (idempotent)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", metavar="PATH", help="folder of .txt/.md files, or one file")
    add_storage_args(p)
    add_model_args(p)
    p.add_argument(
        "--vector-name",
        default=None,
        help='Qdrant vector name (default: "calibrated", or "vanilla" with --no-calibration)',
    )
    p.add_argument(
        "--both-vectors",
        action="store_true",
        help='store a "vanilla" and a "calibrated" vector per chunk (one model load)',
    )
    p.add_argument("--chunk-tokens", type=int, default=None, help="tokens per chunk (default: min(256, model window))")
    p.add_argument("--overlap-tokens", type=int, default=None, help="tokens shared by neighbouring chunks (default 32)")
    p.add_argument("--extensions", default=".txt,.md", help="comma-separated file suffixes (default .txt,.md)")
    p.add_argument("--batch-size", type=int, default=256, help="chunks per embed + upsert step (default 256)")
    p.add_argument("--prune", action="store_true", help="delete stored documents whose file is gone")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run_ingest)


def _vectors(args: argparse.Namespace, encoder: Any) -> dict[str, Any]:
    from llamaindex_posfair.integrations.view import CalibrationView

    if args.both_vectors:
        if encoder.calibration is None:
            raise CliError("--both-vectors needs calibration on; drop --no-calibration")
        if args.vector_name:
            raise CliError("--both-vectors writes the names 'vanilla' and 'calibrated'; drop --vector-name")
        return {"vanilla": CalibrationView(encoder, None), "calibrated": encoder}
    name = args.vector_name or ("vanilla" if encoder.calibration is None else "calibrated")
    return {name: encoder}


def run_ingest(args: argparse.Namespace) -> int:
    from qdrant_tools.ingest import IngestConfig, ingest_path
    from qdrant_tools.schema import SchemaMismatchError

    try:
        if not os.path.exists(args.source):
            raise CliError(f"PATH {args.source!r} does not exist; pass a folder of .txt/.md files or one file")
        try:
            config = IngestConfig(
                chunk_tokens=args.chunk_tokens,
                overlap_tokens=args.overlap_tokens,
                extensions=tuple(e.strip() for e in args.extensions.split(",") if e.strip()),
                batch_size=args.batch_size,
                prune=args.prune,
                show_progress=not args.no_progress,
            )
        except ValueError as exc:
            raise CliError(str(exc)) from None
        client = open_client(args, retry=True)  # fail on storage problems before loading the model
        try:
            encoder = load_encoder_from_args(args)
            vectors = _vectors(args, encoder)
            try:
                report = ingest_path(client, args.collection, args.source, vectors, config)
            except (SchemaMismatchError, ValueError) as exc:
                raise CliError(str(exc)) from None
            except Exception as exc:
                print(
                    f"posfair ingest: stopped by {type(exc).__name__}: {exc}\n"
                    "chunks already stored are kept; rerun the same command to finish (nothing is duplicated)",
                    file=sys.stderr,
                )
                return 1
        finally:
            client.close()
    except CliError as exc:
        print(f"posfair ingest: error: {exc}", file=sys.stderr)
        return 2
    where = args.qdrant_url or (args.path or DEFAULT_STORAGE)
    if args.json:
        print(json.dumps({**report.to_dict(), "storage": where}, indent=2))
    else:
        print(report.summary())
        print(
            f"stored in {where}, vectors {sorted(vectors)}; query with: "
            f'posfair query "..." --collection {args.collection}'
        )
    return 0
