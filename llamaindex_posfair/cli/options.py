"""Option groups and error handling shared by every ``posfair`` sub-command.

One flag name means one thing in every sub-command, and a list is one comma-separated value; the rules
and the table of shared flags are ``docs/cli.md`` (``tests/cli/test_vocabulary.py`` checks them against the
parser). A user error raises :class:`CliError`.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import re
from collections.abc import Callable
from typing import Any

#: Embedded Qdrant storage used when neither ``--path`` nor ``--qdrant-url`` is given.
DEFAULT_STORAGE = os.path.join(".posfair", "qdrant")
logger = logging.getLogger(__name__)
API_KEY_ENV = "QDRANT_API_KEY"


class CliError(Exception):
    """A user-facing error: printed as ``posfair CMD: error: ...`` without a traceback, exit status 2."""


Handler = Callable[[argparse.Namespace], int]


def user_errors(*kinds: type[Exception]) -> Callable[[Handler], Handler]:
    """Decorate a handler so exceptions of ``kinds`` (messages meant for the user) become :class:`CliError`.

    Example:
        >>> @user_errors(ValueError)
        ... def handler(args):
        ...     raise ValueError("--n must be >= 2, got 1")
        >>> handler(argparse.Namespace())  # doctest: +SKIP
        Traceback (most recent call last):
        CliError: --n must be >= 2, got 1
    """

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def run(args: argparse.Namespace) -> int:
            try:
                return handler(args)
            except kinds as exc:
                logger.debug("user error in %s", handler.__name__, exc_info=True)
                raise CliError(str(exc)) from None

        return run

    return decorate


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers ``>= minimum`` (argparse names the flag in its error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


# --------------------------------------------------------------------------- one vocabulary
def comma_list(item: Callable[[str], Any], *, allow_empty: bool = False) -> Callable[[str], tuple[Any, ...]]:
    """An argparse ``type`` for one comma-separated list: ``"4,8"`` -> ``(item("4"), item("8"))``.

    ``allow_empty``: ``""`` is the empty tuple (otherwise an error).

    Example:
        >>> comma_list(int)("4, 8")
        (4, 8)
    """
    name = getattr(item, "__name__", "value")

    def parse(text: str) -> tuple[Any, ...]:
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if not parts and not allow_empty:
            raise argparse.ArgumentTypeError(f"expected comma-separated values ({name}), got {text!r}")
        try:
            return tuple(item(part) for part in parts)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            detail = str(exc) if isinstance(exc, argparse.ArgumentTypeError) else f"expected {name}, got {exc}"
            raise argparse.ArgumentTypeError(detail if len(parts) == 1 else f"{detail} (in {text!r})") from None

    parse.__name__ = f"comma-separated {name}" + (" or empty" if allow_empty else "")
    return parse


# --------------------------------------------------------------------------- storage
def add_storage_args(p: argparse.ArgumentParser, *, collection: bool = True, server_only: bool = False) -> None:
    """``--collection``, ``--path``, ``--qdrant-url``, ``--allow-insecure-api-key``."""
    if collection:
        p.add_argument("--collection", default="posfair", help="Qdrant collection name (default: posfair)")
    if not server_only:
        p.add_argument(
            "--path",
            default=None,
            help=f"embedded Qdrant (Edge) storage folder (default: {DEFAULT_STORAGE}); one process at a time",
        )
    p.add_argument(
        "--qdrant-url",
        default=None,
        required=server_only,
        help=f"Qdrant server URL, e.g. https://host:6333, instead of embedded storage; API key from ${API_KEY_ENV}",
    )
    p.add_argument(
        "--allow-insecure-api-key",
        action="store_true",
        help=f"allow sending ${API_KEY_ENV} over plain http (refused by default)",
    )


def storage_label(args: argparse.Namespace) -> str:
    """Where the command reads or writes (for messages and JSON output)."""
    return args.qdrant_url or (getattr(args, "path", None) or DEFAULT_STORAGE)


def open_client(
    args: argparse.Namespace, *, must_exist: bool = False, retry: bool = False, auto_index: bool = True
) -> Any:
    """Open the storage the flags name through :func:`qdrant_tools.store.open_store`, with CLI errors.

    Embedded (default): the Qdrant Edge store in ``--path`` (default ``./.posfair/qdrant``). Server:
    ``--qdrant-url``, key from ``$QDRANT_API_KEY``; with ``retry=True`` wrapped in
    :class:`qdrant_tools.retry.RetryingClient`. ``auto_index=False``: the embedded store does not index in
    the background (an ingestion builds the index once, when it has written everything).

    Raises:
        CliError: the folder is locked by another process, missing (``must_exist``), written by
            the old local mode (with how to migrate), not a store; the server is unreachable;
            an API key would be sent over plain http.
    """
    from qdrant_tools.store import StoreError, open_store

    url = args.qdrant_url
    try:
        return open_store(
            path=None if url else (getattr(args, "path", None) or DEFAULT_STORAGE),
            url=url,
            must_exist=must_exist,
            allow_insecure_api_key=args.allow_insecure_api_key,
            retry=retry,
            auto_index=auto_index,
        )
    except (StoreError, ValueError) as exc:
        raise CliError(str(exc)) from None


# --------------------------------------------------------------------------- model (one EncoderSpec)
def add_compact_storage_args(g: Any) -> None:
    """``--fused-quantization`` and ``--node-on-disk``: how the fused rows and node vectors are kept
    (:class:`qdrant_tools.layout.NodeLayout` ``fused_quantization``, ``node_on_disk``)."""
    g.add_argument(
        "--fused-quantization",
        choices=("int8", "binary", "none"),
        default=None,
        help="'int8' / 'binary': searches scan a quantized copy of the fused rows kept in RAM, and their float "
        "rows, memory-mapped, re-score the best hits; 'none': float rows in RAM (default: the default layout's)",
    )
    g.add_argument(
        "--node-on-disk",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="memory-map the float node vectors (their HNSW searches the int8 copy in RAM) "
        "(default: the default layout's)",
    )


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The flags of one :class:`~llamaindex_posfair.encoders.spec.EncoderSpec` (see :func:`spec_from_args`)."""
    from llamaindex_posfair.encoders.models import BUNDLED_MINILM

    g = p.add_argument_group("model and calibration")
    g.add_argument(
        "--model",
        default=None,
        help=f"model folder or hub name (default: the collection's, else {BUNDLED_MINILM}, the bundled model, offline)",
    )
    g.add_argument(
        "--no-calibration",
        action="store_true",
        help="plain model, no calibration (the default, unless a collection records one; ingest --no-subchunks and "
        "query on a collection without a recipe calibrate unless given this flag)",
    )
    g.add_argument(
        "--preset",
        default=None,
        help='calibrate with a named preset instead of --basket-size/--strength/--layers: "paper" (the published '
        'settings) or "posfair-minilm"',
    )
    g.add_argument(
        "--basket-size", type=int, default=None, help="calibrate with basket size B (the calibration default: 128)"
    )
    g.add_argument(
        "--strength",
        type=float,
        default=None,
        help="calibrate with strength lambda in [0, 1] (the calibration default: 0.5)",
    )
    g.add_argument(
        "--layers",
        default=None,
        help='calibrate this layer set: "last", "last_half" (the calibration default) or indices "3,4,5"',
    )
    g.add_argument(
        "--max-length", type=int_at_least(1), default=None, help="tokens per text incl. special (default: model's)"
    )
    g.add_argument("--encode-batch-size", type=int_at_least(1), default=32, help="texts per forward pass (default 32)")
    g.add_argument("--query-prompt", default=None, help="text prepended to queries")
    g.add_argument("--document-prompt", default=None, help="text prepended to documents")
    g.add_argument("--device", default=None, help='torch device, e.g. "cpu" or "cuda" (default: auto)')
    g.add_argument(
        "--dtype",
        default=None,
        choices=["float32", "bfloat16", "float16"],
        help="model dtype (default: bfloat16 where the device has native bfloat16 units, else float32; "
        "an existing collection's recorded one for ingest)",
    )
    g.add_argument(
        "--runtime",
        default=None,
        choices=["torch", "onnx", "openvino"],
        help="where the plain (uncalibrated) encoder runs: torch (default), onnx or openvino (the [onnx] / [openvino] "
        "extras; exported once and cached; an existing collection's recorded one for ingest)",
    )
    g.add_argument("--trust-remote-code", action="store_true", help="run code shipped with a hub model (opt-in)")


