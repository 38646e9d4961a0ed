"""Train a DUMP-prefixed encoder with InfoNCE (sentence-transformers trainer).

Plumbing around :mod:`~llamaindex_posfair.dump.model` and the pure
:mod:`~llamaindex_posfair.dump.metrics`: load (query, positive, negative)
triples, choose what trains for the mode, run the trainer, evaluate.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llamaindex_posfair.dump.config import (
    FROZEN_MODEL_MODES,
    FROZEN_PREFIX_MODES,
    DumpConfig,
    DumpTrainingConfig,
)
from llamaindex_posfair.dump.metrics import infonce_loss, ranking_metrics
from llamaindex_posfair.dump.model import input_embeddings
from llamaindex_posfair.encoders.prefix_tokens import prefix_token_ids

logger = logging.getLogger(__name__)

_QUERY_KEYS = ("query", "anchor")
_POSITIVE_KEYS = ("positive", "pos")
_NEGATIVE_KEYS = ("negative", "neg", "hard_negative")


@dataclass(frozen=True)
class Triple:
    """One training example: a query, its relevant passage, one hard negative."""

    query: str
    positive: str
    negative: str


def _pick(row: dict[str, Any], keys: Sequence[str], what: str, where: str) -> str:
    for key in keys:
        if key in row:
            value = row[key]
            if not isinstance(value, str) and (isinstance(value, (list, tuple)) or hasattr(value, "tolist")):
                # e.g. {"neg": ["...", "..."]} (a list, or a numpy array from parquet): the first mined negative
                items = list(value.tolist() if hasattr(value, "tolist") else value)
                value = items[0] if items else None
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
            return value
    raise ValueError(f"{where}: no {what} field; expected one of {keys}, got keys {sorted(row)}")


def load_triples(path: str | Path) -> list[Triple]:
    """Read (query, positive, negative) triples from a local ``.jsonl`` or ``.parquet`` file.

    Field names: ``query``/``anchor``, ``positive``/``pos``,
    ``negative``/``neg``/``hard_negative`` (a list takes its first item).

    Raises:
        ValueError: On a missing file, an unknown extension or a malformed row.

    Example:
        >>> from llamaindex_posfair.dump.data import bundled_split
        >>> len(load_triples(bundled_split("train"))) > 50
        True
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"data path {str(path)!r} is not a file; pass a local .jsonl or .parquet of triples")
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    elif path.suffix == ".parquet":
        import pandas as pd

        rows = pd.read_parquet(path).to_dict("records")
    else:
        raise ValueError(f"data path {str(path)!r} must end in .jsonl or .parquet, got {path.suffix!r}")
    if not rows:
        raise ValueError(f"data path {str(path)!r} holds no rows")
    return [
        Triple(
            _pick(r, _QUERY_KEYS, "query", f"{path}:{i + 1}"),
            _pick(r, _POSITIVE_KEYS, "positive", f"{path}:{i + 1}"),
            _pick(r, _NEGATIVE_KEYS, "negative", f"{path}:{i + 1}"),
        )
        for i, r in enumerate(rows)
    ]


def row_gradient_mask(num_rows: int, prefix_ids: Sequence[int], keep_prefix: bool) -> torch.Tensor:
    """``[num_rows, 1]`` float mask: 1 on rows whose gradient is kept (pure).

    ``keep_prefix=True`` keeps only the prefix rows (DUMP-only / soft prompt);
    False keeps every row but the prefix (frozen random prefix).

    Example:
        >>> row_gradient_mask(4, [2, 3], keep_prefix=True).flatten().tolist()
        [0.0, 0.0, 1.0, 1.0]
    """
    mask = torch.zeros(num_rows, 1) if keep_prefix else torch.ones(num_rows, 1)
    mask[torch.tensor(list(prefix_ids), dtype=torch.long)] = 1.0 if keep_prefix else 0.0
    return mask


