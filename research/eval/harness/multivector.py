"""Multivector MaxSim through Qdrant: several vectors per passage, score = best segment.

Two ways to get a passage's segment vectors:

* ``"independent"``: cut the passage into segments of ``segment_tokens`` tokens
  and embed each on its own (what chunking does; no cross-segment context);
* ``"contextual"``: one forward pass over the whole passage (plain or
  calibrated), then mean-pool the contextual token embeddings of each run of
  ``segment_tokens`` tokens (special tokens included, so one segment covering
  the whole passage equals the passage's ordinary mean-pooled embedding). Every
  segment vector has seen the whole passage ("late chunking").

The vectors are written to an embedded Qdrant collection with a multivector
config and the MaxSim comparator and queried with ``query_points``; with one
query vector MaxSim is the maximum dot product over the passage's segments.

Example:
    >>> from research.eval.harness.multivector import QdrantMaxSimSystem
    >>> # QdrantMaxSimSystem("MaxSim", enc, segment_tokens=128, mode="contextual").score(cache)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .chunking_systems import chunk_corpus
from .systems import EncodeCache

__all__ = ["QdrantMaxSimSystem", "contextual_segment_vectors", "qdrant_maxsim_scores"]


def contextual_segment_vectors(
    encoder: Any, texts: Sequence[str], calibration: Any, segment_tokens: int, batch_size: int = 8
) -> tuple[np.ndarray, np.ndarray]:
    """Segment vectors pooled from one (plain or calibrated) forward pass per passage.

    Args:
        encoder: A ``PosFairEncoder`` (mean-pooling model).
        texts: Passages.
        calibration: ``None`` or a ``CalibrationConfig`` (document role).
        segment_tokens: Tokens per segment.
        batch_size: Passages per forward pass.

    Returns:
        ``(vectors [n_segments, dim] L2-normalised, owners [n_segments])``.
    """
    import torch
    from sentence_transformers.util import batch_to_device

    from llamaindex_posfair.encoders.baskets import baskets_for_batch

    if segment_tokens < 1:
        raise ValueError(f"segment_tokens must be a positive integer, got {segment_tokens}")
    config = calibration if (calibration is not None and calibration.applies_to("document")) else None
    st = encoder.sentence_transformer
    vecs: list[np.ndarray] = []
    owners: list[int] = []
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        features = batch_to_device(st.preprocess(batch, prompt=encoder.document_prompt), encoder.device)
        assignment, layers, strength = None, (), 0.0
        if config is not None and config.strength > 0.0:
            pooling = encoder._pooling_for(config)
            layers = config.resolve_layers(encoder.num_layers)
            strength = (
                config.strength
                if config.strength_schedule == "constant"
                else config.layer_strengths(encoder.num_layers)
            )
            prompt_length = features.get("prompt_length")
            if isinstance(prompt_length, torch.Tensor):
                prompt_length = int(prompt_length.flatten()[0])
            assignment = baskets_for_batch(
                features["input_ids"], features["attention_mask"], encoder.tokenizer, config, pooling, prompt_length
            )
            if not bool(assignment.active.any()):
                assignment = None
        with torch.inference_mode():
            out = encoder._backend.forward(st, features, assignment, layers, strength)
        tokens = out["token_embeddings"].float()
        mask = features["attention_mask"]
        for row in range(tokens.shape[0]):
            n = int(mask[row].sum())
            for s in range(0, n, segment_tokens):
                v = tokens[row, s : min(s + segment_tokens, n)].mean(dim=0)
                vecs.append(torch.nn.functional.normalize(v, dim=0).cpu().numpy())
                owners.append(start + row)
    return np.stack(vecs).astype(np.float32), np.asarray(owners, dtype=np.int64)


def qdrant_maxsim_scores(
    segment_vectors: np.ndarray, owners: np.ndarray, n_docs: int, queries: np.ndarray, path: str = ":memory:"
) -> np.ndarray:
    """Score every query against every passage with Qdrant's multivector MaxSim.

    Args:
        segment_vectors: ``[n_segments, dim]``.
        owners: Passage index of every segment.
        n_docs: Number of passages (a passage without segments scores ``-inf``).
        queries: ``[n_queries, dim]`` (each one query vector).
        path: ``":memory:"`` or a folder for Qdrant's embedded local mode.

    Returns:
        ``[n_queries, n_docs]`` float32 scores (dot products; vectors are normalised).
    """
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path) if path == ":memory:" else QdrantClient(path=path)
    name = "maxsim"
    dim = int(segment_vectors.shape[1])
    client.create_collection(
        name,
        vectors_config=models.VectorParams(
            size=dim,
            distance=models.Distance.DOT,
            multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
        ),
    )
    points = []
    for d in range(n_docs):
        rows = segment_vectors[owners == d]
        if len(rows):
            points.append(models.PointStruct(id=d, vector=rows.astype(float).tolist()))
    client.upsert(name, points=points, wait=True)
    out = np.full((len(queries), n_docs), -np.inf, dtype=np.float32)
    for qi, q in enumerate(queries):
        hits = client.query_points(name, query=[q.astype(float).tolist()], limit=n_docs, with_payload=False).points
        for h in hits:
            out[qi, int(h.id)] = h.score
    client.close()
    return out


@dataclass
class QdrantMaxSimSystem:
    """Per-segment vectors in a Qdrant multivector collection, scored by MaxSim.

    Args:
        name: Row label.
        encoder: Encoder of segments and queries.
        segment_tokens: Tokens per segment.
        mode: ``"independent"`` (segments embedded alone) or ``"contextual"``
            (pooled from one pass over the whole passage; needs a ``PosFairEncoder``).
        calibration: ``CalibrationConfig`` of the passage pass (and queries), or ``None``.

    Raises:
        ValueError: bad ``segment_tokens`` or ``mode``.
    """

    name: str
    encoder: Any
    segment_tokens: int = 128
    mode: Literal["independent", "contextual"] = "contextual"
    calibration: Any = None
    kind: str = "multivector"
    params: dict[str, Any] = field(default_factory=dict)
    vectors_per_passage: float = float("nan")

    def __post_init__(self) -> None:
        if isinstance(self.segment_tokens, bool) or self.segment_tokens < 1:
            raise ValueError(f"segment_tokens must be a positive integer, got {self.segment_tokens!r}; e.g. 128")
        if self.mode not in ("independent", "contextual"):
            raise ValueError(f'mode must be "independent" or "contextual", got {self.mode!r}')
        self.params = {"segment_tokens": self.segment_tokens, "mode": self.mode, **self.params}
        if self.calibration is not None:
            self.params = {"B": self.calibration.basket_size, "lambda": self.calibration.strength, **self.params}

    def segment_vectors(self, cache: EncodeCache) -> tuple[np.ndarray, np.ndarray]:
        if self.mode == "independent":
            chunks, owners = chunk_corpus(cache.docs, self.encoder.tokenizer, self.segment_tokens)
            return cache.texts_matrix(self.encoder, chunks, self.calibration, f"segments{self.segment_tokens}"), owners
        key = (
            "ctx",
            self.encoder.fingerprint(calibration=self.calibration),
            self.segment_tokens,
            hashlib.sha256("\x00".join(cache.docs).encode()).hexdigest()[:16],
        )
        store = cache.__dict__.setdefault("_contextual", {})
        if key not in store:
            store[key] = contextual_segment_vectors(
                self.encoder, cache.docs, self.calibration, self.segment_tokens, batch_size=cache.batch_size
            )
            cache.encoded_texts += cache.n_docs
        return store[key]

    def score(self, cache: EncodeCache) -> np.ndarray:
        vecs, owners = self.segment_vectors(cache)
        self.vectors_per_passage = len(owners) / max(cache.n_docs, 1)
        q = cache.queries_matrix(self.encoder, self.calibration)
        return qdrant_maxsim_scores(vecs, owners, cache.n_docs, q)