def parse_layers(text: str, flag: str = "--layers") -> Any:
    """One layer set from a flag value: ``"last"``, ``"last_half"`` or indices ``"3,4,5"`` (or ``"3+4+5"``).

    Raises:
        CliError: anything else.
    """
    text = text.strip()
    if text in ("last", "last_half"):
        return text
    try:
        layers = tuple(int(x) for x in text.replace("+", ",").split(",") if x.strip())
    except ValueError:
        layers = ()
    if not layers:
        raise CliError(
            f'{flag} must be "last", "last_half" or comma-separated layer indices such as 3,4,5; got {text!r}'
        )
    return layers


#: Words of the encoder's runtime checks (:mod:`llamaindex_posfair.encoders.runtime`) -> the model flags' words.
_FLAG_WORDS = (
    (r"got calibration=CalibrationConfig\(.*?\): ", "and calibration is on: "),
    (r"pass calibration=None", "pass --no-calibration"),
    (r"\(or leave it 'auto'\)", "(or drop --dtype)"),
    (r"\(or None\)", "(or drop --device)"),
    (r"\b(runtime|dtype|device)='([^']*)'", r"--\1 \2"),
)


def flag_words(message: str, table: Any = _FLAG_WORDS) -> str:
    """``message`` of an :class:`EncoderSpec` check (or of another ``table`` of regex -> flag words) with its
    settings named by their flags (``runtime='torch'`` -> ``--runtime torch``, ``calibration=None`` ->
    ``--no-calibration``)."""
    for words, flags in table:
        message = re.sub(words, flags, message)
    return message


