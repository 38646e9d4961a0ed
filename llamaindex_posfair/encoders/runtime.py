"""Inference runtimes of the plain encoder: eager PyTorch (``"torch"``), ONNX Runtime (``"onnx"``) or OpenVINO.

``EncoderSpec.runtime`` names the runtime; ``"torch"`` is the default and runs every feature. ``"onnx"`` and
``"openvino"`` run one cached ONNX export of the transformer module on the CPU in float32; tokenising and the
modules after the transformer stay in PyTorch. Calibration and ``[DUMP]`` prefixes need attention hooks, which
only torch has (:func:`check_runtime_settings`, :func:`check_no_prefix`). The export, its cache key and its
checks: docs/encoders.md, "Runtimes".

Example:
    >>> from llamaindex_posfair.encoders.spec import EncoderSpec
    >>> spec = EncoderSpec(calibration=None, runtime="onnx")
    >>> spec.resolved().dtype
    'float32'
    >>> spec.fingerprint() != spec.model_copy(update={"runtime": "torch"}).fingerprint()
    True
    >>> spec.load().encode_query("where is the mill?").shape  # doctest: +SKIP
    (384,)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from llamaindex_posfair.encoders.precision import AUTO
from llamaindex_posfair.encoders.weights import cache_root, file_sha256

__all__ = [
    "RUNTIMES",
    "ExportedTransformer",
    "Runtime",
    "check_calibration",
    "check_no_prefix",
    "check_runtime_settings",
    "export_settings",
    "onnx_cache_folder",
]

logger = logging.getLogger(__name__)

Runtime = Literal["torch", "onnx", "openvino"]
#: Every runtime, the default first.
RUNTIMES: tuple[str, ...] = ("torch", "onnx", "openvino")

#: Version of the export recipe below: a change makes every cached export stale.
EXPORT_FORMAT = 1
OPSET = 17
#: Model inputs the export passes, in the order of the exported graph's inputs.
_INPUT_ORDER = ("input_ids", "attention_mask", "token_type_ids")
_MODEL_FILE = "model.onnx"
_RECORD_FILE = "export.json"
_INSTALL_HINTS = {
    "onnx": "pip install 'llamaindex-posfair[onnx]' (onnxruntime and onnx)",
    "openvino": "pip install 'llamaindex-posfair[openvino]' (openvino and onnx)",
}
_TRACE_TEXTS = ["a", "a padded batch traces the attention mask with its padding positions"]


# ---------------------------------------------------------------------- settings checks
def check_calibration(runtime: str, calibration: Any) -> None:
    """Raise unless ``calibration`` can run on ``runtime`` (only torch has the attention hooks it needs).

    Raises:
        ValueError: a calibration with a runtime other than torch; the message names the fix.
    """
    if runtime != "torch" and calibration is not None:
        raise ValueError(
            f"runtime={runtime!r} runs the plain encoder only, got calibration={calibration!r}: calibration "
            "needs attention hooks, which only runtime='torch' has; pass calibration=None for the plain "
            "encoder, or runtime='torch' to calibrate"
        )


def check_runtime_settings(runtime: str, calibration: Any, dtype: str | None, device: str | None) -> None:
    """Raise unless the calibration, dtype and device can run on ``runtime`` (torch runs them all).

    Raises:
        ValueError: a calibration, a dtype other than float32, or a device other than the CPU with a runtime
            other than torch; the message names the setting, the value and the fix.
    """
    check_calibration(runtime, calibration)
    if runtime == "torch":
        return
    if dtype not in (AUTO, "float32", None):
        raise ValueError(
            f"runtime={runtime!r} computes in float32, got dtype={dtype!r}; pass dtype='float32' "
            f"(or leave it 'auto'), or runtime='torch' to compute in {dtype}"
        )
    if device is not None and str(device).split(":", 1)[0] != "cpu":
        raise ValueError(
            f"runtime={runtime!r} runs on the CPU, got device={device!r}; pass device='cpu' (or None), "
            "or runtime='torch' to run on this device"
        )


def check_no_prefix(runtime: str, dump_tokens: int, model: str) -> None:
    """Raise if a model with ``[DUMP]`` prefix tokens is asked to run on a runtime other than torch.

    Raises:
        ValueError: ``dump_tokens`` > 0 with a runtime other than torch; the message names the fix.
    """
    if runtime != "torch" and dump_tokens > 0:
        raise ValueError(
            f"runtime={runtime!r} cannot run model {model!r}: its {dump_tokens} [DUMP] prefix tokens need "
            "attention hooks, which only runtime='torch' has; pass runtime='torch' for this model"
        )


# ---------------------------------------------------------------------- the export and its cache
def _import_runtime(runtime: str) -> Any:
    """The module of ``runtime`` (``onnxruntime`` or ``openvino``).

    Raises:
        ImportError: it is not installed; the message names the extra.
    """
    try:
        if runtime == "openvino":
            import openvino

            return openvino
        import onnxruntime
    except ImportError as exc:
        raise ImportError(
            f"runtime={runtime!r} needs its package: {_INSTALL_HINTS[runtime]}; or pass runtime='torch'"
        ) from exc
    return onnxruntime


def _input_names(st: Any) -> list[str]:
    """The model inputs the tokenizer produces and the transformer's forward accepts, in graph order."""
    import inspect

    features = st.preprocess(["a"])
    accepted = inspect.signature(st[0].auto_model.forward).parameters
    return [name for name in _INPUT_ORDER if name in features and name in accepted]


