"""``PosFairEncoder``: a sentence-transformers model with position-fair calibration."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.baskets import baskets_for_batch, pooling_from_sentence_transformer
from llamaindex_posfair.encoders.models import BUNDLED_MINILM, bundled_model_path, resolve_model_path
from llamaindex_posfair.encoders.precision import AUTO
from llamaindex_posfair.encoders.prefix_tokens import dump_token_ids
from llamaindex_posfair.encoders.runtime import ExportedTransformer, check_calibration, check_no_prefix
from llamaindex_posfair.encoders.settings import SpecSettings
from llamaindex_posfair.encoders.spec import IN_MEMORY, RECORDED_DTYPES, EncoderSpec
from llamaindex_posfair.encoders.weights import folder_identity, module_identity

__all__ = ["BUNDLED_MINILM", "DEFAULT", "PosFairEncoder", "bundled_model_path"]

logger = logging.getLogger(__name__)


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: Sentinel: "use the encoder's own calibration".
DEFAULT: Any = _Default()


def _torch_dtype(dtype: str | None) -> torch.dtype | None:
    return None if dtype is None else getattr(torch, dtype)


def _loaded_dtype(spec: EncoderSpec, model: Any) -> EncoderSpec:
    """``spec`` of an already loaded model: ``dtype="auto"`` is the dtype it was loaded in (never converted)."""
    if spec.dtype != AUTO:
        return spec
    name = str(next(model.parameters()).dtype).removeprefix("torch.")
    return spec.model_copy(update={"dtype": name if name in RECORDED_DTYPES else None})


def _make_backend(name: str):
    if name == "fast":
        from llamaindex_posfair.backends.fast import FastBackend

        return FastBackend()
    from llamaindex_posfair.backends.reference import ReferenceBackend

    return ReferenceBackend()


class PosFairEncoder(SpecSettings):
    """Encode queries and documents with position-fair attention calibration.

    Wraps a sentence-transformers model (or any transformers model plus a pooling
    module) and, in the layers the :class:`CalibrationConfig` names, replaces the
    pooling token's attention row with its basket-calibrated version. Every
    setting is a field of :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`
    (declared there once); the encoder keeps the *pinned* spec (with the content
    hash of its weights) as :attr:`spec`, and :meth:`fingerprint` is that spec's.

    Args:
        model_name_or_path: a local folder, a hub name, :data:`BUNDLED_MINILM`, or an
            already loaded ``SentenceTransformer`` (recorded as model ``"in-memory"``).
        calibration: the calibration settings (e.g. ``CalibrationConfig()``), or ``None`` (default) for the
            plain encoder, as :class:`~llamaindex_posfair.encoders.spec.EncoderSpec` defaults.
        spec: a complete :class:`EncoderSpec` instead of the two arguments above.
        **settings: any other :class:`EncoderSpec` field: ``backend``, ``max_length``,
            ``device``, ``dtype``, ``query_prompt``, ``document_prompt``, ``normalize``,
            ``batch_size``, ``trust_remote_code``, ``pooling``, ``dump_tokens``, ``runtime``. ``dtype``
            defaults to ``"auto"``: bfloat16 where the device has native bfloat16 matrix
            units, else float32 (an already loaded model keeps the dtype it has). ``runtime="onnx"``
            (or ``"openvino"``) runs the plain encoder in ONNX Runtime (or OpenVINO) on the CPU
            (:mod:`~llamaindex_posfair.encoders.runtime`).

    Raises:
        ValueError: a setting is invalid (the message names it and the fix), the model's
            files changed since ``spec`` was pinned, ``dump_tokens`` disagrees, or a runtime other than
            torch is asked for a model with ``[DUMP]`` prefix tokens.
        OSError: the model cannot be found locally or on the hub.
        ImportError: ``runtime="onnx"`` / ``"openvino"`` without its package installed (the message names the
            extra).

    Example:
        >>> from llamaindex_posfair import PosFairEncoder, CalibrationConfig, BUNDLED_MINILM
        >>> enc = PosFairEncoder(BUNDLED_MINILM, calibration=CalibrationConfig(strength=0.5))
        >>> enc.encode_document(["A long passage ..."]).shape
        (1, 384)
        >>> enc.encode_query("what does the passage say?").shape
        (384,)
        >>> PosFairEncoder(spec=enc.spec).fingerprint() == enc.fingerprint()
        True
    """

    def __init__(
        self,
        model_name_or_path: Any = BUNDLED_MINILM,
        calibration: CalibrationConfig | None = None,
        *,
        spec: EncoderSpec | None = None,
        **settings: Any,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        in_memory = isinstance(model_name_or_path, SentenceTransformer)
        if spec is None:
            model = IN_MEMORY if in_memory else model_name_or_path
            spec = EncoderSpec(model=model, calibration=calibration, **settings)
        elif settings or in_memory:
            raise ValueError("pass either spec= or model/calibration/settings, not both")
        spec = _loaded_dtype(spec, model_name_or_path) if in_memory else spec.resolved()
        self._backend = _make_backend(spec.backend)
        self._st = model_name_or_path if in_memory else _load_sentence_transformer(spec)
        self._configure(spec)
        self.spec = self._pin(spec)
        self._hf_model = self._find_hf_model()
        self._backend.install(self._hf_model)
        self._exported = self._load_runtime()
        self._detected_pooling = None
        if spec.calibration is not None:
            self._pooling_for(spec.calibration)  # validate early

    @classmethod
    def from_spec(cls, spec: EncoderSpec) -> PosFairEncoder:
        """Load the encoder a spec describes (the one place a spec becomes a model)."""
        return cls(spec=spec)

    def _configure(self, spec: EncoderSpec) -> None:
        if spec.device is not None:
            self._st.to(spec.device)
        if spec.dtype is not None:
            self._st.to(_torch_dtype(spec.dtype))
        if spec.max_length is not None:
            self._st.max_seq_length = spec.max_length
        self._st.eval()

    def _pin(self, spec: EncoderSpec) -> EncoderSpec:
        """``spec`` with the weights identity of what was loaded; checks ``weights`` and ``dump_tokens``."""
        folder = spec.local_folder()
        identity = folder_identity(folder) if folder else module_identity(self._st)
        if spec.weights is not None and spec.weights != identity:
            raise ValueError(
                f"the files of model {spec.model!r} changed since this spec was pinned (weights {spec.weights}, "
                f"now {identity}); re-create the spec with weights=None to use the new files"
            )
        found = len(dump_token_ids(self._st.tokenizer))
        if spec.dump_tokens is not None and found != spec.dump_tokens:
            raise ValueError(
                f"dump_tokens={spec.dump_tokens}, but model {spec.model!r} has {found} [DUMP] prefix tokens; "
                "pass dump_tokens=None to accept the model's prefix, or the folder of a model saved with "
                "save_dump_model"
            )
        return spec.model_copy(update={"weights": identity})

    def _load_runtime(self) -> ExportedTransformer | None:
        """The exported transformer of a runtime other than torch (``None`` for torch)."""
        if self.spec.runtime == "torch":
            return None
        check_no_prefix(self.spec.runtime, self.dump_tokens, self.spec.model)
        return ExportedTransformer.load(self._st, self.spec.weights, self.spec.runtime)

    # ------------------------------------------------------------------ properties
    @property
    def sentence_transformer(self):
        """The underlying ``SentenceTransformer``."""
        return self._st

    @property
    def tokenizer(self):
        """The model's Hugging Face tokenizer."""
        return self._st.tokenizer

    @property
    def dimension(self) -> int:
        """Embedding size."""
        return int(self._st.get_embedding_dimension())

    @property
    def max_length(self) -> int:
        """Maximum tokens per text, special tokens included."""
        return int(self._st.max_seq_length)

    @property
    def num_layers(self) -> int:
        """Transformer layers of the underlying model."""
        config = self._hf_model.config
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        return int(config.num_hidden_layers)

    @property
    def device(self) -> torch.device:
        """Device the model runs on."""
        return self._st.device

    @property
    def dump_tokens(self) -> int:
        """Number of ``[DUMP_k]`` prefix tokens the tokenizer defines (0 for plain models)."""
        return len(dump_token_ids(self.tokenizer))

    # ------------------------------------------------------------------ encoding
    def encode_query(self, inputs: str | Sequence[str], **kwargs: Any) -> np.ndarray:
        """Embed one query or a list of queries, as sentence-transformers' ``encode_query`` does.

        Applies ``query_prompt`` and the calibration for queries (``calibrate_queries``).

        Args:
            inputs: one query (a ``str``) or a list of queries.
            **kwargs: ``calibration``, ``batch_size``, ``show_progress_bar`` (see :meth:`encode`).

        Returns:
            ``float32`` array: ``[dimension]`` for one string, ``[len(inputs), dimension]`` for a list
            (sentence-transformers' convention; L2-normalised when the spec's ``normalize`` is on).

        Example:
            >>> enc = PosFairEncoder(BUNDLED_MINILM)                              # doctest: +SKIP
            >>> enc.encode_query("where is the mill?").shape                      # doctest: +SKIP
            (384,)
            >>> enc.encode_document(["a long passage ...", "another ..."]).shape  # doctest: +SKIP
            (2, 384)
        """
        return self._encode_one_or_many(inputs, self.encode_queries, kwargs)

    def encode_document(self, inputs: str | Sequence[str], **kwargs: Any) -> np.ndarray:
        """Embed one document or a list of documents, as sentence-transformers' ``encode_document`` does.

        Applies ``document_prompt`` and the calibration for documents; arguments and return
        shapes as :meth:`encode_query`.
        """
        return self._encode_one_or_many(inputs, self.encode_documents, kwargs)

    @staticmethod
    def _encode_one_or_many(inputs: Any, encode: Any, kwargs: dict[str, Any]) -> np.ndarray:
        return encode([inputs], **kwargs)[0] if isinstance(inputs, str) else encode(inputs, **kwargs)

    def encode_queries(self, texts: Sequence[str], **kwargs) -> np.ndarray:
        """Embed a list of queries (with ``query_prompt``) as ``[n, dimension]``; see :meth:`encode`.

        :meth:`encode_query` is the sentence-transformers name (it also takes a single string).
        """
        return self.encode(texts, prompt=self.query_prompt, role="query", **kwargs)

    def encode_documents(self, texts: Sequence[str], **kwargs) -> np.ndarray:
        """Embed a list of documents (with ``document_prompt``) as ``[n, dimension]``; see :meth:`encode`.

        :meth:`encode_document` is the sentence-transformers name (it also takes a single string).
        """
        return self.encode(texts, prompt=self.document_prompt, role="document", **kwargs)

    def encode(
        self,
        texts: Sequence[str],
        *,
        prompt: str | None = None,
        role: str = "text",
        calibration: Any = DEFAULT,
        batch_size: int | None = None,
        show_progress_bar: bool = False,
    ) -> np.ndarray:
        """Embed ``texts``.

        Args:
            texts: the strings to embed.
            prompt: text prepended to each string.
            role: ``"query"``, ``"document"`` or ``"text"`` (decides whether the
                config's ``calibrate_queries``/``calibrate_documents`` apply).
            calibration: omit to use the encoder's config; ``None`` for a plain
                pass; another :class:`CalibrationConfig` for this call only (runtime torch only).
            batch_size: texts per forward pass (default: the encoder's).
            show_progress_bar: show a tqdm bar over batches.

        Returns:
            ``float32`` array ``[len(texts), dimension]``.

        Raises:
            ValueError: a calibration with a runtime other than torch.
        """
        if isinstance(texts, str):
            raise TypeError("texts must be a list of strings, not a single string; wrap it: [text]")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] must be a str, got {type(text).__name__}")
        config = self.calibration if calibration is DEFAULT else calibration
        check_calibration(self.spec.runtime, config)
        if config is not None and not config.applies_to(role):
            config = None
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        batch_size = batch_size or self.batch_size
        pooling = self._pooling_for(config) if config is not None else None
        strengths = config.layer_strengths(self.num_layers) if config is not None else {}
        order = self._length_order(texts, batch_size)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        starts = range(0, len(texts), batch_size)
        for start in tqdm(starts, desc="Encoding", disable=not show_progress_bar, unit="batch"):
            idx = order[start : start + batch_size]
            batch = [texts[i] for i in idx]
            out[idx] = self._encode_batch(batch, prompt, config, pooling, strengths)
        return out

    @torch.inference_mode()
    def _encode_batch(self, batch, prompt, config, pooling, strengths: dict[int, float]) -> np.ndarray:
        from sentence_transformers.util import batch_to_device

        features = self._st.preprocess(batch, prompt=prompt)
        features = batch_to_device(features, self.device)
        assignment = None
        if config is not None and config.strength > 0.0:
            prompt_length = features.get("prompt_length")
            if isinstance(prompt_length, torch.Tensor):
                prompt_length = int(prompt_length.flatten()[0])
            assignment = baskets_for_batch(
                features["input_ids"], features["attention_mask"], self.tokenizer, config, pooling, prompt_length
            )
            if not bool(assignment.active.any()):
                assignment = None
        if self._exported is not None:
            result = self._exported.forward(self._st, features)
        else:
            result = self._backend.forward(self._st, features, assignment, tuple(strengths), strengths)
        emb = result["sentence_embedding"].float()
        if self.normalize:
            emb = torch.nn.functional.normalize(emb, p=2, dim=-1)
        return emb.cpu().numpy()

    def _length_order(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Longest first, so each batch pads little: by token count when there is more than one batch.

        One batch keeps sentence-transformers' order (by characters), as nothing is gained.
        """
        if len(texts) <= batch_size:
            return np.argsort([-len(t) for t in texts], kind="stable")
        encoded = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.max_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        return np.argsort([-len(ids) for ids in encoded], kind="stable")

    # ------------------------------------------------------------------ helpers
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, special tokens included, before truncation."""
        encoded = self.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def fingerprint(self, calibration: Any = DEFAULT) -> str:
        """Stable hash of everything that shapes the embeddings: :meth:`EncoderSpec.fingerprint`.

        Args:
            calibration: omit for the encoder's own; ``None`` or another config for the
                vectors :meth:`encode` returns with that per-call override.
        """
        spec = self.spec if calibration is DEFAULT else self.spec.with_calibration(calibration)
        return spec.fingerprint()

    def _pooling_for(self, config: CalibrationConfig) -> str:
        if config.pooling is not None:
            return config.pooling
        if self._detected_pooling is None:
            self._detected_pooling = pooling_from_sentence_transformer(self._st)
        if self._detected_pooling is None:
            raise ValueError(
                "cannot detect the model's pooling (no sentence-transformers Pooling module); "
                'set CalibrationConfig(pooling="cls" | "last" | "mean")'
            )
        return self._detected_pooling

    @staticmethod
    def _from_transformers(path, pooling, device, trust_remote_code, model_kwargs):
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

        modes = {"cls": "cls", "last": "lasttoken", "mean": "mean"}
        if pooling not in modes:
            raise ValueError(f'pooling must be "cls", "last", "mean" or None, got {pooling!r}')
        transformer = Transformer(
            path,
            model_kwargs={**model_kwargs, "trust_remote_code": trust_remote_code},
            config_kwargs={"trust_remote_code": trust_remote_code},
            processor_kwargs={"trust_remote_code": trust_remote_code},
        )
        pool = Pooling(transformer.get_embedding_dimension(), pooling_mode=modes[pooling])
        return SentenceTransformer(modules=[transformer, pool], device=device)

    def _find_hf_model(self):
        for module in self._st.modules():
            model = getattr(module, "auto_model", None)
            if isinstance(model, torch.nn.Module):
                return model
        raise ValueError("the sentence-transformers model has no transformers module (auto_model) to calibrate")

    def __repr__(self) -> str:
        return (
            f"PosFairEncoder(model={self.model_id!r}, calibration={self.calibration!r}, "
            f"backend={self.backend_name!r}, max_length={self.max_length})"
        )


def _load_device(spec: EncoderSpec) -> str | None:
    """The device ``spec``'s model loads on: its own; without one, the CPU for the exported runtimes (also on a
    machine with a GPU), else ``None`` (sentence-transformers picks CUDA when available)."""
    return "cpu" if spec.device is None and spec.runtime != "torch" else spec.device


def _load_sentence_transformer(spec: EncoderSpec) -> Any:
    """Load the ``SentenceTransformer`` of ``spec`` (SDPA attention, safetensors first, no remote code unless asked)."""
    from sentence_transformers import SentenceTransformer

    device = _load_device(spec)
    path = resolve_model_path(spec.model)
    model_kwargs: dict[str, Any] = {"attn_implementation": "sdpa"}
    if spec.dtype is not None:
        model_kwargs["dtype"] = _torch_dtype(spec.dtype)
    try:
        if spec.pooling is None:
            return SentenceTransformer(
                path, device=device, trust_remote_code=spec.trust_remote_code, model_kwargs=model_kwargs
            )
        return PosFairEncoder._from_transformers(path, spec.pooling, device, spec.trust_remote_code, model_kwargs)
    except OSError as exc:
        raise OSError(
            f"could not load model {spec.model!r}: it is not a local sentence-transformers/transformers "
            "folder and could not be fetched from the hub (offline? misspelt?). Pass a local path, a hub "
            f"name, or {BUNDLED_MINILM!r} for the bundled all-MiniLM-L6-v2. Cause: {exc}"
        ) from exc


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
