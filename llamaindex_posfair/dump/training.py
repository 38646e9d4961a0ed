"""Train a DUMP-prefixed encoder with InfoNCE (sentence-transformers trainer).

Plumbing around :mod:`~llamaindex_posfair.dump.model` and the pure
:mod:`~llamaindex_posfair.dump.metrics`: load (query, positive, negative)
triples, choose what trains for the mode, run the trainer, evaluate.
"""

from __future__ import annotations

import dataclasses
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
from llamaindex_posfair.dump.pairs import EvalSet
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
    """``"bf16"``, or ``"auto"`` on a CUDA device that supports bfloat16."""
    return precision == "bf16" or (precision == "auto" and torch.cuda.is_available() and torch.cuda.is_bf16_supported())


@dataclass
class TrainReport:
    """What :func:`train_dump` did."""

    steps: int
    seconds: float
    train_losses: list[float] = field(default_factory=list)
    bf16: bool = False
    cached: bool = False
    resumed_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "seconds": round(self.seconds, 2)}


def latest_checkpoint(folder: str | Path | None) -> str | None:
    """The newest ``checkpoint-N`` folder under ``folder`` (highest ``N``), or None."""
    if folder is None or not Path(folder).is_dir():
        return None
    found = [
        (int(p.name.split("-")[1]), p) for p in Path(folder).glob("checkpoint-*") if p.name.split("-")[1].isdigit()
    ]
    return str(max(found)[1]) if found else None