def configure_trainable(model: Any, mode: str, prefix_ids: Sequence[int]) -> list[Any]:
    """Set ``requires_grad`` and gradient hooks for a mode; returns the hook handles.

    * ``full``: everything trains.
    * ``dump_only`` / ``soft_prompt``: everything is frozen except the input
      embedding matrix, whose gradient is zeroed outside the prefix rows.
    * ``random_prefix``: everything trains except the prefix rows (gradient zeroed).

    Remove the hooks with ``handle.remove()`` when done (``train_dump`` does).
    """
    embedding = input_embeddings(model)
    handles: list[Any] = []
    frozen_model = mode in FROZEN_MODEL_MODES
    for param in model.parameters():
        param.requires_grad_(not frozen_model)
    if mode == "full":
        return handles
    embedding.weight.requires_grad_(True)
    mask = row_gradient_mask(embedding.weight.shape[0], prefix_ids, keep_prefix=frozen_model)
    mask = mask.to(device=embedding.weight.device, dtype=embedding.weight.dtype)
    handles.append(embedding.weight.register_hook(lambda grad: grad * mask.to(grad.dtype)))
    return handles


def _use_bf16(precision: str) -> bool:
    if precision == "bf16":
        return True
    if precision == "fp32":
        return False
    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


@dataclass
class TrainReport:
    """What :func:`train_dump` did."""

    steps: int
    seconds: float
    train_losses: list[float] = field(default_factory=list)
    bf16: bool = False
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "seconds": round(self.seconds, 2),
            "train_losses": self.train_losses,
            "bf16": self.bf16,
            "cached": self.cached,
        }


def train_dump(
    model: Any,
    triples: Sequence[Triple],
    config: DumpTrainingConfig | None = None,
    *,
    output_dir: str | Path | None = None,
    show_progress_bar: bool = False,
) -> TrainReport:
    """Train a DUMP model (from :func:`~llamaindex_posfair.dump.model.add_dump_prefix`) in place.

    InfoNCE with ``MultipleNegativesRankingLoss`` (scale 20): each query's
    positive is the target, its hard negative and every other row of the
    batch are negatives. With ``config.mini_batch_size`` the gradient-cache
    variant (``CachedMultipleNegativesRankingLoss``) is used instead, for large
    batches. What trains follows ``model.posfair_dump.mode``.

    Args:
        model: A SentenceTransformer prepared by ``add_dump_prefix``.
        triples: Training triples (see :func:`load_triples`).
        config: Training settings (default ``DumpTrainingConfig()``).
        output_dir: Trainer scratch folder (default: a temporary folder). No
            checkpoints are written; save with ``save_dump_model``.
        show_progress_bar: Show the trainer's tqdm bar.

    Returns:
        A :class:`TrainReport` (steps, wall time, logged losses).

    Raises:
        ValueError: If the model has no prefix, or settings conflict with the mode.

    Example:
        >>> from sentence_transformers import SentenceTransformer  # doctest: +SKIP
        >>> from llamaindex_posfair.dump import DumpConfig, add_dump_prefix, bundled_split
        >>> model = add_dump_prefix(SentenceTransformer(path), DumpConfig(mode="full"))  # doctest: +SKIP
        >>> report = train_dump(model, load_triples(bundled_split("train")))  # doctest: +SKIP
    """
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    config = config or DumpTrainingConfig()
    dump: DumpConfig | None = getattr(model, "posfair_dump", None)
    if not isinstance(dump, DumpConfig):
        raise ValueError("model has no DUMP prefix; call add_dump_prefix(model, DumpConfig(...)) before train_dump")
    if (dump.mode in FROZEN_MODEL_MODES or dump.mode in FROZEN_PREFIX_MODES) and config.weight_decay != 0:
        raise ValueError(
            f"weight_decay must be 0 in mode {dump.mode!r}, got {config.weight_decay}: decoupled weight decay "
            "would move the embedding rows this mode keeps frozen"
        )
    if len(triples) < 2:
        raise ValueError(f"need at least 2 triples for in-batch negatives, got {len(triples)}")
    prefix_ids = prefix_token_ids(model.tokenizer)
    if config.max_length is not None:
        model.max_seq_length = config.max_length

    dataset = Dataset.from_dict(
        {
            "anchor": [t.query for t in triples],
            "positive": [t.positive for t in triples],
            "negative": [t.negative for t in triples],
        }
    )
    if config.cached:
        loss = CachedMultipleNegativesRankingLoss(
            model, scale=config.scale, mini_batch_size=config.mini_batch_size, show_progress_bar=False
        )
    else:
        loss = MultipleNegativesRankingLoss(model, scale=config.scale)

    bf16 = _use_bf16(config.precision)
    handles = configure_trainable(model, dump.mode, prefix_ids)
    scratch = tempfile.TemporaryDirectory(prefix="posfair-dump-") if output_dir is None else None
    try:
        args = SentenceTransformerTrainingArguments(
            output_dir=str(output_dir or scratch.name),
            num_train_epochs=config.epochs,
            max_steps=config.max_steps if config.max_steps is not None else -1,
            per_device_train_batch_size=config.batch_size,
            learning_rate=config.learning_rate,
            warmup_steps=float(config.warmup_ratio),  # transformers 5: a float < 1 is a ratio
            weight_decay=config.weight_decay,
            bf16=bf16,
            batch_sampler=BatchSamplers.NO_DUPLICATES,
            logging_steps=config.logging_steps,
            save_strategy="no",
            report_to="none",
            seed=config.seed,
            data_seed=config.seed,
            disable_tqdm=not show_progress_bar,
            dataloader_num_workers=0,
            dataloader_pin_memory=torch.cuda.is_available(),
        )
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss)
        if not show_progress_bar:
            from transformers.trainer_callback import PrinterCallback

            trainer.remove_callback(PrinterCallback)
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
        losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
        return TrainReport(trainer.state.global_step, seconds, losses, bf16=bf16, cached=config.cached)
    finally:
        for handle in handles:
            handle.remove()
        for param in model.parameters():
            param.requires_grad_(True)
        model.eval()
        if scratch is not None:
            scratch.cleanup()