def error_message(exc: Exception) -> str:
    """A user-facing message of ``exc`` (a pydantic ``ValidationError``: one clause per field, the settings of
    the model flags named by their flags: :func:`flag_words`)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    clauses = []
    for e in errors():
        where = ".".join(str(x) for x in e["loc"])
        message = flag_words(str(e["msg"]).removeprefix("Value error, "))
        clauses.append(f"{where}: {message}" if where else message)
    return "; ".join(clauses)


def calibration_from_args(args: argparse.Namespace, default: Any = None) -> Any:
    """The ``CalibrationConfig`` the flags describe (``None`` with ``--no-calibration``).

    ``default``: the calibration when no calibration flag is given: ``None`` (the plain model, as
    ``EncoderSpec()``), or a ``CalibrationConfig`` where a command calibrates by default.

    Raises:
        CliError: ``--preset`` together with basket/strength/layers flags, an unknown preset, invalid values.
    """
    from pydantic import ValidationError

    from llamaindex_posfair.calibration.config import CalibrationConfig
    from llamaindex_posfair.calibration.presets import preset

    explicit = {"basket_size": args.basket_size, "strength": args.strength, "layers": args.layers}
    given = {k: v for k, v in explicit.items() if v is not None}
    if not (given or args.preset or args.no_calibration):
        return default
    if args.no_calibration:
        if given or args.preset:
            raise CliError("--no-calibration switches calibration off; drop --preset/--basket-size/--strength/--layers")
        return None
    if args.preset:
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            raise CliError(f"--preset replaces {flags}; pass either the preset or the flags")
        try:
            return preset(args.preset)
        except KeyError as exc:
            raise CliError(str(exc).strip("'\"")) from None
    if "layers" in given:
        given["layers"] = parse_layers(given["layers"])
    try:
        return CalibrationConfig(**given)
    except ValidationError as exc:
        raise CliError(error_message(exc)) from None


#: EncoderSpec field -> the flag(s) that set it (named in recipe conflicts).
SPEC_FLAGS = {
    "model": "--model",
    "calibration": "the calibration flags (--preset/--basket-size/--strength/--layers/--no-calibration)",
    "max_length": "--max-length",
    "query_prompt": "--query-prompt",
    "document_prompt": "--document-prompt",
    "dtype": "--dtype",
    "runtime": "--runtime",
}


def runtime_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The run-time :class:`EncoderSpec` fields of the model flags (they never change the vectors)."""
    out: dict[str, Any] = {"batch_size": args.encode_batch_size, "trust_remote_code": args.trust_remote_code}
    if args.device is not None:
        out["device"] = args.device
    return out


