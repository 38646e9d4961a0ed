"""Distributed ingestion on Ray Data: the same points as :mod:`qdrant_tools.ingest`, encoded by an actor pool.

The driver reads the files, checks the collection, reads its state and plans (:mod:`qdrant_tools.driver`);
a Ray Data actor pool (one encoder per actor) chunks and encodes the missing chunks in forward passes bounded
by a padded-token budget; the driver alone writes, through :class:`qdrant_tools.writer.QdrantWriter` (the
embedded store allows one process per folder). Points come from :class:`qdrant_tools.encoding.ChunkEncoder`
as in the single-process path, so ids and payloads are equal and a collection can be built or completed
either way. Runs resume where they stopped; a killed worker is restarted by Ray (``max_worker_restarts``),
while an encoder's exception (e.g. out of memory) stops the run. docs/scale-out.md ("Distributed ingestion
on Ray") has the guarantees and the measurements.

Example:
    >>> import ray
    >>> from llamaindex_posfair import EncoderSet, EncoderSpec
    >>> from qdrant_tools.ray_ingest import RayIngestConfig, ray_ingest_path
    >>> from qdrant_tools.store import open_store
    >>> ray.init(num_cpus=2, include_dashboard=False)                        # doctest: +SKIP
    >>> report = ray_ingest_path(open_store("./.posfair/qdrant"), "demo", "examples/data",
    ...                          EncoderSet.single(EncoderSpec()), RayIngestConfig(num_workers=2))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from qdrant_tools import payload as P
from qdrant_tools.chunking import SourceDocument
from qdrant_tools.driver import IngestionRun, IngestSettings, read_folder, scoped_to
from qdrant_tools.encoding import ChunkEncoder, PointEncoding
from qdrant_tools.plan import DocumentPlan
from qdrant_tools.report import IngestReport
from qdrant_tools.spec import CollectionSpec
from qdrant_tools.writer import PointBatch

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

#: Build the encoders of one worker: ``device -> {vector name: encoder}``. Must be picklable; an
#: :class:`~llamaindex_posfair.encoders.spec.EncoderSet` is one (a spec per vector, loaded in the worker).
EncoderFactory = Callable[[str], Mapping[str, Any]]


# ---------------------------------------------------------------------- config
@dataclass(frozen=True, kw_only=True)
class RayIngestConfig(IngestSettings):
    """Settings of a distributed run: :class:`qdrant_tools.driver.IngestSettings` plus

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
        max_worker_restarts: restarts of a crashed (killed) worker before the run fails.
        point_encoding_on: where the encoders are loaded once to read dimensions, fingerprints
            and the chunking: ``"driver"``, ``"worker"`` (a CPU task; keeps the model off
            the driver), or ``"auto"`` (driver for a local Ray, worker on a cluster).

    Raises:
        ValueError: a setting outside its range (named, with typical values).

    Example:
        >>> RayIngestConfig(num_workers=4, num_gpus_per_worker=1).write_batch_size
        256
    """

    num_workers: int = 1
    num_gpus_per_worker: float = 0.0
    num_cpus_per_worker: float = 1.0
    token_budget: int = 16384
    docs_per_task: int = 8
    write_batch_size: int = 256
    write_ordering: Literal["weak", "medium", "strong"] = "weak"
    max_worker_restarts: int = 3
    point_encoding_on: Literal["auto", "driver", "worker"] = "auto"

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
        if self.point_encoding_on not in ("auto", "driver", "worker"):
            raise ValueError(f'point_encoding_on must be "auto", "driver" or "worker", got {self.point_encoding_on!r}')
        if not isinstance(self.max_worker_restarts, int) or self.max_worker_restarts < 0:
            raise ValueError(f"max_worker_restarts must be an integer >= 0, got {self.max_worker_restarts!r}")


@dataclass
class RayIngestReport(IngestReport):
    """:class:`~qdrant_tools.report.IngestReport` plus what is specific to a distributed run."""

    workers: int = 0
    plan_seconds: float = 0.0


# ---------------------------------------------------------------------- point encoding (runs once)
def point_encoding_from_factory(factory: EncoderFactory, settings: IngestSettings) -> PointEncoding:
    """Load the encoders once on CPU and read their :class:`~qdrant_tools.encoding.PointEncoding`."""
    return settings.point_encoding(factory("cpu"))


def _point_encoding(factory: EncoderFactory, config: RayIngestConfig, on_cluster: bool) -> PointEncoding:
    import ray

    if config.point_encoding_on == "driver" or (config.point_encoding_on == "auto" and not on_cluster):
        return point_encoding_from_factory(factory, config)
    remote = ray.remote(num_cpus=1, num_gpus=0)(point_encoding_from_factory)
    return ray.get(remote.remote(factory, config))


# ---------------------------------------------------------------------- the actor
def _row(d: DocumentPlan) -> dict[str, Any]:
    """A planned document as a Ray Data row (the chunks already stored travel as JSON)."""
    doc = d.doc
    done = json.dumps(sorted(d.done))
    return {
        "doc_id": doc.doc_id,
        "text": doc.text,
        "source": doc.source,
        "content_hash": doc.content_hash,
        "metadata": json.dumps(dict(doc.metadata)),
        "pages": json.dumps([list(p) for p in doc.pages]),
        "done": done,
    }


def _doc_of_row(batch: Mapping[str, Any], i: int) -> SourceDocument:
    """The document of row ``i`` of a Ray batch of :func:`_row` rows (the inverse of :func:`_row`)."""
    return SourceDocument(
        doc_id=str(batch["doc_id"][i]),
        text=str(batch["text"][i]),
        source=str(batch["source"][i]),
        content_hash=str(batch["content_hash"][i]),
        metadata=json.loads(str(batch["metadata"][i])),
        pages=tuple((int(s), str(label)) for s, label in json.loads(str(batch["pages"][i]))),
    )


def _to_columns(batch: PointBatch) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {
        "point_id": np.array(list(batch.ids), dtype=object),
        "payload": np.array([json.dumps(p, sort_keys=True) for p in batch.payloads], dtype=object),
    }
    out.update({f"vec:{name}": _column(value) for name, value in batch.vectors.items()})
    return out


def _column(value: Any) -> np.ndarray:
    """A vector column: an ``(n, size)`` array as is; per-point vectors (e.g. multivectors) as an object array."""
    if isinstance(value, np.ndarray):
        return value
    out = np.empty(len(value), dtype=object)
    for i, v in enumerate(value):
        out[i] = np.asarray(v, dtype=np.float32)
    return out


def _from_columns(cols: Mapping[str, np.ndarray], names: Iterable[str]) -> PointBatch:
    return PointBatch(
        ids=[str(i) for i in cols["point_id"]],
        payloads=[json.loads(p) for p in cols["payload"]],
        vectors={name: cols[f"vec:{name}"] for name in names},
    )


def with_sparse(batch: PointBatch, encoding: PointEncoding) -> PointBatch:
    """``batch`` with its BM25 sparse vectors, computed on the driver from the node texts (cheap, deterministic)."""
    return replace(batch, sparse=encoding.sparse_vectors([P.posfair_fields(p)[P.TEXT] for p in batch.payloads]))


class ChunkEncodeWorker:
    """Ray Data actor: holds one set of encoders; chunks documents and embeds the chunks still missing."""

    def __init__(
        self, factory: EncoderFactory, encoding: PointEncoding, token_budget: int, num_cpus: float, use_gpu: bool
    ) -> None:
        import torch

        if not use_gpu:
            torch.set_num_threads(max(1, int(num_cpus)))
        self.encoder = ChunkEncoder(factory("cuda" if use_gpu else "cpu"), encoding)
        self.token_budget = token_budget

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        chunks = []
        for i in range(len(batch["doc_id"])):
            doc = _doc_of_row(batch, i)
            chunks.extend(self.encoder.chunks(doc, skip=set(json.loads(str(batch["done"][i])))))
        return _to_columns(self.encoder.encode(chunks, token_budget=self.token_budget))


# ---------------------------------------------------------------------- driver
def _ensure_ray(address: str | None, local_cpus: int | None) -> None:
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False)


def _encoded_batches(
    rows: list[dict[str, Any]], factory: EncoderFactory, encoding: PointEncoding, config: RayIngestConfig
) -> Iterable[PointBatch]:
    """Encode ``rows`` on the actor pool; yield write batches of ``write_batch_size`` points."""
    import ray

    use_gpu = config.num_gpus_per_worker > 0
    n_blocks = max(1, math.ceil(len(rows) / config.docs_per_task))
    ds = ray.data.from_items(rows, override_num_blocks=min(n_blocks, 10_000)).map_batches(
        ChunkEncodeWorker,
        fn_constructor_kwargs={
            "factory": factory,
            "encoding": encoding,
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
    saved_bars, ctx.enable_progress_bars = ctx.enable_progress_bars, config.show_progress
    try:
        for cols in ds.iter_batches(batch_size=config.write_batch_size, batch_format="numpy"):
            yield with_sparse(_from_columns(cols, [v.name for v in encoding.vector_configs()]), encoding)
    finally:
        ctx.enable_progress_bars = saved_bars


def ray_ingest_documents(
    client: StoreLike,
    collection: str,
    documents: Sequence[SourceDocument],
    factory: EncoderFactory,
    config: RayIngestConfig | None = None,
    *,
    report: RayIngestReport | None = None,
    ray_address: str | None = None,
    local_cpus: int | None = 2,
    on_write: Callable[[int], None] | None = None,
    spec: CollectionSpec | None = None,
) -> RayIngestReport:
    """Ingest decoded documents with a Ray actor pool; see the module docstring.

    Args:
        client, collection, documents, report, spec: as :func:`qdrant_tools.ingest.ingest_documents` (the
            client is used by the driver only).
        factory: picklable ``device -> {vector name: encoder}``, e.g. an ``EncoderSet``.
        config: run settings.
        ray_address: ``"ray://head:10001"`` or ``"auto"`` for a cluster; None starts
            (or reuses) a local Ray with ``local_cpus`` CPUs.
        on_write: called with the number of chunks written after each upsert.

    Returns:
        The report.

    Raises:
        CollectionMismatchError: before any write, if the collection does not fit the encoders.
        ValueError: duplicate document ids (before any write).
    """
    config = config or RayIngestConfig()
    report = report or RayIngestReport(collection=collection)
    t0 = time.perf_counter()
    _ensure_ray(ray_address, local_cpus)
    encoding = _point_encoding(factory, config, on_cluster=bool(ray_address))
    report.plan_seconds = time.perf_counter() - t0
    report.workers = config.num_workers
    run = IngestionRun.start(
        client, collection, documents, encoding, report, config, spec=spec, ordering=config.write_ordering, started=t0
    )
    rows = [_row(d) for d in run.plan.to_encode]
    if rows:
        run.write(
            _encoded_batches(rows, factory, encoding, config), show_progress=config.show_progress, on_write=on_write
        )
    run.finish()
    return report


def ray_ingest_path(
    client: StoreLike,
    collection: str,
    path: str | Path,
    factory: EncoderFactory,
    config: RayIngestConfig | None = None,
    **kwargs: Any,
) -> RayIngestReport:
    """Ingest a folder of .txt/.md files (or one file) on Ray; see :func:`ray_ingest_documents`.

    Files are read on the driver (skips reported as in :func:`qdrant_tools.ingest.ingest_path`); pruning is
    limited to ``path`` as there (:func:`qdrant_tools.driver.scoped_to`).

    Raises:
        ValueError: ``prune`` with a single file (nothing written).
    """
    config = scoped_to(config or RayIngestConfig(), path)
    docs, report = read_folder(path, config.extensions, RayIngestReport(collection=collection))
    return ray_ingest_documents(client, collection, docs, factory, config, report=report, **kwargs)