def train_dump(
    model: Any,
    triples: Sequence[Triple],
    config: DumpTrainingConfig | None = None,
    *,
    output_dir: str | Path | None = None,
    show_progress_bar: bool = False,
    checkpoint_dir: str | Path | None = None,
    checkpoint_steps: int = 50,
    callbacks: Sequence[Any] = (),
) -> TrainReport:
    """Train a DUMP model (from :func:`~llamaindex_posfair.dump.model.add_dump_prefix`) in place.

    InfoNCE with ``MultipleNegativesRankingLoss`` (in-batch and hard negatives; the gradient-cache variant with
    ``config.mini_batch_size``). What trains follows ``model.posfair_dump.mode``; for the plain fine-tune control
    (no prefix, everything trains) use :func:`train_contrastive`.

    Args:
        model: A SentenceTransformer prepared by ``add_dump_prefix``.
        triples: Training triples (see :func:`load_triples`).
        config: Training settings (default ``DumpTrainingConfig()``).
        output_dir: Trainer scratch folder (default: a temporary folder).
        show_progress_bar: Show the trainer's tqdm bar.
        checkpoint_dir: If set, a checkpoint is written there every
            ``checkpoint_steps`` steps (the latest one kept) and training resumes
            from the latest checkpoint found there: rerun the same call after an
            interruption. Save the result with ``save_dump_model``.
        checkpoint_steps: Steps between checkpoints.
        callbacks: Extra ``transformers.TrainerCallback`` objects.

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
    config = config or DumpTrainingConfig()
    dump: DumpConfig | None = getattr(model, "posfair_dump", None)
    if not isinstance(dump, DumpConfig):
        raise ValueError("model has no DUMP prefix; call add_dump_prefix(model, DumpConfig(...)) before train_dump")
    if (dump.mode in FROZEN_MODEL_MODES or dump.mode in FROZEN_PREFIX_MODES) and config.weight_decay != 0:
        raise ValueError(
            f"weight_decay must be 0 in mode {dump.mode!r}, got {config.weight_decay}: decoupled weight decay "
            "would move the embedding rows this mode keeps frozen"
        )
    return train_contrastive(
        model,
        triples,
        config,
        mode=dump.mode,
        output_dir=output_dir,
        show_progress_bar=show_progress_bar,
        checkpoint_dir=checkpoint_dir,
        checkpoint_steps=checkpoint_steps,
        callbacks=callbacks,
    )


def _loss(model: Any, config: DumpTrainingConfig) -> Any:
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    if config.cached:
        return CachedMultipleNegativesRankingLoss(
            model, scale=config.scale, mini_batch_size=config.mini_batch_size, show_progress_bar=False
        )
    return MultipleNegativesRankingLoss(model, scale=config.scale)


def _training_args(config: DumpTrainingConfig, folder: str, bf16: bool, checkpoint_steps: int | None, show: bool):
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    saving = {"save_strategy": "no"}
    if checkpoint_steps is not None:
        saving = {"save_strategy": "steps", "save_steps": checkpoint_steps, "save_total_limit": 1}
    return SentenceTransformerTrainingArguments(
        output_dir=folder,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps if config.max_steps is not None else -1,
        per_device_train_batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        warmup_steps=float(config.warmup_ratio),  # transformers 5: a float < 1 is a ratio
        weight_decay=config.weight_decay,
        bf16=bf16,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        logging_steps=config.logging_steps,
        report_to="none",
        seed=config.seed,
        data_seed=config.seed,
        disable_tqdm=not show,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
        **saving,
    )


def train_contrastive(
    model: Any,
    triples: Sequence[Triple],
    config: DumpTrainingConfig | None = None,
    *,
    mode: str = "full",
    output_dir: str | Path | None = None,
    show_progress_bar: bool = False,
    checkpoint_dir: str | Path | None = None,
    checkpoint_steps: int = 50,
    callbacks: Sequence[Any] = (),
) -> TrainReport:
    """InfoNCE training of any SentenceTransformer, in place (what :func:`train_dump` runs).

    With ``mode="full"`` and a model without prefix this is the plain
    fine-tune the paper compares against; the other modes need the prefix
    tokens of :func:`~llamaindex_posfair.dump.model.add_dump_prefix`. See
    :func:`train_dump` for the arguments.

    Raises:
        ValueError: fewer than 2 triples, or a frozen-row mode on a model without prefix tokens.
    """
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer

    config = config or DumpTrainingConfig()
    if len(triples) < 2:
        raise ValueError(f"need at least 2 triples for in-batch negatives, got {len(triples)}")
    prefix_ids = prefix_token_ids(model.tokenizer)
    if mode != "full" and not prefix_ids:
        raise ValueError(f"mode {mode!r} trains or freezes prefix rows, but the model has no prefix tokens")
    if config.max_length is not None:
        model.max_seq_length = config.max_length
    dataset = Dataset.from_dict(
        {
            "anchor": [t.query for t in triples],
            "positive": [t.positive for t in triples],
            "negative": [t.negative for t in triples],
        }
    )
    bf16 = _use_bf16(config.precision)
    handles = configure_trainable(model, mode, prefix_ids)
    scratch = None
    if checkpoint_dir is None and output_dir is None:
        scratch = tempfile.TemporaryDirectory(prefix="posfair-dump-")
    folder = str(checkpoint_dir or output_dir or scratch.name)
    try:
        every = checkpoint_steps if checkpoint_dir is not None else None
        args = _training_args(config, folder, bf16, every, show_progress_bar)
        trainer = SentenceTransformerTrainer(
            model=model, args=args, train_dataset=dataset, loss=_loss(model, config), callbacks=list(callbacks)
        )
        if not show_progress_bar:
            from transformers.trainer_callback import PrinterCallback

            trainer.remove_callback(PrinterCallback)
        resume = latest_checkpoint(checkpoint_dir)
        if resume:
            logger.info("resuming from %s", resume)
        start = time.perf_counter()
        trainer.train(resume_from_checkpoint=resume)
        seconds = time.perf_counter() - start
        losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
        return TrainReport(
            trainer.state.global_step, seconds, losses, bf16=bf16, cached=config.cached, resumed_from=resume
        )
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


def evaluate_eval_set(
    model: Any, eval_set: EvalSet, *, batch_size: int = 64, show_progress_bar: bool = False
) -> dict[str, float]:
    """Retrieval quality of ``model`` on an in-domain :class:`~llamaindex_posfair.dump.pairs.EvalSet`.

    Returns:
        ``{"ndcg@10", "mrr@10", "recall@1", "recall@5", "recall@10", "ndcg@10[begin|middle|end]",
        "n_queries", "n_docs"}``; the thirds split queries by where their sentence sits in its passage.

    Example:
        >>> evaluate_eval_set(model, build_eval_set(dev_passages, 2, seed=0, removed=False))  # doctest: +SKIP
    """
    enc = dict(
        batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=show_progress_bar
    )
    scores = model.encode(eval_set.queries, **enc) @ model.encode(eval_set.corpus, **enc).T
    out = ranking_metrics(scores, eval_set.relevant)
    thirds = np.minimum((np.asarray(eval_set.rel_positions) * 3).astype(int), 2)
    for i, name in enumerate(("begin", "middle", "end")):
        rows = np.flatnonzero(thirds == i)
        if len(rows):
            out[f"ndcg@10[{name}]"] = ranking_metrics(scores[rows], [eval_set.relevant[r] for r in rows])["ndcg@10"]
    out["n_queries"] = float(len(eval_set.queries))
    out["n_docs"] = float(len(eval_set.corpus))
    return out
