"""Read every file, point and vector of an embedded collection and report what is damaged; change nothing.

:func:`check_collection` is what ``posfair storage check`` runs: it parses the store's and the collection's
JSON files, loads the shard as an open does, reads every point back with its payload and vectors (a failing
page point by point, so each damaged point is named; a vector with NaN, infinity or a cosine vector not of
unit length is damaged) and compares the count. It holds the folder's lock and writes nothing; docs/storage.md
("``posfair storage check``") says what Qdrant Edge itself rewrites on a load.

Example:
    >>> import tempfile
    >>> from qdrant_client import models
    >>> from qdrant_tools.store import open_store
    >>> folder = tempfile.mkdtemp()
    >>> with open_store(folder) as store:
    ...     store.create_collection("d", vectors_config={"v": models.VectorParams(size=2,
    ...                             distance=models.Distance.COSINE)})
    ...     _ = store.upsert("d", models.Batch(ids=[1, 2], vectors={"v": [[1, 0], [0, 1]]}, payloads=[{}, {}]))
    True
    >>> report = check_collection(folder, "d")
    >>> report.clean, report.points, report.vectors
    (True, 2, 2)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as E
from qdrant_client import models

from qdrant_tools.store import folder as folders
from qdrant_tools.store.collection import load_shard, read_record
from qdrant_tools.store.config import CollectionRecord
from qdrant_tools.store.errors import (
    LegacyStorageError,
    NotAStoreError,
    StorageDamagedError,
    StoreLockedError,
    StoreNotFoundError,
    damaged_path,
    is_file_failure,
    one_segment,
    recovery_hint,
)
from qdrant_tools.store.ids import from_edge_id, to_edge_id
from qdrant_tools.store.lock import FolderLock
from qdrant_tools.store.shared import open_here

#: Points read per page.
DEFAULT_PAGE_SIZE = 256
#: Collections with fewer points are checked without a progress bar (they take well under a second).
PROGRESS_FROM = 2_000
#: How far a stored cosine vector's length may be from 1 (float32 rounding stays far below).
COSINE_NORM_TOLERANCE = 1e-3


@dataclass
class CheckReport:
    """What :func:`check_collection` found.

    Attributes:
        root: the store folder.
        collection: the collection checked.
        points: points read whole (payload and vectors).
        vectors: vectors read (a multivector counts one).
        counted: the points the collection counts (None: the shard could not be opened).
        files: damaged file or folder -> what is wrong with it.
        damaged_points: damaged point id -> what is wrong with it.
    """

    root: Path
    collection: str
    points: int = 0
    vectors: int = 0
    counted: int | None = None
    files: dict[str, str] = field(default_factory=dict)
    damaged_points: dict[Any, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """Whether nothing is damaged."""
        return not self.files and not self.damaged_points

    def damaged_file(self, path: str | Path, problem: str) -> None:
        self.files.setdefault(str(path), problem)

    def summary(self) -> str:
        """One line: what was read and what is damaged."""
        read = f"{self.points:,} points and {self.vectors:,} vectors read"
        if self.counted is not None and self.counted != self.points:
            read += f" of {self.counted:,} points counted"
        head = f"storage check of collection {self.collection!r} in {str(self.root)!r}: {read}"
        if self.clean:
            return f"{head}; no damage found"
        return (
            f"{head}; DAMAGED: {_plural(len(self.damaged_points), 'point')}, "
            f"{_plural(len(self.files), 'file or folder', 'files or folders')} (listed above). To recover, "
            f"{recovery_hint(self.root, self.collection, check=False)}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.root),
            "collection": self.collection,
            "clean": self.clean,
            "points": self.points,
            "vectors": self.vectors,
            "counted": self.counted,
            "files": self.files,
            "damaged_points": {str(k): v for k, v in self.damaged_points.items()},
        }


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def check_collection(
    root: str | Path, collection: str, *, page_size: int = DEFAULT_PAGE_SIZE, show_progress: bool = False
) -> CheckReport:
    """Read every file, point and vector of ``collection`` in the store at ``root``; write nothing.

    Args:
        root: the embedded store's folder.
        collection: the collection to check.
        page_size: points read per page.
        show_progress: a progress bar (tqdm, on stderr) over the points.

    Returns:
        The report: :attr:`CheckReport.clean` when nothing is damaged.

    Raises:
        StoreNotFoundError / NotAStoreError / LegacyStorageError: ``root`` is no embedded store.
        ValueError: no such collection, or ``page_size`` < 1.
        StoreLockedError: another process (or a store open in this one) has the folder open.
    """
    if page_size < 1:
        raise ValueError(f"page_size must be a positive integer, got {page_size}; e.g. {DEFAULT_PAGE_SIZE}")
    root = Path(root)
    report = CheckReport(root=root, collection=collection)
    _check_marker(root, report)
    folder = _collection_folder(root, collection)
    record_ = _check_record(folder, report)
    _check_json_files(folder / folders.SHARD, report)
    if open_here(root):
        raise StoreLockedError(
            f"this process has the store {str(root)!r} open; close every store on it before checking it"
        )
    lock = FolderLock.acquire(root)
    try:
        _check_shard(folder, record_, report, page_size, show_progress)
    finally:
        lock.release()
    return report


def _check_marker(root: Path, report: CheckReport) -> None:
    kind = folders.folder_kind(root)
    if kind in ("missing", "empty"):
        raise StoreNotFoundError(f"no embedded Qdrant storage at {str(root)!r}; pass the store's folder (--path)")
    if kind == "legacy-local":
        raise LegacyStorageError(f"{str(root)!r} was written by qdrant-client's local mode; it has no Edge shards")
    if kind == "other":
        raise NotAStoreError(f"{str(root)!r} is not an embedded Qdrant store (it holds other files)")
    if kind == "unmarked-store":
        report.damaged_file(root / folders.MARKER, folders.missing_marker_message(root))
        return
    try:
        folders.read_marker(root)
    except StorageDamagedError as exc:
        report.damaged_file(exc.path, str(exc))


def _collection_folder(root: Path, collection: str) -> Path:
    folder = folders.collection_dir(root, collection)
    if not folder.is_dir():
        existing = [p.name for p in folders.collection_folders(root)]
        raise ValueError(f"no collection {collection!r} in {str(root)!r} (existing: {existing})")
    return folder


def _check_record(folder: Path, report: CheckReport) -> CollectionRecord | None:
    try:
        return read_record(folder)
    except StorageDamagedError as exc:
        report.damaged_file(exc.path, str(exc))
        return None


def _check_json_files(shard: Path, report: CheckReport) -> None:
    """Every JSON file of the shard must parse (Edge's own settings and segment states)."""
    for path in sorted(shard.rglob("*.json")):
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            report.damaged_file(path, f"not readable JSON ({type(exc).__name__}: {exc})")


def _check_shard(
    folder: Path, record_: CollectionRecord | None, report: CheckReport, page_size: int, show_progress: bool
) -> None:
    try:
        shard = load_shard(folder)
    except StorageDamagedError as exc:
        report.damaged_file(exc.path, str(exc).split(". The store's files")[0])
        return
    try:
        report.counted = shard.count(E.CountRequest(exact=True))
        with _progress(report.counted, show_progress) as bar:
            for ids in _id_pages(shard, folder, report, page_size):
                _check_page(shard, ids, record_, folder, report)
                bar.update(len(ids))
    finally:
        shard.close()
    if report.counted != report.points + len(report.damaged_points):
        report.damaged_file(
            folder / folders.SHARD,
            f"the collection counts {report.counted:,} points but {report.points + len(report.damaged_points):,} "
            "were found by scrolling (the id tracker and the point storage disagree)",
        )


def _progress(total: int, show: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="point", desc="checking", disable=not show or total < PROGRESS_FROM)


def _id_pages(shard: E.EdgeShard, folder: Path, report: CheckReport, page_size: int) -> Iterator[list[Any]]:
    """Point ids (Edge's), a page at a time; a page that cannot be scrolled ends the walk, reported."""
    offset = None
    while True:
        request = E.ScrollRequest(offset=offset, limit=page_size, with_payload=False, with_vector=False)
        try:
            found, offset = shard.scroll(request)
        except Exception as exc:
            if not is_file_failure(exc):
                raise
            report.damaged_file(damaged_path(str(exc), folder / folders.SHARD), f"scrolling point ids: {exc}")
            return
        if found:
            yield [from_edge_id(r.id) for r in found]
        if offset is None or not found:
            return


def _check_page(
    shard: E.EdgeShard, ids: list[Any], record_: CollectionRecord | None, folder: Path, report: CheckReport
) -> None:
    """Read a page whole; if that fails, read its points one at a time to name the damaged ones."""
    try:
        points = shard.retrieve([to_edge_id(i) for i in ids], True, True)
    except Exception as exc:
        if not is_file_failure(exc):
            raise
        points = None
    if points is not None and len(points) == len(ids):
        _check_points(points, record_, folder, report)
        return
    for point_id in ids:
        _check_one(shard, point_id, record_, folder, report)


def _check_one(
    shard: E.EdgeShard, point_id: Any, record_: CollectionRecord | None, folder: Path, report: CheckReport
) -> None:
    """Read one point's payload, then each of its vectors, and record what fails."""
    names = sorted({*record_.named, *record_.sparse}) if record_ is not None else []
    parts = []
    for what, payload, vectors in (("payload", True, False), *((f"vector {n!r}", False, [n]) for n in names)):
        try:
            found = shard.retrieve([to_edge_id(point_id)], payload, vectors)
        except Exception as exc:
            if not is_file_failure(exc):
                raise
            problem = str(exc).replace("Service runtime error: ", "")
            report.damaged_file(_failed_file(str(exc), folder, vectors), problem)
            parts.append(f"{what}: {problem}")
            continue
        if not found:
            parts.append(f"{what}: the id is listed but the point cannot be read")
    if not parts:  # each part reads alone: read it whole (an unknown vector, or the values' checks)
        try:
            whole = shard.retrieve([to_edge_id(point_id)], True, True)
        except Exception as exc:
            if not is_file_failure(exc):
                raise
            report.damaged_file(damaged_path(str(exc), folder / folders.SHARD), str(exc))
            parts.append(f"vectors: {exc}")
        else:
            _check_points(whole, record_, folder, report)
            return
    report.damaged_points[point_id] = "; ".join(parts)


def _failed_file(message: str, folder: Path, vectors: Any) -> Path:
    """The file a read failure names; else the storage of the one vector that was read."""
    shard = folder / folders.SHARD
    path = damaged_path(message, shard)
    unnamed = path == shard or path.name == "vector_storage-*"  # Edge did not say which vector's file
    if unnamed and isinstance(vectors, list) and len(vectors) == 1:
        return _vector_storage(folder, vectors[0])
    return path


def _vector_storage(folder: Path, name: str) -> Path:
    """Where a vector's values are kept (in whichever segment holds the point)."""
    if not name:
        return folder / folders.SHARD
    return one_segment(folder / folders.SHARD / "segments" / "*" / f"vector_storage-{name}")


def _check_points(points: list[Any], record_: CollectionRecord | None, folder: Path, report: CheckReport) -> None:
    """Check the payloads and vectors of Edge records read whole (each vector name's values at once)."""
    problems: dict[int, list[str]] = {i: [] for i in range(len(points))}
    by_name: dict[str, list[tuple[int, Any]]] = {}
    for i, point in enumerate(points):
        if point.payload is not None and not isinstance(point.payload, dict):
            problems[i].append(f"payload is a {type(point.payload).__name__}, not an object")
        for name, value in (point.vector or {}).items():
            by_name.setdefault(name, []).append((i, value))
    for name, items in by_name.items():
        report.vectors += len(items)
        for k, problem in vector_problems([value for _, value in items], _params(record_, name)):
            i = items[k][0]
            problems[i].append(f"vector {name!r}: {problem}")
            example = f"e.g. point {from_edge_id(points[i].id)!r}: {problem}"
            report.damaged_file(_vector_storage(folder, name), f"holds damaged vectors ({example})")
    for i, found in problems.items():
        if found:
            report.damaged_points[from_edge_id(points[i].id)] = "; ".join(found)
        else:
            report.points += 1


def vector_problems(values: list[Any], params: models.VectorParams | None) -> list[tuple[int, str]]:
    """``(index, problem)`` of each damaged vector among ``values`` (:func:`vector_problem`); dense vectors of
    one length are checked as one matrix."""
    flat = values and all(isinstance(v, list) and v and not isinstance(v[0], list) for v in values)
    if flat and len({len(v) for v in values}) == 1:
        return _matrix_problems(np.asarray(values, dtype=np.float64), _cosine(params))
    found = ((k, vector_problem(v, params)) for k, v in enumerate(values))
    return [(k, problem) for k, problem in found if problem]


def _matrix_problems(rows: np.ndarray, cosine: bool) -> list[tuple[int, str]]:
    """``(row, problem)`` for rows with NaN / infinity, or (cosine) a length other than 1 or 0."""
    finite = np.isfinite(rows).all(axis=1)
    out = {int(k): "holds NaN or infinity" for k in np.flatnonzero(~finite)}
    if cosine:
        norms = np.linalg.norm(np.where(finite[:, None], rows, 0.0), axis=1)
        off = finite & (norms > 0) & (np.abs(norms - 1.0) > COSINE_NORM_TOLERANCE)
        for k in np.flatnonzero(off):
            out[int(k)] = f"a cosine vector of length {norms[k]:.4g} (Qdrant stores them with length 1)"
    return sorted(out.items())


def _cosine(params: models.VectorParams | None) -> bool:
    """Whether Qdrant keeps this vector normalised (float32 cosine)."""
    return (
        params is not None
        and params.distance == models.Distance.COSINE
        and params.datatype in (None, models.Datatype.FLOAT32)
    )


def _params(record_: CollectionRecord | None, name: str) -> models.VectorParams | None:
    return record_.named.get(name) if record_ is not None else None


def vector_problem(value: Any, params: models.VectorParams | None) -> str | None:
    """What is wrong with a stored vector, or None.

    NaN or infinity in any vector; for a float32 cosine vector (which Qdrant keeps normalised), a length other
    than 1 (or 0, a zero vector). A multivector is checked row by row.

    Example:
        >>> vector_problem([0.6, 0.8], None) is None
        True
        >>> vector_problem([float("nan"), 0.0], None)
        'holds NaN or infinity'
    """
    if isinstance(value, (models.SparseVector, E.SparseVector)):
        rows, cosine = np.asarray(value.values, dtype=np.float64).reshape(1, -1), False
    else:
        rows, cosine = np.asarray(value, dtype=np.float64), _cosine(params)
        rows = rows.reshape(1, -1) if rows.ndim == 1 else rows
    found = _matrix_problems(rows, cosine) if rows.size else []
    return found[0][1] if found else None