def export_settings(st: Any, weights: str) -> dict[str, Any]:
    """What an export depends on: the weights identity, the inputs, the export recipe and the library versions.

    Args:
        st: the loaded ``SentenceTransformer`` (float32, CPU).
        weights: the content hash of its weights (``EncoderSpec.weights`` of the pinned spec).
    """
    import torch
    import transformers

    return {
        "format": EXPORT_FORMAT,
        "opset": OPSET,
        "weights": weights,
        "inputs": _input_names(st),
        "torch": torch.__version__.split("+", 1)[0],
        "transformers": transformers.__version__,
    }


def onnx_cache_folder(settings: dict[str, Any]) -> Path:
    """The folder of the export that ``settings`` (:func:`export_settings`) describe:
    ``$POSFAIR_CACHE_DIR/onnx/<16 hex digits>``."""
    blob = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return cache_root() / "onnx" / hashlib.sha256(blob.encode()).hexdigest()[:16]


def _trace_inputs(st: Any, names: list[str]) -> tuple[Any, ...]:
    """A padded batch: transformers' masking takes Python branches when traced, so the traced batch must pad."""
    features = st.preprocess(_TRACE_TEXTS)
    if bool(features["attention_mask"].all()):
        raise RuntimeError("the trace batch for the ONNX export has no padding; the export would ignore the mask")
    return tuple(features[name].cpu() for name in names)


def _export_model(st: Any, names: list[str], path: Path) -> None:
    """Export ``st``'s transformer to ``path`` (inputs ``names``, output ``token_embeddings``)."""
    import torch

    try:
        import onnx  # noqa: F401  (torch.onnx.export writes the model with it)
    except ImportError as exc:
        raise ImportError(
            f"the ONNX export needs the onnx package: {_INSTALL_HINTS['onnx']}; or pass runtime='torch'"
        ) from exc
    model = st[0].auto_model

    class _Tokens(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(names, inputs)), return_dict=True).last_hidden_state

    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "token_embeddings"]}
    wrapper = _Tokens().eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            _trace_inputs(st, names),
            str(path),
            input_names=names,
            output_names=["token_embeddings"],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    model.eval()


