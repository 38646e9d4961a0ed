"""``posfair serve``: embeddings and reranking over HTTP, one model per Ray Serve replica.

Routes (docs/serving.md has the fields of each): OpenAI ``POST /v1/embeddings`` (+ ``input_type``);
Cohere ``POST /v1/embed``, ``/v2/embed``, ``/v1/rerank``, ``/v2/rerank``; TEI ``POST /embed``,
``/rerank``, ``GET /info``; ``POST /v1/rerank-images`` (with ``--mm-model``); ``GET /v1/models``
(model id, spec fingerprint, spec); ``GET /health`` (liveness), ``/ready`` (readiness),
``/metrics`` (Prometheus), ``/docs`` and ``/openapi.json``. A bearer token is required when
``$POSFAIR_SERVE_TOKEN`` is set. Ctrl-C or SIGTERM shuts the application down, and the
local Ray if this command started it.

Without flags it serves the encoder ``posfair ingest`` writes by default;
``--collection NAME`` serves the encoder recorded in that collection's recipe.

Example:
    posfair serve --port 8000
    posfair serve --collection demo
    ray start --head && posfair serve --ray-address auto --num-gpus 1 --replicas 4 --host 0.0.0.0
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from typing import Any

from llamaindex_posfair.cli import options
from llamaindex_posfair.cli.options import CliError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve embeddings and reranking over HTTP on Ray Serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_model_args(p)
    c = p.add_argument_group("collection (serve the encoder that wrote it)")
    c.add_argument(
        "--collection",
        default=None,
        help="serve the encoder recorded in this collection's recipe (default: the encoder "
        "posfair ingest writes by default)",
    )
    options.add_storage_args(c, collection=False)
    g = p.add_argument_group("HTTP")
    g.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 = all)")
    g.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    g.add_argument(
        "--accept-any-model",
        action="store_true",
        help="answer requests naming any model (e.g. text-embedding-3-small) with the served one; the first "
        "such name is logged once (default: a 400 naming the served model)",
    )
    g.add_argument(
        "--no-docs", action="store_true", help="switch off /openapi.json, /docs and /redoc (default: served)"
    )
    r = p.add_argument_group("Ray")
    r.add_argument("--ray-address", default=None, help='Ray cluster ("auto", "ray://head:10001"); default: local Ray')
    r.add_argument("--local-cpus", type=int, default=None, help="CPUs of a local Ray (default: all)")
    r.add_argument("--num-gpus", type=float, default=0.0, help="GPUs per model replica (0 = CPU; 0.5 packs two)")
    r.add_argument("--num-cpus", type=float, default=1.0, help="CPUs per model replica (default 1)")
    r.add_argument("--replicas", type=int, default=1, help="replicas per model deployment (default 1)")
    r.add_argument("--min-replicas", type=int, default=None, help="autoscaling: fewest replicas (with --max-replicas)")
    r.add_argument("--max-replicas", type=int, default=None, help="autoscaling: most replicas (with --min-replicas)")
    b = p.add_argument_group("batching")
    b.add_argument("--max-batch-size", type=int, default=32, help="requests merged into one batch (1 = no batching)")
    b.add_argument("--batch-wait-timeout-s", type=float, default=0.01, help="seconds a batch waits to fill")
    b.add_argument("--token-budget", type=int, default=16384, help="padded tokens per forward pass")
    b.add_argument("--call-chars", type=int, default=4096,
                   help="characters of text per model call: longer requests are cut into parts that take turns "
                   "with other requests (default 4096)")  # fmt: skip
    lim = p.add_argument_group("request limits")
    lim.add_argument("--max-body-bytes", type=int, default=32 * 2**20, help="bytes of a request body (413 above)")
    lim.add_argument("--max-request-chars", type=int, default=1_000_000,
                     help="characters of text per request, all texts together (413 above)")  # fmt: skip
    lim.add_argument("--max-inputs", type=int, default=512, help="texts per /v1/embeddings request")
    lim.add_argument("--max-documents", type=int, default=1000, help="documents per /v1/rerank request")
    lim.add_argument("--max-text-chars", type=int, default=100_000, help="characters per text")
    lim.add_argument("--max-images", type=int, default=12, help="images per /v1/rerank-images request")
    lim.add_argument("--max-image-pixels", type=int, default=40_000_000,
                     help="pixels an image may declare, checked in its header before decoding")  # fmt: skip
    lim.add_argument("--allow-image-urls", action="store_true", help="fetch http(s) image URLs (off: base64 only)")
    m = p.add_argument_group("image reranker (optional)")
    m.add_argument("--mm-model", default=None, help="Qwen2-VL / Qwen2.5-VL folder or hub id ('tiny': random, tests)")
    m.add_argument("--mm-calibration", default=None, help="fitted calibration state (.safetensors)")
    m.add_argument("--mm-dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    m.add_argument("--mm-max-pixels", type=int, default=448 * 448, help="resolution cap per image")
    m.add_argument("--mm-replicas", type=int, default=1, help="replicas of the image deployment (default 1)")
    m.add_argument("--mm-num-gpus", type=float, default=None, help="GPUs per image replica (default: --num-gpus)")
    p.set_defaults(handler=run_serve)


def config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~llamaindex_posfair.serve.config.ServeConfig` the flags describe (the spec pinned if possible).

    Raises:
        CliError: an invalid value (named by its flag) or a calibration file that does not exist.
    """
    from pydantic import ValidationError

    from llamaindex_posfair.serve import config as C

    spec = _encoder_spec(args)
    options.check_gpus_for_runtimes(
        "--num-gpus",
        args.num_gpus,
        {spec.runtime},
        "reserves GPUs for each text replica",
        "--num-gpus 0, or --runtime torch to encode on the GPUs",
    )
    with contextlib.suppress(ValueError):  # a hub model not downloaded here: the replicas download it
        # every replica then refuses other model files; an "auto" dtype stays for the replicas' hardware
        spec = spec.pinned().model_copy(update={"dtype": spec.dtype})
    if args.mm_calibration and not os.path.isfile(args.mm_calibration):
        raise CliError(
            f"--mm-calibration {args.mm_calibration!r} does not exist; fit one with "
            "AttentionGuidedCalibrator().fit(scorer, samples) and save it with .save(path)"
        )
    token = os.environ.get(C.TOKEN_ENV) or None
    try:
        return C.ServeConfig(
            encoder=spec,
            image=_image_spec(args, C),
            batching=_from_flags(C.BatchingConfig, args),
            limits=_from_flags(C.RequestLimits, args),
            scaling=_from_flags(C.ScalingConfig, args),
            api=C.ApiConfig(accept_any_model=args.accept_any_model, docs=not args.no_docs),
            token_sha256=C.token_digest(token) if token else None,
        )
    except ValidationError as exc:
        raise CliError(_flag_message(exc)) from None


