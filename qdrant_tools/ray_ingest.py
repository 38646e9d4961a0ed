"""Distributed ingestion on Ray Data: the same points as :mod:`qdrant_tools.ingest`, encoded by an actor pool.

Pipeline::

    driver: read files, diff against the collection (what is stored, by version)
      -> Ray Data: documents -> [actor pool: chunk + encode]  (one encoder per actor;
                                 num_gpus per actor on GPU clusters, CPU actors otherwise;
                                 forward passes batched by a padded-token budget)
      -> driver: upsert(wait=True), bounded retries on network errors, then drop stale versions

Points are built by :func:`qdrant_tools.ingest.prepare_document` with the same
chunking, fingerprints and version, so ids and payloads equal the
single-process path's, and a collection can be built or completed either way.

Resumable: a document is skipped when its version (content + chunking + encoder
fingerprints) is completely stored; a partly stored one (a killed driver)
re-encodes only its missing chunks. A killed worker process is restarted by Ray
and its batch re-run (bounded by ``max_worker_restarts``); an exception raised
by an encoder (e.g. out of memory) is *not* retried and stops the run.

The driver is the only Qdrant writer: embedded local mode allows one process
per storage folder, and one writer with ``wait=True`` keeps a server well fed
for the worker counts measured in ``docs/scale-out.md``.

Example:
    >>> import ray
    >>> from qdrant_client import QdrantClient
    >>> from qdrant_tools.ray_ingest import EncoderRecipe, RayIngestConfig, ray_ingest_path
    >>> ray.init(num_cpus=2, include_dashboard=False)                        # doctest: +SKIP
    >>> report = ray_ingest_path(QdrantClient(path="./.posfair/qdrant"), "demo", "examples/data",
    ...                          EncoderRecipe(), RayIngestConfig(num_workers=2))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from qdrant_client import models

from qdrant_tools import payload as P
from qdrant_tools.chunking import DEFAULT_EXTENSIONS, ChunkingConfig, SourceDocument
from qdrant_tools.ids import document_version
from qdrant_tools.ingest import (
    IngestReport,
    chunking_key,
    delete_stale,
    describe_encoder,
    load_folder,
    prepare_document,
    resolve_chunking,
    spans_for,
    stored_records,
)
from qdrant_tools.retry import RetryingClient, RetryPolicy
from qdrant_tools.schema import VectorSpec, ensure_collection

logger = logging.getLogger(__name__)

#: Build the encoders of one worker: ``device -> {vector name: encoder}``. Must be picklable.
EncoderFactory = Callable[[str], Mapping[str, Any]]


# ---------------------------------------------------------------------- encoder recipe
@dataclass(frozen=True)
class EncoderRecipe:
    """How each worker builds its ``PosFairEncoder`` (picklable; the model is loaded in the worker).

    Args:
        model: local path, hub name, or ``"bundled:all-MiniLM-L6-v2"``.
        calibration: a ``CalibrationConfig``, or None for a plain encoder.
        vectors: ``(vector name, "calibrated" | "vanilla")`` pairs; one model
            load serves both (``"vanilla"`` = calibration off).
        max_length, dtype, query_prompt, document_prompt, batch_size,
        trust_remote_code, backend: as for ``PosFairEncoder``.

    Raises:
        ValueError: a ``"calibrated"`` vector without calibration, duplicate or unknown kinds.

    Example:
        >>> from llamaindex_posfair import CalibrationConfig
        >>> r = EncoderRecipe(calibration=CalibrationConfig(), vectors=(("vanilla", "vanilla"), ("calibrated", "calibrated")))
        >>> [name for name, _ in r.vectors]
        ['vanilla', 'calibrated']
    """

    model: str = "bundled:all-MiniLM-L6-v2"
    calibration: Any = None
    vectors: tuple[tuple[str, str], ...] = (("calibrated", "calibrated"),)
    max_length: int | None = None
    dtype: str | None = None
    query_prompt: str | None = None
    document_prompt: str | None = None
    batch_size: int = 32
    trust_remote_code: bool = False
    backend: str = "fast"

    def __post_init__(self) -> None:
        names = [n for n, _ in self.vectors]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"vectors must name at least one vector, without duplicates, got {names}")
        for name, kind in self.vectors:
            if kind not in ("calibrated", "vanilla"):
                raise ValueError(f'vector {name!r}: kind must be "calibrated" or "vanilla", got {kind!r}')
            if kind == "calibrated" and self.calibration is None:
                raise ValueError(
                    f'vector {name!r} is "calibrated" but calibration is None; pass a CalibrationConfig '
                    'or make it a "vanilla" vector'
                )

    def __call__(self, device: str) -> dict[str, Any]:
        from llamaindex_posfair.encoders.spec import EncoderSpec
        from llamaindex_posfair.encoders.view import CalibrationView

        enc = EncoderSpec(
            model=self.model,
            calibration=self.calibration,
            backend=self.backend,
            max_length=self.max_length,
            device=device,
            dtype=self.dtype,
            query_prompt=self.query_prompt,
            document_prompt=self.document_prompt,
            batch_size=self.batch_size,
            trust_remote_code=self.trust_remote_code,
        ).load()
        return {name: (enc if kind == "calibrated" else CalibrationView(enc, None)) for name, kind in self.vectors}


# ---------------------------------------------------------------------- config
@dataclass(frozen=True)
class RayIngestConfig:
    """Settings of a distributed ingestion run.

    Args:
        num_workers: encoder actors (one encoder each).
        num_gpus_per_worker: GPUs per actor; 0 = CPU actors. 1 on a GPU
            cluster; 0.5 packs two small-model actors per GPU.
        num_cpus_per_worker: CPUs per actor (also its torch threads on CPU).
        token_budget: padded tokens per forward pass (batch rows x longest
            row); bounds activation memory independently of chunk length.
        docs_per_task: documents handed to an actor per call.
        write_batch_size: points per ``upsert(wait=True)``.
        write_ordering: Qdrant write ordering: ``"weak"`` (fastest), ``"medium"``, ``"strong"``
            (through the permanent shard leader; use with replication when order matters).
        chunk_tokens, overlap_tokens: as :class:`qdrant_tools.ingest.IngestConfig` (None = fit the encoder).
        extensions: file suffixes ingested from a folder.
        max_worker_restarts: restarts of a crashed (killed) worker before the run fails.
        plan_on: where the encoders are loaded once to read dimensions, fingerprints
            and the chunking: ``"driver"``, ``"worker"`` (a CPU task; keeps the model off
            the driver), or ``"auto"`` (driver for a local Ray, worker on a cluster).
        retry: backoff for Qdrant calls (never applied to encoding).
        show_progress: progress bar over written chunks.

    Raises:
        ValueError: a setting outside its range (named, with typical values).
    """

    num_workers: int = 1
    num_gpus_per_worker: float = 0.0
    num_cpus_per_worker: float = 1.0
    token_budget: int = 16384
    docs_per_task: int = 8
    write_batch_size: int = 256
    write_ordering: Literal["weak", "medium", "strong"] = "weak"
    chunk_tokens: int | None = None
    overlap_tokens: int | None = None
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    max_worker_restarts: int = 3
    plan_on: Literal["auto", "driver", "worker"] = "auto"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    show_progress: bool = True

    def __post_init__(self) -> None:
        def positive(name: str, typical: str, integer: bool = True) -> None:
            v = getattr(self, name)
            ok = (isinstance(v, int) if integer else isinstance(v, (int, float))) and v > 0
            if not ok:
                raise ValueError(
                    f"{name} must be a positive {'integer' if integer else 'number'}, got {v!r}; "
                    f"typical values are {typical}"
                )

        positive("num_workers", "1 per GPU, or 1-4 on CPU")
        positive("num_cpus_per_worker", "1-8", integer=False)
        positive("token_budget", "8192-65536 (GPU), 2048-16384 (CPU)")
        positive("docs_per_task", "4-64")
        positive("write_batch_size", "64-1024")
        if not isinstance(self.num_gpus_per_worker, (int, float)) or self.num_gpus_per_worker < 0:
            raise ValueError(f"num_gpus_per_worker must be >= 0, got {self.num_gpus_per_worker!r}; 0 = CPU workers")
        if self.write_ordering not in ("weak", "medium", "strong"):
            raise ValueError(f'write_ordering must be "weak", "medium" or "strong", got {self.write_ordering!r}')
        if self.plan_on not in ("auto", "driver", "worker"):
            raise ValueError(f'plan_on must be "auto", "driver" or "worker", got {self.plan_on!r}')
        if not isinstance(self.max_worker_restarts, int) or self.max_worker_restarts < 0:
            raise ValueError(f"max_worker_restarts must be an integer >= 0, got {self.max_worker_restarts!r}")


@dataclass
class RayIngestReport(IngestReport):
    """:class:`IngestReport` plus what is specific to a distributed run."""

    workers: int = 0
    chunks_resumed: int = 0  # chunks of partly stored documents that were already there (not re-encoded)
    plan_seconds: float = 0.0


# ---------------------------------------------------------------------- plan (runs once, in a worker)
@dataclass(frozen=True)
class EncoderPlan:
    """What the driver needs to know about the encoders without loading them."""

    dimensions: dict[str, int]
    fingerprints: dict[str, str]
    descriptions: dict[str, str]
    max_length: int
    chunking: ChunkingConfig
    chunking_key: str
    spans_name: str


def _make_plan(factory: EncoderFactory, chunk_tokens: int | None, overlap_tokens: int | None) -> EncoderPlan:
    vectors = factory("cpu")
    if not vectors:
        raise ValueError("the encoder factory returned no vectors; it must map vector names to encoders")
    first = next(iter(vectors.values()))
    chunking = resolve_chunking(first, chunk_tokens, overlap_tokens)
    _, spans_name = spans_for(first)
    return EncoderPlan(
        dimensions={n: int(e.dimension) for n, e in vectors.items()},
        fingerprints={n: e.fingerprint() for n, e in vectors.items()},
        descriptions={n: describe_encoder(e) for n, e in vectors.items()},
        max_length=min(int(e.max_length) for e in vectors.values()),
        chunking=chunking,
        chunking_key=chunking_key(chunking, spans_name),
        spans_name=spans_name,
    )


# ---------------------------------------------------------------------- the actor
def token_budget_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Group indices into batches whose padded size (rows x longest) stays within ``budget``.

    Indices are taken longest first, so each batch pads little. A single row
    longer than the budget forms a batch of its own.

    Example:
        >>> token_budget_batches([10, 40, 30, 5], 80)
        [[1, 2], [0, 3]]
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        n = max(1, lengths[i])
        if cur and max(longest, n) * (len(cur) + 1) > budget:
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        batches.append(cur)
    return batches


class ChunkEncodeWorker:
    """Ray Data actor: holds one set of encoders; chunks documents and embeds the chunks still missing."""

    def __init__(
        self, factory: EncoderFactory, plan: EncoderPlan, token_budget: int, num_cpus: float, use_gpu: bool
    ) -> None:
        import torch

        if not use_gpu:
            torch.set_num_threads(max(1, int(num_cpus)))
        self.vectors = dict(factory("cuda" if use_gpu else "cpu"))
        self.plan = plan
        self.first = next(iter(self.vectors.values()))
        self.spans_fn, spans_name = spans_for(self.first)
        fps = {n: e.fingerprint() for n, e in self.vectors.items()}
        if fps != plan.fingerprints or spans_name != plan.spans_name:
            raise RuntimeError(
                f"worker encoders differ from the plan (fingerprints {fps} vs {plan.fingerprints}); "
                "every worker must load the same model files and settings"
            )
        self.token_budget = token_budget

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        planned = []
        for i in range(len(batch["doc_id"])):
            doc = SourceDocument(
                doc_id=str(batch["doc_id"][i]),
                text=str(batch["text"][i]),
                source=str(batch["source"][i]),
                content_hash=str(batch["content_hash"][i]),
            )
            done = set(json.loads(str(batch["done"][i])))
            chunks = prepare_document(
                doc,
                chunking=self.plan.chunking,
                chunking_key=self.plan.chunking_key,
                spans_fn=self.spans_fn,
                fingerprints=self.plan.fingerprints,
                count_tokens=self.first.count_tokens,
                max_length=self.plan.max_length,
            )
            planned.extend(c for c in chunks if c.payload[P.CHUNK_INDEX] not in done)
        out: dict[str, Any] = {
            "point_id": np.array([c.point_id for c in planned], dtype=object),
            "doc_id": np.array([c.doc_id for c in planned], dtype=object),
            "payload": np.array([json.dumps(c.payload, sort_keys=True) for c in planned], dtype=object),
        }
        lengths = [min(int(c.payload[P.N_TOKENS]), self.plan.max_length) for c in planned]
        texts = [c.text for c in planned]
        for name, enc in self.vectors.items():
            arr = np.zeros((len(planned), self.plan.dimensions[name]), dtype=np.float32)
            for idx in token_budget_batches(lengths, self.token_budget):
                part = np.asarray(enc.encode_documents([texts[j] for j in idx]), dtype=np.float32)
                if part.shape != (len(idx), self.plan.dimensions[name]):
                    raise RuntimeError(
                        f"encoder for {name!r} returned shape {part.shape}, "
                        f"expected {(len(idx), self.plan.dimensions[name])}"
                    )
                arr[idx] = part
            out[f"vec:{name}"] = arr
        return out


# ---------------------------------------------------------------------- driver
def _stored_chunks(client: Any, collection: str, doc_id: str, version: str) -> list[int]:
    """Chunk indices of ``doc_id`` at ``version`` already in the collection."""
    flt = models.Filter(
        must=[
            models.FieldCondition(key=P.DOC_ID, match=models.MatchValue(value=doc_id)),
            models.FieldCondition(key=P.VERSION, match=models.MatchValue(value=version)),
        ]
    )
    out: list[int] = []
    offset = None
    while True:
        points, offset = client.scroll(
            collection,
            scroll_filter=flt,
            limit=2048,
            offset=offset,
            with_vectors=False,
            with_payload=models.PayloadSelectorInclude(include=[P.CHUNK_INDEX]),
        )
        out.extend(int(p.payload[P.CHUNK_INDEX]) for p in points)
        if offset is None:
            return sorted(out)


def _ensure_ray(address: str | None, local_cpus: int | None) -> None:
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False)


def ray_ingest_documents(
    client: Any,
    collection: str,
    documents: Sequence[SourceDocument],
    factory: EncoderFactory,
    config: RayIngestConfig | None = None,
    *,
    report: RayIngestReport | None = None,
    ray_address: str | None = None,
    local_cpus: int | None = 2,
    on_write: Callable[[int], None] | None = None,
) -> RayIngestReport:
    """Ingest decoded documents with a Ray actor pool; see the module docstring.

    Args:
        client: ``QdrantClient`` (embedded or server) used by the driver only.
        collection: created with the encoders' named vectors if missing.
        documents: documents with distinct ``doc_id``.
        factory: picklable ``device -> {vector name: encoder}`` (:class:`EncoderRecipe`).
        config: run settings.
        ray_address: ``"ray://head:10001"`` or ``"auto"`` for a cluster; None starts
            (or reuses) a local Ray with ``local_cpus`` CPUs.
        on_write: called with the number of chunks written after each upsert.

    Raises:
        SchemaMismatchError: before any write, if the collection does not fit the encoders.
        ValueError: duplicate document ids.
    """
    import ray

    config = config or RayIngestConfig()
    report = report or RayIngestReport(collection=collection)
    t0 = time.perf_counter()
    ids = [d.doc_id for d in documents]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"document ids must be distinct, got duplicates {dup[:5]}")
    db = client if isinstance(client, RetryingClient) else RetryingClient(client, config.retry)

    _ensure_ray(ray_address, local_cpus)
    if config.plan_on == "driver" or (config.plan_on == "auto" and not ray_address):
        plan = _make_plan(factory, config.chunk_tokens, config.overlap_tokens)
    else:
        plan = ray.get(
            ray.remote(num_cpus=1, num_gpus=0)(_make_plan).remote(factory, config.chunk_tokens, config.overlap_tokens)
        )
    report.plan_seconds = time.perf_counter() - t0
    specs = [VectorSpec(n, plan.dimensions[n], encoder=plan.descriptions[n]) for n in plan.dimensions]
    report.created_collection = ensure_collection(db, collection, specs)  # raises before any write
    report.chunking = (
        f"{plan.chunking.chunk_tokens}-token chunks, {plan.chunking.overlap_tokens} overlap, {plan.spans_name} tokens"
    )
    report.max_length = plan.max_length
    report.workers = config.num_workers

    stored = stored_records(db, collection)
    rows: list[dict[str, Any]] = []
    versions: dict[str, str] = {}
    already: dict[str, int] = {}
    for doc in documents:
        version = document_version(doc.content_hash, plan.chunking_key, plan.fingerprints)
        st = stored.get(doc.doc_id, {})
        cur = st.get(version)
        complete = cur is not None and cur[0] == cur[1]
        if complete and len(st) == 1:
            report.unchanged.append(doc.doc_id)
            continue
        if complete:  # an interrupted update: the new version is all there, only stale points remain
            report.chunks_deleted += delete_stale(db, collection, doc.doc_id, version)
            report.cleaned.append(doc.doc_id)
            continue
        (report.changed if st else report.new).append(doc.doc_id)
        done = _stored_chunks(db, collection, doc.doc_id, version) if cur is not None else []
        report.chunks_resumed += len(done)
        versions[doc.doc_id] = version
        already[doc.doc_id] = len(done)
        rows.append(
            {
                "doc_id": doc.doc_id,
                "text": doc.text,
                "source": doc.source,
                "content_hash": doc.content_hash,
                "done": json.dumps(done),
            }
        )

    if rows:
        _run_pipeline(db, collection, rows, factory, plan, config, report, versions, already, on_write)
    report.seconds += time.perf_counter() - t0
    return report


def _run_pipeline(db, collection, rows, factory, plan, config, report, versions, already, on_write) -> None:
    import ray

    use_gpu = config.num_gpus_per_worker > 0
    n_blocks = max(1, math.ceil(len(rows) / config.docs_per_task))
    ds = ray.data.from_items(rows, override_num_blocks=min(n_blocks, 10_000))
    ds = ds.map_batches(
        ChunkEncodeWorker,
        fn_constructor_kwargs={
            "factory": factory,
            "plan": plan,
            "token_budget": config.token_budget,
            "num_cpus": config.num_cpus_per_worker,
            "use_gpu": use_gpu,
        },
        batch_size=config.docs_per_task,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=config.num_workers),
        num_cpus=config.num_cpus_per_worker,
        num_gpus=config.num_gpus_per_worker if use_gpu else None,
        max_restarts=config.max_worker_restarts,
        max_task_retries=config.max_worker_restarts,
    )
    ctx = ray.data.DataContext.get_current()
    saved_bars = ctx.enable_progress_bars
    ctx.enable_progress_bars = config.show_progress
    written: dict[str, set[str]] = defaultdict(set)  # a set: a retried task may deliver a point twice
    ordering = models.WriteOrdering(config.write_ordering)
    names = list(plan.dimensions)
    bar = None
    if config.show_progress:
        from tqdm.auto import tqdm

        bar = tqdm(unit="chunk", desc=f"ray ingest {collection}")
    try:
        for batch in ds.iter_batches(batch_size=config.write_batch_size, batch_format="numpy"):
            n = len(batch["point_id"])
            if n == 0:
                continue
            payloads = [json.loads(p) for p in batch["payload"]]
            report.chunks_truncated += sum(1 for p in payloads if p[P.TRUNCATED])
            db.upsert(
                collection,
                points=models.Batch(
                    ids=[str(i) for i in batch["point_id"]],
                    vectors={name: np.asarray(batch[f"vec:{name}"], dtype=np.float32).tolist() for name in names},
                    payloads=payloads,
                ),
                wait=True,
                ordering=ordering,
            )
            report.chunks_written += n
            if bar is not None:
                bar.update(n)
            if on_write is not None:
                on_write(n)
            for pid, p in zip(batch["point_id"], payloads):  # a document fully stored: drop stale versions
                doc_id = p[P.DOC_ID]
                before = len(written[doc_id])
                written[doc_id].add(str(pid))
                if len(written[doc_id]) > before and len(written[doc_id]) + already[doc_id] == p[P.N_CHUNKS]:
                    report.chunks_deleted += delete_stale(db, collection, doc_id, versions[doc_id])
    finally:
        ctx.enable_progress_bars = saved_bars
        if bar is not None:
            bar.close()
    if report.chunks_truncated:
        logger.warning(
            "%d chunks exceeded the model window of %d tokens and were truncated when embedded",
            report.chunks_truncated,
            plan.max_length,
        )


def ray_ingest_path(
    client: Any,
    collection: str,
    path: str | Path,
    factory: EncoderFactory,
    config: RayIngestConfig | None = None,
    **kwargs: Any,
) -> RayIngestReport:
    """Ingest a folder of .txt/.md files (or one file) on Ray; see :func:`ray_ingest_documents`.

    Files are read on the driver (skips reported as in :func:`qdrant_tools.ingest.ingest_path`).
    """
    config = config or RayIngestConfig()
    t0 = time.perf_counter()
    docs, skipped, n_other = load_folder(path, config.extensions)
    report = RayIngestReport(
        collection=collection, files_seen=len(docs) + len(skipped), files_other=n_other, skipped=skipped
    )
    report.seconds = time.perf_counter() - t0
    return ray_ingest_documents(client, collection, docs, factory, config, report=report, **kwargs)