def _write_export(st: Any, settings: dict[str, Any], folder: Path) -> None:
    """Export into a scratch folder beside ``folder``, then move it into place (another process's export wins)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".export-"))
    try:
        _export_model(st, settings["inputs"], scratch / _MODEL_FILE)
        record = {**settings, "sha256": file_sha256(scratch / _MODEL_FILE)}
        (scratch / _RECORD_FILE).write_text(json.dumps(record, indent=1, sort_keys=True))
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # another process moved its export in first: use that one
            os.replace(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _cached_problem(settings: dict[str, Any], folder: Path) -> str | None:
    """Why the export in ``folder`` cannot be used for ``settings`` (``None``: it can)."""
    try:
        record = json.loads((folder / _RECORD_FILE).read_text())
    except (OSError, ValueError) as exc:
        return f"its record is unreadable ({exc})"
    stale = sorted(k for k in settings if record.get(k) != settings[k])
    if stale:
        return f"it was exported with other settings ({', '.join(stale)})"
    model = folder / _MODEL_FILE
    if not model.is_file() or file_sha256(model) != record.get("sha256"):
        return "its model file is missing or changed since the export"
    return None


Run = Callable[[dict[str, Any]], Any]


def _onnxruntime_run(path: Path, threads: int) -> Run:
    ort = _import_runtime("onnx")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(["token_embeddings"], feeds)[0]


def _openvino_run(path: Path, threads: int) -> Run:
    ov = _import_runtime("openvino")
    settings = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads}
    compiled = ov.Core().compile_model(str(path), "CPU", settings)
    output = compiled.output(0)
    return lambda feeds: compiled.create_infer_request().infer(feeds)[output]  # one request per call: thread-safe


_RUNNERS: dict[str, Callable[[Path, int], Run]] = {"onnx": _onnxruntime_run, "openvino": _openvino_run}


def _cached_run(st: Any, settings: dict[str, Any], runtime: str, threads: int) -> Run:
    """``runtime``'s runner of the cached export, exported first if absent; exported again once (with a
    warning) if the cached export is stale or the runtime cannot load it."""
    folder = onnx_cache_folder(settings)
    if not folder.exists():
        logger.info("exporting the transformer to ONNX once, into %s", folder)
        _write_export(st, settings, folder)
    problem = _cached_problem(settings, folder)
    if problem is None:
        try:
            return _RUNNERS[runtime](folder / _MODEL_FILE, threads)
        except ImportError:
            raise
        except Exception as exc:  # the runtimes raise their own exception types for an unreadable model
            problem = f"{runtime} cannot load it ({type(exc).__name__}: {exc})"
    logger.warning("the cached ONNX export in %s is not usable: %s; exporting it again", folder, problem)
    _write_export(st, settings, folder)
    return _RUNNERS[runtime](folder / _MODEL_FILE, threads)


class ExportedTransformer:
    """The transformer module of a ``SentenceTransformer``, exported to ONNX and run on the CPU by ONNX Runtime or
    OpenVINO.

    Built with :meth:`load` (the export is cached once per weights and export settings, and shared by both
    runtimes); :meth:`forward` runs the exported transformer, then the model's other modules (pooling, ...)
    in PyTorch.

    Args:
        run: feeds (input name -> int64 array) -> token embeddings ``[batch, sequence, hidden]``.
        input_names: the export's inputs, in order.
        runtime: ``"onnx"`` or ``"openvino"``.

    Example:
        >>> from llamaindex_posfair import BUNDLED_MINILM, PosFairEncoder      # doctest: +SKIP
        >>> enc = PosFairEncoder(BUNDLED_MINILM, calibration=None)             # doctest: +SKIP
        >>> st = enc.sentence_transformer                                      # doctest: +SKIP
        >>> exported = ExportedTransformer.load(st, enc.spec.weights, "onnx")  # doctest: +SKIP
        >>> exported.forward(st, st.preprocess(["a"]))["sentence_embedding"].shape  # doctest: +SKIP
        torch.Size([1, 384])
    """

    def __init__(self, run: Run, input_names: list[str], runtime: str) -> None:
        self._run = run
        self.input_names = list(input_names)
        self.runtime = runtime

    @classmethod
    def load(cls, st: Any, weights: str, runtime: str, threads: int | None = None) -> ExportedTransformer:
        """The runtime of ``st``'s transformer, from the cached export (exported first if needed).

        Args:
            st: a float32 ``SentenceTransformer`` on the CPU whose first module is a ``Transformer``.
            weights: the content hash of its weights (the cache key's model part).
            runtime: ``"onnx"`` or ``"openvino"``.
            threads: the runtime's intra-op threads; ``None`` = torch's thread count.

        Raises:
            ImportError: the runtime's package (or onnx, for the export) is not installed; the message names
                the extra.
            ValueError: an unknown runtime, or the model is not float32 on the CPU, or has no transformer
                module first.
        """
        import torch

        if runtime not in _RUNNERS:
            raise ValueError(f"runtime must be one of {sorted(_RUNNERS)} for an exported model, got {runtime!r}")
        _import_runtime(runtime)
        model = getattr(st[0], "auto_model", None)
        if not isinstance(model, torch.nn.Module):
            raise ValueError(
                f"runtime={runtime!r} needs a sentence-transformers model whose first module is a Transformer; "
                "pass runtime='torch' for this model"
            )
        parameter = next(model.parameters())
        if parameter.dtype != torch.float32 or parameter.device.type != "cpu":
            raise ValueError(
                f"runtime={runtime!r} exports a float32 model on the CPU, got {parameter.dtype} on "
                f"{parameter.device}; pass dtype='float32' and device='cpu'"
            )
        settings = export_settings(st, weights)
        run = _cached_run(st, settings, runtime, threads or torch.get_num_threads())
        return cls(run, settings["inputs"], runtime)

    def forward(self, st: Any, features: dict[str, Any]) -> dict[str, Any]:
        """``st``'s forward with its transformer run by the exported model.

        Args:
            st: the ``SentenceTransformer`` the export was made from.
            features: its tokenised batch (``st.preprocess``).

        Returns:
            ``features`` with ``token_embeddings`` and what the later modules add (``sentence_embedding``).
        """
        import numpy as np
        import torch

        feeds = {name: features[name].cpu().numpy().astype(np.int64) for name in self.input_names}
        out = {**features, "token_embeddings": torch.from_numpy(np.asarray(self._run(feeds), dtype=np.float32))}
        for module in list(st)[1:]:
            out = module(out)
        return out
