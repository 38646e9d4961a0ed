"""``EncoderSpec``: every setting of an encoder, declared once.

A spec is a frozen, validated, serialisable description of an encoder: which
model (and which weights), how it is calibrated, pooled, prompted, truncated
and normalised, in which dtype (by default chosen by the hardware:
:mod:`~llamaindex_posfair.encoders.precision`) and on which inference runtime
(:mod:`~llamaindex_posfair.encoders.runtime`) — plus run-time settings that do not change the
vectors (device, batch size, backend). It is what caches, fingerprints,
payloads, CLIs, servers and Ray workers exchange; the loaded model is built
from it in one place, :meth:`EncoderSpec.load`.

:meth:`EncoderSpec.fingerprint` hashes exactly the settings that shape the vectors, the weights' content hash
included; which fields those are and what follows for stored collections: docs/encoders.md, "Fields".

Example:
    >>> from llamaindex_posfair.encoders.spec import EncoderSpec
    >>> spec = EncoderSpec(max_length=256)
    >>> spec.model, spec.calibration
    ('bundled:all-MiniLM-L6-v2', None)
    >>> spec.fingerprint() == spec.model_copy(update={"device": "cpu", "batch_size": 8}).fingerprint()
    True
    >>> enc = spec.load()  # doctest: +SKIP
    >>> enc.fingerprint() == spec.fingerprint()  # doctest: +SKIP
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.loader import load_encoder
from llamaindex_posfair.encoders.models import BUNDLED_MINILM, canonical_model_id, is_local_folder, resolve_model_path
from llamaindex_posfair.encoders.precision import AUTO, precision_name, resolve_dtype
from llamaindex_posfair.encoders.runtime import RUNTIMES, Runtime, check_runtime_settings
from llamaindex_posfair.encoders.settings import SpecSettings
from llamaindex_posfair.encoders.view import CalibrationView
from llamaindex_posfair.encoders.weights import folder_identity, hub_snapshot_folder

__all__ = [
    "IN_MEMORY",
    "UNSET",
    "VECTOR_FIELDS",
    "EncoderSet",
    "EncoderSpec",
    "SpecSettings",
    "resolve_spec",
]

DType = Literal["float32", "bfloat16", "float16"]
#: Every dtype a recipe may record: ``None`` is "as saved" (collections written before automatic precision).
RECORDED_DTYPES: tuple[DType | None, ...] = (None, "float32", "bfloat16", "float16")
Backend = Literal["fast", "reference"]
PoolingName = Literal["cls", "last", "mean"]

#: Model id of an encoder wrapped around an already loaded ``SentenceTransformer``.
IN_MEMORY = "in-memory"

#: The fields that shape the vectors (everything else is loading or run time).
VECTOR_FIELDS = (
    "model",
    "weights",
    "calibration",
    "pooling",
    "max_length",
    "query_prompt",
    "document_prompt",
    "normalize",
    "dtype",
    "runtime",
)


def _one_of(name: str, value: Any, valid: tuple[Any, ...], hint: str = "") -> Any:
    if value not in valid:
        names = [f'"{v}"' for v in valid if v is not None] + (["None"] if None in valid else [])
        shown = ", ".join(names[:-1]) + f" or {names[-1]}"
        raise ValueError(f"{name} must be {shown}, got {value!r}" + (f"; {hint}" if hint else ""))
    return value


class EncoderSpec(BaseModel):
    """Everything that describes a position-fair encoder; build the model with :meth:`load`.

    Args:
        model: a local folder, a hub name, or ``"bundled:all-MiniLM-L6-v2"`` (the
            bundled model's folder is recorded as that alias, never as a path).
        weights: content hash of the model's files; ``None`` until the spec is
            pinned (:meth:`pinned`, done by :meth:`load`). A pinned spec refuses to
            load files whose contents changed.
        calibration: position-fair calibration (e.g. ``CalibrationConfig()`` or
            :func:`~llamaindex_posfair.calibration.presets.preset`), or ``None`` (default) for the plain
            model: the encoder of the shipped sub-chunk layout, which ``posfair ingest`` records
            (docs/encoders.md says why).
        pooling: load ``model`` as a plain transformers model pooled with
            ``"cls"``, ``"last"`` or ``"mean"``; ``None`` loads it as a
            sentence-transformers model with its own pooling.
        max_length: tokens per text, special tokens included; ``None`` = the model's.
        query_prompt / document_prompt: text prepended to queries / documents.
        normalize: L2-normalise embeddings.
        dtype: ``"auto"`` (default: bfloat16 where the device has native bfloat16 matrix units, else
            float32; resolved when the spec is loaded, pinned or recorded), ``"float32"``,
            ``"bfloat16"``, ``"float16"``, or ``None`` = as saved.
        dump_tokens: expected number of ``[DUMP_k]`` prefix tokens; loading fails if
            the model has another number. ``None`` accepts the model's.
        runtime: ``"torch"`` (default: eager PyTorch, every feature), ``"onnx"`` (ONNX Runtime) or
            ``"openvino"`` (OpenVINO): the exported model on the CPU in float32, for the plain encoder only
            (``calibration=None``, no ``[DUMP]`` prefix); needs ``pip install 'llamaindex-posfair[onnx]'``
            (or ``[openvino]``); :mod:`~llamaindex_posfair.encoders.runtime`.
        trust_remote_code: allow code shipped with a hub model to run (opt-in).
        backend: ``"fast"`` (default) or ``"reference"`` (nnsight, slow; same vectors).
        device: ``"cpu"``, ``"cuda"``, ...; ``None`` picks CUDA when available.
        batch_size: texts per forward pass.

    Raises:
        pydantic.ValidationError: a setting is invalid; the message names it and the fix.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())

    model: str = Field(
        BUNDLED_MINILM,
        description="Local folder, hub name, or 'bundled:all-MiniLM-L6-v2' (the model shipped with the package).",
    )
    weights: str | None = Field(
        None, description="Content hash of the model files (filled when the spec is pinned); None = not pinned yet."
    )
    calibration: CalibrationConfig | None = Field(
        None,
        description="Position-fair calibration (basket size, strength, layers, ...); None (default) = the plain "
        "model, as posfair ingest stores the sub-chunk layout.",
    )
    pooling: PoolingName | None = Field(
        None, description='Load as a plain transformers model pooled with "cls", "last" or "mean"; None = ST pooling.'
    )
    max_length: int | None = Field(
        None, ge=2, description="Maximum tokens per text, special tokens included; None = the model's limit."
    )
    query_prompt: str | None = Field(None, description="Text prepended to every query.")
    document_prompt: str | None = Field(None, description="Text prepended to every document.")
    normalize: bool = Field(True, description="L2-normalise embeddings.")
    dtype: DType | Literal["auto"] | None = Field(
        AUTO,
        description='"auto" (bfloat16 where the device has native bfloat16 units, else float32), "float32", '
        '"bfloat16", "float16"; None = as saved.',
    )
    dump_tokens: int | None = Field(
        None, ge=0, description="Expected number of [DUMP] prefix tokens; None accepts the model's."
    )
    runtime: Runtime = Field(
        "torch",
        description='Inference runtime: "torch" (every feature), "onnx" (ONNX Runtime) or "openvino" (OpenVINO); '
        "the last two run the plain encoder only, on the CPU, in float32.",
    )
    trust_remote_code: bool = Field(False, description="Allow code shipped with a hub model to run (opt-in).")
    backend: Backend = Field("fast", description='Calibration backend: "fast" or "reference" (slow, same vectors).')
    device: str | None = Field(None, description='Torch device ("cpu", "cuda", ...); None = CUDA when available.')
    batch_size: int = Field(32, gt=0, description="Texts per forward pass.")

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(
                f"model must be a local folder, a hub name or {BUNDLED_MINILM!r}, got {value!r}; "
                f"e.g. model={BUNDLED_MINILM!r}"
            )
        return canonical_model_id(value.strip())

    @field_validator("dtype", mode="before")
    @classmethod
    def _check_dtype(cls, value: Any) -> Any:
        aliases = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
        if value is not None and not isinstance(value, str):
            value = str(value).removeprefix("torch.")
        value = aliases.get(value, value)
        return _one_of(
            "dtype", value, (AUTO, "float32", "bfloat16", "float16", None), '"auto" lets the hardware choose'
        )

    @field_validator("backend", mode="before")
    @classmethod
    def _check_backend(cls, value: Any) -> Any:
        return _one_of("backend", value, ("fast", "reference"), "fast is the default; reference is for checks")

    @field_validator("runtime", mode="before")
    @classmethod
    def _check_runtime(cls, value: Any) -> Any:
        return _one_of(
            "runtime", value, RUNTIMES, '"torch" is the default; "onnx" and "openvino" run the plain encoder on a CPU'
        )

    @model_validator(mode="after")
    def _check_runtime_fits(self) -> EncoderSpec:
        check_runtime_settings(self.runtime, self.calibration, self.dtype, self.device)
        return self

    @field_validator("pooling", mode="before")
    @classmethod
    def _check_pooling(cls, value: Any) -> Any:
        return _one_of("pooling", value, (None, "cls", "last", "mean"), "None keeps the model's own pooling")

    # ------------------------------------------------------------------ identity
    def model_key(self) -> str:
        """The model part of the fingerprint: the alias or hub name; ``"local"`` for other folders
        (their identity is the weights hash, so a folder moved to another path keeps its fingerprint)."""
        if self.model in (BUNDLED_MINILM, IN_MEMORY) or not is_local_folder(self.model):
            return self.model
        return "local"

    def local_folder(self) -> str | None:
        """The folder the model loads from on this machine, or ``None`` (a hub model not yet downloaded)."""
        if self.model == IN_MEMORY:
            return None
        if is_local_folder(self.model):
            return resolve_model_path(self.model)
        return hub_snapshot_folder(self.model)

    def resolved(self) -> EncoderSpec:
        """This spec with ``dtype="auto"`` replaced by the precision of its device
        (:func:`~llamaindex_posfair.encoders.precision.default_dtype`); unchanged otherwise."""
        if self.dtype != AUTO:
            return self
        return self.model_copy(update={"dtype": resolve_dtype(self.dtype, self.device, self.runtime)})

    def pinned(self) -> EncoderSpec:
        """This spec with ``weights`` filled from the model files and its dtype :meth:`resolved`
        (unchanged if already both).

        Raises:
            ValueError: the model is a hub name that is not downloaded yet (load it once), or an
                in-memory model without weights.
        """
        spec = self.resolved()
        if spec.weights is not None:
            return spec
        folder = spec.local_folder()
        if folder is None:
            raise ValueError(
                f"cannot read the weights of model {spec.model!r} on this machine (a hub model that is not "
                "downloaded yet, or an in-memory model); load it once with spec.load(), or pass a local folder"
            )
        return spec.model_copy(update={"weights": folder_identity(folder)})

    def vector_settings(self) -> dict[str, Any]:
        """The settings that shape the vectors (JSON-ready), weights included (pins if needed)."""
        spec = self.pinned()
        data = spec.model_dump(mode="json", include=set(VECTOR_FIELDS))
        data["model"] = spec.model_key()
        if data["runtime"] == "torch":
            del data["runtime"]  # the default runtime hashes as before the runtime choice existed
        return data

    def fingerprint(self) -> str:
        """Stable 16-hex-digit hash of exactly the settings that shape the vectors.

        Device, batch size, backend, ``trust_remote_code`` and ``dump_tokens`` (a check;
        the prefix itself lives in the hashed tokenizer files) are not part of it; an
        ``"auto"`` dtype is hashed as the precision it resolves to on the spec's device and
        runtime; the runtime is hashed unless it is the default, torch.
        """
        blob = json.dumps(self.vector_settings(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def precision_twin(self, fingerprint: str) -> EncoderSpec | None:
        """This spec in another precision or runtime whose fingerprint is ``fingerprint``, or ``None`` when no
        dtype and runtime make it so (the spec then differs in more than rounding). A calibrated spec has
        twins on torch only (calibration needs torch's attention hooks)."""
        base = self.pinned()
        runtimes = RUNTIMES if base.calibration is None else ("torch",)
        for runtime in runtimes:
            for dtype in RECORDED_DTYPES:
                twin = base.model_copy(update={"dtype": dtype, "runtime": runtime})
                if twin.fingerprint() == fingerprint:
                    return twin
        return None

    # ------------------------------------------------------------------ variants and loading
    def with_calibration(self, calibration: CalibrationConfig | None) -> EncoderSpec:
        """The same encoder with another calibration (same model load; see :class:`EncoderSet`).

        Raises:
            ValueError: a calibration with a runtime other than torch (the message names the fix).
        """
        check_runtime_settings(self.runtime, calibration, self.dtype, self.device)
        return self.model_copy(update={"calibration": calibration})

    def describe(self) -> str:
        """Short human-readable description for logs and errors."""
        cal = "plain" if self.calibration is None else f"calibrated {self.calibration.fingerprint()}"
        return f"{self.model} ({cal}, fingerprint {self.fingerprint()})"

    def load(self, **overrides: Any) -> Any:
        """Load the model and return a :class:`~llamaindex_posfair.encoders.encoder.PosFairEncoder`.

        Args:
            overrides: run-time fields to change for this load (e.g. ``device="cuda"``).

        The spec does not import the encoder module (which imports this one): the
        package ``llamaindex_posfair.encoders`` registers ``PosFairEncoder.from_spec``
        as the loader (:mod:`~llamaindex_posfair.encoders.loader`).

        Raises:
            OSError: the model cannot be found locally or on the hub.
            ValueError: the files changed since the spec was pinned, or ``dump_tokens`` disagrees.
        """
        spec = self.model_copy(update=overrides) if overrides else self
        return load_encoder(spec)


class EncoderSet(BaseModel):
    """Named vectors of one collection, each an :class:`EncoderSpec`; picklable (a Ray worker recipe).

    Specs that differ only in calibration share one model load: e.g. a ``vanilla``
    and a ``calibrated`` vector per chunk cost one model in memory.

    Example:
        >>> from llamaindex_posfair.encoders.spec import EncoderSet, EncoderSpec
        >>> from llamaindex_posfair.calibration.config import CalibrationConfig
        >>> s = EncoderSet.single(EncoderSpec(calibration=CalibrationConfig()), both=True)
        >>> sorted(s.vectors)
        ['calibrated', 'vanilla']
        >>> encoders = s.load(device="cpu")  # doctest: +SKIP
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    vectors: dict[str, EncoderSpec] = Field(description="Qdrant vector name -> the spec of its encoder.")

    @field_validator("vectors")
    @classmethod
    def _check_vectors(cls, value: Mapping[str, EncoderSpec]) -> dict[str, EncoderSpec]:
        if not value:
            raise ValueError("vectors must name at least one vector, e.g. {'vanilla': EncoderSpec()}")
        for name in value:
            if not isinstance(name, str) or not name:
                raise ValueError(f"vector names must be non-empty strings, got {name!r}")
        return dict(value)

    @classmethod
    def single(cls, spec: EncoderSpec, *, both: bool = False, name: str | None = None) -> EncoderSet:
        """One vector named ``calibrated`` (or ``vanilla`` for a plain spec), or with ``both=True``
        a ``vanilla`` and a ``calibrated`` vector from the same model.

        Raises:
            ValueError: ``both`` with a plain spec, or ``both`` with a ``name``.
        """
        if both:
            if spec.calibration is None:
                raise ValueError("both vectors need calibration on: pass a spec with a CalibrationConfig")
            if name:
                raise ValueError("both vectors are named 'vanilla' and 'calibrated'; drop the vector name")
            return cls(vectors={"calibrated": spec, "vanilla": spec.with_calibration(None)})
        return cls(vectors={name or ("vanilla" if spec.calibration is None else "calibrated"): spec})

    def pinned(self) -> EncoderSet:
        """Every spec pinned to the content hash of its local model files (a hub model not yet
        downloaded stays unpinned) and its dtype resolved here, so Ray workers refuse files that
        differ from the driver's and all compute in the driver's precision."""
        out = {}
        for name, spec in self.vectors.items():
            try:
                out[name] = spec.pinned()
            except ValueError:
                out[name] = spec.resolved()
        return EncoderSet(vectors=out)

    def fingerprints(self) -> dict[str, str]:
        """Vector name -> fingerprint."""
        return {name: spec.fingerprint() for name, spec in self.vectors.items()}

    def load(self, **overrides: Any) -> dict[str, Any]:
        """Vector name -> loaded encoder; one model load per distinct non-calibration setting."""
        loaded: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for name, spec in self.vectors.items():
            base = spec.with_calibration(None).model_dump_json(exclude={"weights"})
            if base not in loaded:
                loaded[base] = spec.load(**overrides)
            out[name] = self._view(loaded[base], spec)
        return out

    def bind(self, encoder: Any) -> dict[str, Any]:
        """Vector name -> ``encoder`` or a calibration view of it (for a set of one model's calibrations).

        Raises:
            ValueError: a vector's spec differs from the encoder's in more than calibration.
        """
        base = _bound_settings(encoder.spec)
        for name, spec in self.vectors.items():
            if _bound_settings(spec) != base:
                raise ValueError(f"vector {name!r} needs another model or settings than the loaded encoder")
        return {name: self._view(encoder, spec) for name, spec in self.vectors.items()}

    @staticmethod
    def _view(encoder: Any, spec: EncoderSpec) -> Any:
        return encoder if spec.calibration == encoder.calibration else CalibrationView(encoder, spec.calibration)

    def __call__(self, device: str | None = None) -> dict[str, Any]:
        """Ray worker factory: load every vector's encoder on ``device``."""
        return self.load(device=device) if device is not None else self.load()


def _bound_settings(spec: EncoderSpec) -> dict[str, Any]:
    """What one loaded encoder fixes for every vector bound to it: the fields that shape vectors (and the prefix
    tokens) but calibration and weights, the dtype as its precision (``None``, as saved before automatic
    precision, is float32); run-time fields (device, batch size, backend) may differ."""
    keep = {*VECTOR_FIELDS, "dump_tokens"} - {"calibration", "weights"}
    data = spec.resolved().model_dump(include=keep)
    data["dtype"] = precision_name(data["dtype"])
    return data


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: Sentinel for "argument not given" where ``None`` is a meaningful value (``calibration=None``).
UNSET: Any = _Unset()


def resolve_spec(
    spec: EncoderSpec | Mapping[str, Any] | None = None,
    *,
    model: str | None = None,
    calibration: Any = UNSET,
    **settings: Any,
) -> EncoderSpec:
    """One spec from either a whole ``spec`` or its fields given one by one (the LlamaIndex classes' arguments).

    Args:
        spec: an :class:`EncoderSpec` (or its dict form, as LlamaIndex's ``from_dict`` passes it).
        model / calibration / settings: :class:`EncoderSpec` fields; with ``spec`` they must agree with it.

    Raises:
        ValueError: a field given beside ``spec`` disagrees with it, or a field is invalid.
    """
    given = dict(settings)
    if model is not None:
        given["model"] = model if spec is None else canonical_model_id(model)
    if calibration is not UNSET:
        given["calibration"] = calibration
    if spec is None:
        return EncoderSpec(**given)
    spec = spec if isinstance(spec, EncoderSpec) else EncoderSpec.model_validate(spec)
    clash = sorted(k for k, v in given.items() if getattr(spec, k, UNSET) != v)
    if clash:
        raise ValueError(
            f"settings {clash} disagree with the spec passed beside them; pass either spec= or the settings, "
            "or change the spec with spec.model_copy(update={...})"
        )
    return spec
