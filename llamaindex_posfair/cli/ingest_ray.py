"""``posfair ingest-ray PATH --collection NAME``: ``posfair ingest`` with encoding on a Ray actor pool.

Writes the same points as ``posfair ingest`` (same ids, payloads, vectors and
payload indexes); the driver is the only writer, workers load the model from
the same :class:`~llamaindex_posfair.encoders.spec.EncoderSpec` (pinned to the
driver's weights, so a worker with other files fails instead of writing other
vectors). Resumable like ``posfair ingest``.

Example:
    posfair ingest-ray examples/data --collection demo --workers 2
    posfair ingest-ray /data --collection docs --qdrant-url https://qdrant:6333 \\
        --ray-address auto --workers 8 --gpus-per-worker 1
"""

from __future__ import annotations

import argparse
from typing import Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.ingest import add_ingest_args, check_source, run_ingestion, run_settings
from llamaindex_posfair.cli.options import CliError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ingest-ray",
        help="ingest a folder with encoding on a Ray actor pool",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_ingest_args(p)
    p.add_argument("--spec", default=None, help="create/check the collection from this spec file first")
    g = p.add_argument_group("Ray")
    g.add_argument("--ray-address", default=None, help='Ray cluster ("auto", "ray://head:10001"); default: local Ray')
    g.add_argument("--local-cpus", type=int, default=2, help="CPUs of a local Ray (default 2)")
    g.add_argument("--workers", type=int, default=1, help="encoder actors (default 1)")
    g.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs per actor (0 = CPU actors)")
    g.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs per actor (default 1)")
    g.add_argument("--token-budget", type=int, default=16384, help="padded tokens per forward pass")
    g.add_argument("--docs-per-task", type=int, default=8, help="documents per actor call")
    g.add_argument("--write-ordering", default="weak", choices=["weak", "medium", "strong"])
    p.set_defaults(handler=run_ingest_ray)


def _config(args: argparse.Namespace, recipe: Any, encoder_set: Any) -> Any:
    from qdrant_tools.ray_ingest import RayIngestConfig

    options.check_gpus_for_runtimes(  # an onnx / openvino encoder runs on the CPU only
        "--gpus-per-worker",
        args.gpus_per_worker,
        {spec.runtime for spec in encoder_set.vectors.values()},
        "puts each worker's encoder on a GPU",
        "--gpus-per-worker 0 (CPU workers), or use --runtime torch for a new collection",
    )
    try:
        return recipe.ingest_settings(
            RayIngestConfig,
            num_workers=args.workers,
            num_gpus_per_worker=args.gpus_per_worker,
            num_cpus_per_worker=args.cpus_per_worker,
            token_budget=args.token_budget,
            docs_per_task=args.docs_per_task,
            write_batch_size=args.write_batch_size,
            write_ordering=args.write_ordering,
            **run_settings(args),
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _collection_spec(args: argparse.Namespace) -> Any:
    from qdrant_tools.spec import CollectionSpec, SpecError

    if not args.spec:
        return None
    try:
        spec = CollectionSpec.from_file(args.spec)
    except (SpecError, ValueError) as exc:
        raise CliError(str(exc)) from None
    if spec.name != args.collection:
        raise CliError(
            f"--spec describes collection {spec.name!r} but --collection is {args.collection!r}; make them agree"
        )
    return spec


def run_ingest_ray(args: argparse.Namespace) -> int:
    from qdrant_tools.ray_ingest import RayIngestReport, ray_ingest_documents

    check_source(args)
    collection_spec = _collection_spec(args)

    def write(client: Any, docs: list[Any], encoder_set: Any, config: Any, report: Any) -> Any:
        return ray_ingest_documents(
            client,
            args.collection,
            docs,
            encoder_set.pinned(),
            config,
            ray_address=args.ray_address,
            local_cpus=args.local_cpus,
            spec=collection_spec,
            report=report,
        )

    return run_ingestion(args, RayIngestReport(collection=args.collection), _config, write)
