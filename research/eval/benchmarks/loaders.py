"""Loaders for the published position-bias benchmark formats, from a local path.

Nothing here downloads: users fetch the data themselves and point a loader at it.

* ``load_beir``: a BEIR folder (``corpus.jsonl``, ``queries.jsonl``,
  ``qrels/<split>.tsv``); position groups from a query field or a
  ``groups.tsv`` (``query-id<TAB>group``).
* ``load_fineweb_posq``: FineWeb-PosQ rows (``question``, ``content``, ``span``,
  ``span_class``); the group is the row's ``span_class`` (begin/middle/end).
* ``load_squad_posq``: SQuAD-format data (nested v1.1/v2.0 JSON or flat rows with
  ``context``/``question``/``answers``) bucketed by the answer's start character.
* ``load_posir``: a PosIR-style BEIR folder whose queries carry a reference span
  in their positive document: relative midpoint in 20 equal bins, document
  length in token buckets with edges 512/1024/1536.
* ``load_needle``: the PosQ-style needle benchmark ``needle.py`` builds;
  ``load_shipped("needle-prose", "test")`` reads the shipped copy
  (``llamaindex_posfair/data/benchmarks``). The same format carries the shipped natural benchmark,
  ``load_shipped("natural-docs", "test")`` (Python and Vim documentation, hand-written
  questions; ``data/benchmarks/natural_docs/README.md``), and the second needle set,
  ``load_shipped("needle-manuals", "test")`` (GNU manuals, hard negatives in distractor
  passages; ``data/benchmarks/needle_manuals/README.md``).

Files may be ``.json``, ``.jsonl`` or either gzip-compressed (``.gz``); FineWeb-PosQ
and SQuAD rows may also be ``.parquet`` when pandas + pyarrow are installed.

Splits: every loader takes ``split`` and either returns exactly that split or
raises ``SplitError`` (naming the loader, the split, the splits it has and the
fix); none silently returns other data. BEIR, PosIR and needle folders hold
their splits by design. FineWeb-PosQ and SQuAD rows are split by files: a folder
holding ``<split>.jsonl`` (or ``<split>-*.parquet``, ``<split>-v1.1.json`` ...)
or a ``<split>/`` sub-folder per split; ``split=None`` reads the given file or
folder whole (one unnamed split).

Example:
    >>> from research.eval.benchmarks.loaders import load_shipped
    >>> bench = load_shipped("needle-prose", "dev")
    >>> bench.group_order
    ('begin', 'middle', 'end')
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from .data import PositionBenchmark

__all__ = [
    "DEFAULT_SQUAD_EDGES",
    "POSIR_LENGTH_EDGES",
    "SHIPPED",
    "SplitError",
    "load_beir",
    "load_benchmark",
    "load_fineweb_posq",
    "load_needle",
    "load_posir",
    "load_shipped",
    "load_squad_posq",
    "read_rows",
    "shipped_path",
]

#: Answer-start character edges of the SQuAD-PosQ-style buckets (six groups).
DEFAULT_SQUAD_EDGES: tuple[int, ...] = (100, 200, 300, 400, 500)
#: PosIR document-length bucket edges, in tokens.
POSIR_LENGTH_EDGES: tuple[int, ...] = (512, 1024, 1536)
#: Shipped benchmarks: name -> folder under ``llamaindex_posfair/data/benchmarks``.
SHIPPED: dict[str, str] = {
    "needle-prose": "needle_prose",
    "natural-docs": "natural_docs",
    "needle-manuals": "needle_manuals",
}
FINEWEB_GROUPS: tuple[str, ...] = ("begin", "middle", "end")
_ROW_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet")


class SplitError(FileNotFoundError, ValueError):
    """A loader was asked for a split its data does not provide.

    The message names the loader, the split asked for, the splits available and
    the fix. It is a ``FileNotFoundError`` (the split's data is not there) and a
    ``ValueError`` (the ``split`` argument is not valid for this data).
    """


# ----------------------------------------------------------------------------- files
def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a ``.jsonl``/``.json``/``.parquet`` file (``.gz`` allowed).

    A ``.json`` file may hold a list of records or ``{"data": [...]}``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the suffix is not one of the supported ones.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; download the benchmark and pass its local path")
    stem_suffix = Path(path.stem).suffix if path.suffix == ".gz" else path.suffix
    if stem_suffix == ".parquet" or path.suffix == ".parquet":
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - optional
            raise ImportError("reading .parquet needs pandas and pyarrow; convert the file to .jsonl instead") from exc
        yield from pd.read_parquet(path).to_dict(orient="records")
        return
    if stem_suffix == ".jsonl":
        with _open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno} is not valid JSON: {exc}") from exc
        return
    if stem_suffix == ".json":
        with _open_text(path) as fh:
            data = json.load(fh)
        if isinstance(data, dict) and "data" in data:
            data = data["data"]
        if not isinstance(data, list):
            raise ValueError(f"{path} must hold a list of records (or {{'data': [...]}}), got {type(data).__name__}")
        yield from data
        return
    raise ValueError(f"unsupported file type {path.name!r}; use .jsonl, .json or .parquet (optionally .gz)")


def _find(folder: Path, stem: str) -> Path:
    for suffix in (".jsonl", ".jsonl.gz", ".json", ".json.gz"):
        p = folder / f"{stem}{suffix}"
        if p.exists():
            return p
    raise FileNotFoundError(f"no {stem}.jsonl (or .jsonl.gz/.json) in {folder}; is this a BEIR-style folder?")


def _is_rows_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(_ROW_SUFFIXES)


def _split_of(path: Path) -> str:
    """Split named by a rows file: the name up to its first ``.`` or ``-`` (``dev-v1.1.json`` -> ``dev``)."""
    return re.split(r"[.\-]", path.name, maxsplit=1)[0]


def _splits_in(folder: Path) -> list[str]:
    names = {_split_of(p) for p in folder.iterdir() if _is_rows_file(p)}
    names |= {p.name for p in folder.iterdir() if p.is_dir() and any(_is_rows_file(f) for f in p.iterdir())}
    return sorted(names)


def _split_rows(loader: str, path: str | Path, split: str | None) -> Iterator[dict[str, Any]]:
    """Rows of ``split`` under ``path`` (``None``: ``path`` whole), or a ``SplitError``.

    A split is a ``<split>/`` sub-folder of ``path`` or the rows files in
    ``path`` whose name starts with ``<split>.`` or ``<split>-``.
    """
    path = Path(path)
    if split is None:
        yield from _rows_in(path)
        return
    if not path.exists():
        raise FileNotFoundError(f"{loader}: {path} does not exist; download the benchmark and pass its local path")
    if path.is_file():
        raise SplitError(
            f"{loader}: split={split!r} was asked for, but {path} is a single file, which holds one unnamed "
            f"split (available: split=None, the whole file). Fix: pass split=None (python -m research.eval: --split none "
            f"--no-grid), or put each split in its own file in one folder (e.g. dev.jsonl and test.jsonl) and "
            f"pass the folder"
        )
    if (path / split).is_dir():
        yield from _rows_in(path / split)
        return
    files = [p for p in sorted(path.iterdir()) if _is_rows_file(p) and _split_of(p) == split]
    if not files:
        raise SplitError(
            f"{loader}: no split {split!r} in {path}; available splits: {_splits_in(path)}. Fix: pass one of "
            f"them, or add {split}.jsonl (or a {split}/ folder) there"
        )
    for f in files:
        yield from read_rows(f)


def _no_whole_split(loader: str, folder: Path, available: list[str]) -> SplitError:
    return SplitError(
        f"{loader}: split=None, but {folder} stores its data by split; available splits: {available}. "
        f"Fix: pass one of them"
    )


def _doc_text(row: dict[str, Any]) -> str:
    title = str(row.get("title") or "").strip()
    text = str(row.get("text") or "")
    return f"{title} {text}".strip() if title else text


def _content_id(text: str) -> str:
    return "d" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _read_qrels(path: Path) -> dict[str, dict[str, float]]:
    qrels: dict[str, dict[str, float]] = {}
    with _open_text(path) as fh:
        reader = csv.reader(fh, delimiter="\t")
        for i, row in enumerate(reader):
            if not row or (i == 0 and not _is_number(row[-1])):
                continue  # header
            if len(row) == 4:  # TREC: qid 0 docid rel
                qid, _, did, rel = row
            elif len(row) == 3:
                qid, did, rel = row
            else:
                raise ValueError(f"{path}:{i + 1}: expected 3 (BEIR) or 4 (TREC) tab-separated columns, got {row!r}")
            qrels.setdefault(qid, {})[did] = float(rel)
    return qrels


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ BEIR
def _load_beir_parts(folder: Path, split: str | None, loader: str = "load_beir"):
    if not folder.is_dir():
        raise FileNotFoundError(f"{loader}: {folder} is not a folder; pass the BEIR dataset folder (with corpus.jsonl)")
    available = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
    if split is None:
        raise _no_whole_split(loader, folder, available)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        raise SplitError(
            f"{loader}: {qrels_path} does not exist; split={split!r}, available splits: {available}. "
            f"Fix: pass one of them"
        )
    corpus_rows = list(read_rows(_find(folder, "corpus")))
    query_rows = list(read_rows(_find(folder, "queries")))
    corpus = {str(r["_id"]): _doc_text(r) for r in corpus_rows}
    qrels = _read_qrels(qrels_path)
    queries = {str(r["_id"]): str(r["text"]) for r in query_rows if str(r["_id"]) in qrels}
    qrels = {q: {d: g for d, g in docs.items() if d in corpus} for q, docs in qrels.items() if q in queries}
    return corpus, queries, qrels, {str(r["_id"]): r for r in query_rows}


def load_beir(
    folder: str | Path,
    split: str | None = "test",
    group_field: str = "group",
    group_order: Sequence[str] | None = None,
    name: str | None = None,
) -> PositionBenchmark:
    """Load a plain BEIR folder, with optional position groups.

    Groups come from ``groups.tsv`` in the folder (``query-id<TAB>group``) if it
    exists, else from ``group_field`` of each query row (also looked up in its
    ``metadata``). Queries without a group still count for overall scores.

    Args:
        folder: Folder with ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.
        split: Qrels file to use.
        group_field: Query field holding the position group.
        group_order: Display order of groups; ``None`` keeps first-seen order.
        name: Table name; defaults to the folder name.

    Raises:
        SplitError: ``qrels/<split>.tsv`` does not exist, or ``split`` is ``None``.

    Example:
        >>> bench = load_beir("path/to/scifact")  # doctest: +SKIP
    """
    folder = Path(folder)
    corpus, queries, qrels, rows = _load_beir_parts(folder, split)
    groups: dict[str, str] = {}
    groups_file = folder / "groups.tsv"
    if groups_file.exists():
        with open(groups_file, encoding="utf-8") as fh:
            for row in csv.reader(fh, delimiter="\t"):
                if len(row) >= 2 and row[0] in queries:
                    groups[row[0]] = row[1]
    else:
        for qid in queries:
            r = rows[qid]
            g = r.get(group_field, (r.get("metadata") or {}).get(group_field))
            if g is not None:
                groups[qid] = str(g)
    return PositionBenchmark(
        name=name or folder.name,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        groups=groups,
        group_order=tuple(group_order) if group_order else (),
        meta={"format": "beir", "path": str(folder), "split": split},
    )


# ----------------------------------------------------------------------- FineWeb-PosQ
def load_fineweb_posq(
    path: str | Path,
    split: str | None = None,
    multi_class: str = "drop",
    limit: int | None = None,
    name: str | None = None,
) -> PositionBenchmark:
    """Load FineWeb-PosQ rows: each question's positive is its own ``content``.

    The corpus is every distinct ``content``; a question's group is its
    ``span_class`` (``begin``/``middle``/``end``, a list or a string).

    Args:
        path: A ``.jsonl``/``.json``/``.parquet`` file of rows, or a folder of them.
        split: The split to read from the folder ``path`` (``<split>.jsonl`` or a
            ``<split>/`` folder, see the module docstring); ``None`` reads
            ``path`` whole.
        multi_class: What to do with a question whose evidence spans several
            classes: ``"drop"`` (default: only single-class questions are grouped
            and scored) or ``"first"`` (use the first class).
        limit: Keep only the first ``limit`` questions (quick runs).
        name: Table name; default ``"fineweb-posq"`` (``"fineweb-posq/<split>"``).

    Raises:
        SplitError: ``path`` does not provide ``split``.
        ValueError: a row lacks ``question``/``content``, a class is not
            begin/middle/end, or ``multi_class`` is unknown.
    """
    if multi_class not in ("drop", "first"):
        raise ValueError(f'multi_class must be "drop" or "first", got {multi_class!r}')
    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, float]] = {}
    groups: dict[str, str] = {}
    for i, row in enumerate(_split_rows("load_fineweb_posq", path, split)):
        if "question" not in row or "content" not in row:
            raise ValueError(f"FineWeb-PosQ row {i} lacks 'question' or 'content'; keys are {sorted(row)}")
        classes = row.get("span_class")
        if isinstance(classes, str):
            classes = [classes]
        classes = [str(c).lower() for c in (list(classes) if classes is not None else [])]
        for c in classes:
            if c not in FINEWEB_GROUPS:
                raise ValueError(f"FineWeb-PosQ row {i}: span_class {c!r} is not one of {FINEWEB_GROUPS}")
        distinct = list(dict.fromkeys(classes))
        if len(distinct) != 1 and multi_class == "drop":
            continue
        did = _content_id(str(row["content"]))
        corpus.setdefault(did, str(row["content"]))
        qid = str(row.get("id", row.get("_id", f"q{i}")))
        queries[qid] = str(row["question"])
        qrels[qid] = {did: 1.0}
        if distinct:
            groups[qid] = distinct[0]
        if limit is not None and len(queries) >= limit:
            break
    return PositionBenchmark(
        name=name or _split_name("fineweb-posq", split),
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        groups=groups,
        group_order=tuple(g for g in FINEWEB_GROUPS if g in set(groups.values())),
        meta={"format": "fineweb-posq", "path": str(path), "split": split, "multi_class": multi_class},
    )


def _split_name(base: str, split: str | None) -> str:
    return base if split is None else f"{base}/{split}"


def _rows_in(path: str | Path) -> Iterator[dict[str, Any]]:
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if _is_rows_file(p))
        if not files:
            raise FileNotFoundError(f"{path} holds no .jsonl/.json/.parquet file")
        for f in files:
            yield from read_rows(f)
    else:
        yield from read_rows(path)


# -------------------------------------------------------------------------- SQuAD-PosQ
def _bucket_label(value: float, edges: Sequence[float]) -> str:
    lo = 0
    for e in edges:
        if value < e:
            return f"{lo}-{e}"
        lo = e
    return f"{lo}+"


def _bucket_labels(edges: Sequence[float]) -> tuple[str, ...]:
    labels, lo = [], 0
    for e in edges:
        labels.append(f"{lo}-{e}")
        lo = e
    labels.append(f"{lo}+")
    return tuple(labels)


def _squad_flat(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for row in rows:
        if "paragraphs" in row:  # nested SQuAD v1.1/v2.0 article
            for para in row["paragraphs"]:
                for qa in para["qas"]:
                    answers = qa.get("answers") or []
                    yield {
                        "id": qa.get("id"),
                        "context": para["context"],
                        "question": qa["question"],
                        "answer_start": [a["answer_start"] for a in answers],
                    }
        else:
            answers = row.get("answers") or {}
            if isinstance(answers, dict):
                starts = list(answers.get("answer_start", []))
            else:
                starts = [a["answer_start"] for a in answers]
            yield {"id": row.get("id"), "context": row["context"], "question": row["question"], "answer_start": starts}


def load_squad_posq(
    path: str | Path,
    split: str | None = None,
    edges: Sequence[int] = DEFAULT_SQUAD_EDGES,
    name: str | None = None,
    limit: int | None = None,
) -> PositionBenchmark:
    """Load SQuAD-format data grouped by where the answer starts (SQuAD-PosQ style).

    The group of a question is the bucket of its first answer's start
    *character* (``edges`` 100/200/300/400/500 give six groups ``0-100`` ...
    ``500+``). Unanswerable questions (SQuAD v2) are skipped. The corpus is every
    distinct context.

    Args:
        path: SQuAD JSON (``{"data": [articles]}``), or rows with ``context``,
            ``question`` and ``answers`` (``{"text": [...], "answer_start": [...]}``);
            or a folder of such files.
        split: The split to read from the folder ``path`` (``dev-v1.1.json``,
            ``dev.jsonl`` or a ``dev/`` folder for ``"dev"``); ``None`` reads
            ``path`` whole.
        edges: Increasing bucket edges in characters.
        name: Table name; default ``"squad-posq"`` (``"squad-posq/<split>"``).
        limit: Keep only the first ``limit`` questions.

    Raises:
        SplitError: ``path`` does not provide ``split``.
        ValueError: ``edges`` are not increasing positive offsets.
    """
    if list(edges) != sorted(set(edges)) or not edges or min(edges) <= 0:
        raise ValueError(f"edges must be increasing positive character offsets, got {tuple(edges)!r}")
    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, float]] = {}
    groups: dict[str, str] = {}
    for i, row in enumerate(_squad_flat(_split_rows("load_squad_posq", path, split))):
        if not row["answer_start"]:
            continue
        did = _content_id(row["context"])
        corpus.setdefault(did, row["context"])
        qid = str(row["id"] if row["id"] is not None else f"q{i}")
        queries[qid] = row["question"]
        qrels[qid] = {did: 1.0}
        groups[qid] = _bucket_label(float(row["answer_start"][0]), edges)
        if limit is not None and len(queries) >= limit:
            break
    present = set(groups.values())
    return PositionBenchmark(
        name=name or _split_name("squad-posq", split),
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        groups=groups,
        group_order=tuple(g for g in _bucket_labels(edges) if g in present),
        meta={"format": "squad-posq", "path": str(path), "split": split, "edges": list(edges)},
    )


# ------------------------------------------------------------------------------- PosIR
_SPAN_KEYS = ("span", "reference_span", "char_span", "answer_span")


def _query_span(row: dict[str, Any]) -> tuple[float, float] | None:
    sources = [row, row.get("metadata") or {}]
    for src in sources:
        for key in _SPAN_KEYS:
            v = src.get(key)
            if v is not None and len(v) >= 2:
                return float(v[0]), float(v[1])
        for a, b in (("span_start", "span_end"), ("start", "end"), ("answer_start", "answer_end")):
            if src.get(a) is not None and src.get(b) is not None:
                return float(src[a]), float(src[b])
    return None


def load_posir(
    folder: str | Path,
    split: str | None = "test",
    count_tokens: Callable[[list[str]], list[int]] | None = None,
    n_bins: int = 20,
    length_edges: Sequence[int] = POSIR_LENGTH_EDGES,
    group_by: str = "bins",
    name: str | None = None,
) -> PositionBenchmark:
    """Load a PosIR-style BEIR folder whose queries carry their reference span.

    Each query names a character span in its (single) positive document: a
    ``span``/``reference_span``/``char_span`` pair, or ``span_start``+``span_end``
    (also looked up in ``metadata``). The relative position is the span's
    midpoint divided by the document's character length, put into ``n_bins``
    equal bins; the document's token length goes into buckets with
    ``length_edges`` (512/1024/1536). Queries without a span are kept for overall
    scores only.

    Args:
        folder: BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).
        split: Qrels file.
        count_tokens: Token counter for document lengths (e.g. an encoder's
            ``count_tokens``); ``None`` counts whitespace-separated words, which
            undercounts sub-word tokens (say so when you report).
        n_bins: Number of relative-position bins (PosIR: 20).
        length_edges: Token-length bucket edges.
        group_by: ``"bins"`` (the ``n_bins`` bins are the groups) or ``"thirds"``
            (begin/middle/end by the same midpoint).
        name: Table name; defaults to the folder name.

    Note:
        The published PosIR release's span field names may differ from the
        ones tried here; rename them to ``span`` if the loader finds none.
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}; PosIR uses 20")
    if group_by not in ("bins", "thirds"):
        raise ValueError(f'group_by must be "bins" or "thirds", got {group_by!r}')
    folder = Path(folder)
    corpus, queries, qrels, rows = _load_beir_parts(folder, split, "load_posir")
    positives = {q: next((d for d, g in docs.items() if g > 0), None) for q, docs in qrels.items()}
    doc_ids = sorted({d for d in positives.values() if d is not None})
    if count_tokens is None:
        lengths = [len(corpus[d].split()) for d in doc_ids]
    else:
        lengths = list(count_tokens([corpus[d] for d in doc_ids]))
    doc_len = dict(zip(doc_ids, lengths))
    width = len(str(n_bins - 1))
    groups: dict[str, str] = {}
    bins: dict[str, str] = {}
    buckets: dict[str, str] = {}
    for qid in queries:
        did = positives.get(qid)
        span = _query_span(rows[qid])
        if did is None or span is None:
            continue
        n_chars = max(len(corpus[did]), 1)
        rel = min(max((span[0] + span[1]) / 2.0 / n_chars, 0.0), 1.0)
        b = min(int(rel * n_bins), n_bins - 1)
        bins[qid] = str(b).zfill(width)
        buckets[qid] = _length_label(doc_len[did], length_edges)
        groups[qid] = bins[qid] if group_by == "bins" else FINEWEB_GROUPS[min(int(rel * 3), 2)]
    order = tuple(str(b).zfill(width) for b in range(n_bins)) if group_by == "bins" else FINEWEB_GROUPS
    present = set(groups.values())
    return PositionBenchmark(
        name=name or folder.name,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        groups=groups,
        group_order=tuple(g for g in order if g in present),
        length_buckets=buckets,
        position_bins=bins,
        meta={
            "format": "posir",
            "path": str(folder),
            "split": split,
            "length_unit": "words" if count_tokens is None else "tokens",
        },
    )