def _encoder_spec(args: argparse.Namespace) -> Any:
    """The served encoder: the recipe of ``--collection``, or the flags over ``EncoderSpec()``
    (uncalibrated, as ``posfair ingest`` writes by default; calibration flags switch it on).

    Raises:
        CliError: the collection is missing or records no recipe, or a flag contradicts its recipe.
    """
    if args.collection is None:
        return options.spec_from_args(args)
    from llamaindex_posfair.integrations.recipe import read_recipe

    client = options.open_client(args, must_exist=not args.qdrant_url)
    try:
        recipe = read_recipe(client, args.collection)
        if recipe is None:
            raise CliError(
                f"collection {args.collection!r} records no recipe (written before recipes); pass the model and "
                "calibration flags used at ingest time instead of --collection, or re-ingest it"
            )
        return options.spec_for_recipe(args, recipe, client=client)  # checked by the collection's gate
    except LookupError:
        raise CliError(f"--collection {args.collection!r} not found in {options.storage_label(args)}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    finally:
        client.close()


def _image_spec(args: argparse.Namespace, C: Any) -> Any:
    if args.mm_model is None:
        if args.mm_calibration:
            raise CliError("--mm-calibration needs --mm-model (the model it was fitted for)")
        return None
    return _from_flags(C.ImageModelConfig, args, prefix="mm_")


def _from_flags(model: Any, args: argparse.Namespace, prefix: str = "") -> Any:
    """``model`` with each field that has a flag (``--PREFIX-FIELD``) set from it; the others keep their defaults."""
    return model(**{k: getattr(args, prefix + k) for k in model.model_fields if hasattr(args, prefix + k)})


def _flag_message(exc: Any) -> str:
    parts = []
    for e in exc.errors():
        name = str(e["loc"][-1]) if e["loc"] else ""
        flag = "--" + name.replace("_", "-") if name else "a setting"
        parts.append(f"{flag}: {str(e['msg']).removeprefix('Value error, ')}")
    return "; ".join(parts)


def _local_resources(args: argparse.Namespace) -> dict[str, float]:
    import torch

    return {"CPU": float(args.local_cpus or os.cpu_count() or 1), "GPU": float(torch.cuda.device_count())}


def _check_local(problem: str | None) -> None:
    """Refuse replicas a local Ray cannot place (before starting it)."""
    if problem:
        raise CliError(
            f"{problem} on this machine; lower --num-cpus / --num-gpus / --replicas (0.5 shares a CPU or GPU), "
            "raise --local-cpus, or pass --ray-address for a cluster"
        )


class _Stop(Exception):
    """Raised in the main thread by SIGTERM / SIGINT."""


#: The signal that asked this process to stop, if one did (Ray may wrap the ``_Stop`` raised inside its own
#: code in another error, e.g. a ``RaySystemError`` while a replica's handle is being deserialised).
_STOP_REQUESTED: list[str] = []


def _on_signal(signum: int, _frame: Any) -> None:
    _STOP_REQUESTED.append(signal.Signals(signum).name)
    raise _Stop(_STOP_REQUESTED[-1])


def run_serve(args: argparse.Namespace) -> int:
    from llamaindex_posfair.serve import runner
    from llamaindex_posfair.serve.config import TOKEN_ENV

    config = config_from_args(args)
    os.environ.pop(TOKEN_ENV, None)  # its digest is in the config; Ray's processes must not inherit the token
    if not runner.port_is_free(args.host, args.port):
        raise CliError(f"port {args.port} on {args.host} is in use; pick another --port or stop what holds it")
    if args.ray_address is None:
        _check_local(runner.missing_resources(config, _local_resources(args)))
    options.quiet_model_logs(args)
    try:
        owns_ray = runner.ensure_ray(args.ray_address, args.local_cpus, host=args.host)
    except (ConnectionError, RuntimeError, ValueError) as exc:  # Ray could not start or connect
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f"the Ray cluster at {args.ray_address}" if args.ray_address else "a local Ray"
        raise CliError(f"could not start {where}: {first}") from None
    _STOP_REQUESTED.clear()
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        import ray

        problem = runner.missing_resources(config, ray.cluster_resources())
        if problem:
            print(f"posfair serve: warning: {problem}; replicas wait until the cluster has them", file=sys.stderr)
        t0 = time.perf_counter()
        try:
            runner.deploy(config, args.host, args.port)
        except RuntimeError as exc:  # a replica could not start (its log is above), or a stop signal inside Ray
            if _STOP_REQUESTED:
                raise _Stop(_STOP_REQUESTED[-1]) from None
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CliError(f"the application did not start: {first}") from None
        print(
            f"posfair serve: ready at http://{args.host}:{args.port} ({config.encoder.describe()}; "
            f"{time.perf_counter() - t0:.0f}s to start); Ctrl-C stops it",
            flush=True,
        )
        while True:
            time.sleep(3600)
    except _Stop as why:
        print(f"posfair serve: {why}: shutting down", file=sys.stderr, flush=True)
    finally:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)  # a second signal must not cut the shutdown short
        runner.stop(owns_ray, config.app_name)
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0