def evaluate_retrieval(
    model: Any,
    triples: Sequence[Triple],
    *,
    scale: float = 20.0,
    batch_size: int = 64,
    show_progress_bar: bool = False,
) -> dict[str, float]:
    """Retrieval quality of ``model`` on held-apart triples.

    The corpus is every distinct positive and hard negative of ``triples``;
    each query has one relevant document (its positive). Also reports the
    InfoNCE loss of the whole split as one batch (in-batch + hard negatives).

    Returns:
        ``{"ndcg@10", "mrr@10", "recall@1", "recall@5", "recall@10", "infonce", "n_queries", "n_docs"}``.

    Example:
        >>> metrics = evaluate_retrieval(model, load_triples(bundled_split("test")))  # doctest: +SKIP
    """
    if not triples:
        raise ValueError("triples must not be empty; pass the held-apart split")
    corpus: dict[str, int] = {}
    for t in triples:
        for doc in (t.positive, t.negative):
            corpus.setdefault(doc, len(corpus))
    docs = list(corpus)
    enc = dict(
        batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=show_progress_bar
    )
    q = model.encode([t.query for t in triples], **enc)
    d = model.encode(docs, **enc)
    out = ranking_metrics(q @ d.T, [corpus[t.positive] for t in triples])
    pos = d[[corpus[t.positive] for t in triples]]
    neg = d[[corpus[t.negative] for t in triples]]
    out["infonce"] = infonce_loss(torch.from_numpy(q), torch.from_numpy(pos), torch.from_numpy(neg), scale=scale)
    out["n_queries"] = float(len(triples))
    out["n_docs"] = float(len(docs))
    return out


def embedding_snapshot(model: Any) -> np.ndarray:
    """A float32 copy of the input embedding matrix (for row-change checks)."""
    return input_embeddings(model).weight.detach().float().cpu().numpy().copy()