def _length_label(n: int, edges: Sequence[int]) -> str:
    lo = 0
    for e in edges:
        if n < e:
            return f"{lo}-{e}"
        lo = e
    return f">={lo}"


# ------------------------------------------------------------------------ needle format
def load_needle(folder: str | Path, split: str | None = "test", name: str | None = None) -> PositionBenchmark:
    """Load a needle benchmark written by ``needle.write_needle_benchmark``.

    The folder holds ``<split>/corpus.jsonl(.gz)`` (``_id``, ``text``) and
    ``<split>/queries.jsonl(.gz)`` (``_id``, ``text``, ``doc_id``, ``group``,
    ``rel_position`` ...).

    Raises:
        SplitError: ``folder`` has no ``<split>/`` folder, or ``split`` is ``None``.
    """
    folder = Path(folder)
    available = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    if split is None:
        raise _no_whole_split("load_needle", folder, available)
    split_dir = folder / split
    if not split_dir.is_dir():
        raise SplitError(
            f"load_needle: no split {split!r} in {folder}; available splits: {available}. Fix: pass one of them"
        )
    corpus = {str(r["_id"]): str(r["text"]) for r in read_rows(_find(split_dir, "corpus"))}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, float]] = {}
    groups: dict[str, str] = {}
    bins: dict[str, str] = {}
    for r in read_rows(_find(split_dir, "queries")):
        qid = str(r["_id"])
        queries[qid] = str(r["text"])
        qrels[qid] = {str(r["doc_id"]): 1.0}
        groups[qid] = str(r["group"])
        if "rel_position" in r:
            bins[qid] = str(min(int(float(r["rel_position"]) * 20), 19)).zfill(2)
    info_path = folder / "info.json"
    info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else {}
    order = tuple(info.get("groups", ())) or tuple(dict.fromkeys(groups.values()))
    return PositionBenchmark(
        name=name or f"{info.get('name', folder.name)}/{split}",
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        groups=groups,
        group_order=order,
        position_bins=bins,
        meta={
            "format": "needle",
            "path": str(folder),
            "split": split,
            **{k: v for k, v in info.items() if k != "groups"},
        },
    )