def _flag_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The vector-shaping :class:`EncoderSpec` fields other than calibration that the flags set, plus run-time fields."""
    names = ("model", "max_length", "query_prompt", "document_prompt", "dtype", "runtime")
    return {**{k: getattr(args, k) for k in names if getattr(args, k, None) is not None}, **runtime_fields(args)}


def check_gpus_for_runtimes(flag: str, gpus: float, runtimes: Any, placed: str, fix: str) -> None:
    """Raise :class:`CliError` when ``flag`` asks for GPUs (``placed``: what it puts on them) for an encoder
    whose runtime, one of ``runtimes``, runs on the CPU only (onnx, openvino); ``fix``: what to pass instead."""
    exported = sorted(set(runtimes) - {"torch"})
    if gpus > 0 and exported:
        raise CliError(f"{flag} {gpus:g} {placed}, but runtime {exported[0]!r} runs on the CPU; pass {fix}")


def spec_fields_given(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`EncoderSpec` fields the model flags set explicitly (run-time fields included).

    What is not given comes from the collection's recipe (``Recipe.encoder_spec``).

    Raises:
        CliError: invalid calibration flags.
    """
    given = _flag_fields(args)
    calibration = calibration_from_args(args, default=...)  # ``...``: no calibration flag given
    if calibration is not ...:
        given["calibration"] = calibration
    return given


def spec_for_recipe(args: argparse.Namespace, recipe: Any, vector: str | None = None, client: Any = None) -> Any:
    """The spec that encodes queries of ``recipe``'s ``vector``: the recipe's with the flags given (which must
    agree; ``--dtype``, or without it the device's precision, may differ), admitted as a reader by the collection's
    gate (``integrations/gate.py``) against its points' fingerprint read through ``client`` (``None``: the recipe's).

    Raises:
        CliError: a flag contradicts the recipe (both values named), the gate refuses, or an invalid value.
    """
    from pydantic import ValidationError

    from llamaindex_posfair.integrations.gate import Gate

    try:
        gate = Gate.of(args.collection, recipe, vector, client)
        return gate.check_reader(gate.spec(spec_fields_given(args), names=SPEC_FLAGS), who="the model flags' encoder")
    except ValidationError as exc:
        raise CliError(error_message(exc)) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None


def spec_from_args(args: argparse.Namespace, calibration: Any = None) -> Any:
    """The :class:`~llamaindex_posfair.encoders.spec.EncoderSpec` the model flags describe.

    ``calibration``: the calibration without calibration flags (:func:`calibration_from_args`'s ``default``).

    Raises:
        CliError: an invalid value (the message names the flag's field).
    """
    from pydantic import ValidationError

    from llamaindex_posfair.encoders.spec import EncoderSpec

    try:
        return EncoderSpec(**_flag_fields(args), calibration=calibration_from_args(args, calibration))
    except ValidationError as exc:
        raise CliError(error_message(exc)) from None


def quiet_model_logs(args: argparse.Namespace) -> None:
    """Silence model-loading chatter unless ``--verbose``: progress bars, and the logs of the
    libraries that reset their level when imported (the policy of
    :func:`llamaindex_posfair.cli._logs.quiet_third_party`, applied again now that they may be imported).
    """
    from llamaindex_posfair.cli._logs import quiet_third_party

    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # pragma: no cover - cosmetic
        pass
    quiet_third_party(bool(getattr(args, "verbose", False)), root=False)


def load_spec(spec: Any, args: argparse.Namespace) -> Any:
    """Load ``spec``; a model that cannot be found or loaded becomes a :class:`CliError`."""
    quiet_model_logs(args)
    try:
        return spec.load()
    except (OSError, ValueError) as exc:
        raise CliError(f"--model {spec.model!r}: {exc}") from None


# --------------------------------------------------------------------------- input and output
def add_json_arg(p: argparse.ArgumentParser, what: str = "the result") -> None:
    """``--json``: print ``what`` as JSON on stdout."""
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON on stdout")


def parse_extensions(text: str) -> tuple[str, ...]:
    """``".txt,.md"`` -> ``(".txt", ".md")``.

    Raises:
        CliError: no extension given.
    """
    exts = tuple(e.strip() for e in text.split(",") if e.strip())
    if not exts:
        raise CliError(f"--extensions must list at least one suffix, e.g. .txt,.md; got {text!r}")
    return exts