def shipped_path(name: str = "needle-prose") -> Path:
    """Folder of a benchmark shipped inside the package."""
    if name not in SHIPPED:
        raise ValueError(f"unknown shipped benchmark {name!r}; shipped: {sorted(SHIPPED)}")
    return Path(str(resources.files("llamaindex_posfair") / "data" / "benchmarks" / SHIPPED[name]))


def load_shipped(name: str = "needle-prose", split: str | None = "test") -> PositionBenchmark:
    """Load a benchmark shipped with the package (``dev`` and ``test`` splits; choose on dev, report test).

    Args:
        name: ``"needle-prose"`` (planted facts in public-domain prose; disjoint passages per
            split), ``"needle-manuals"`` (planted facts about people, things and places in GNU
            manuals, with distractor passages holding near-duplicate facts; disjoint passages per
            split) or ``"natural-docs"`` (hand-written questions on Python and Vim documentation;
            every split is scored against all 901 passages). Sizes and licences: the
            ``README.md`` and ``LICENSE.md`` next to the data (:func:`shipped_path`).
        split: ``"dev"`` or ``"test"``.

    Raises:
        ValueError: ``name`` is not shipped.
        SplitError: ``split`` is not ``"dev"`` or ``"test"``.

    Example:
        >>> load_shipped("natural-docs", "test").group_counts()
        {'begin': 40, 'middle': 40, 'end': 40}
    """
    return load_needle(shipped_path(name), split)


FORMATS = ("needle", "beir", "fineweb-posq", "squad-posq", "posir")


def load_benchmark(fmt: str, path: str | Path | None, split: str | None = "test", **kwargs: Any) -> PositionBenchmark:
    """Dispatch on ``fmt`` (one of ``FORMATS``); ``path=None`` with ``needle`` loads the shipped one.

    Every format is given ``split`` and returns exactly that split or raises
    ``SplitError``; ``None`` asks for the data whole (FineWeb-PosQ, SQuAD only).
    """
    if fmt == "needle":
        return load_shipped("needle-prose", split) if path is None else load_needle(path, split)
    if path is None:
        raise ValueError(f"format {fmt!r} needs --data PATH (a local copy); only 'needle' has a shipped default")
    if fmt == "beir":
        return load_beir(path, split, **kwargs)
    if fmt == "fineweb-posq":
        return load_fineweb_posq(path, split, **kwargs)
    if fmt == "squad-posq":
        return load_squad_posq(path, split, **kwargs)
    if fmt == "posir":
        return load_posir(path, split, **kwargs)
    raise ValueError(f"unknown benchmark format {fmt!r}; valid formats: {FORMATS}")
