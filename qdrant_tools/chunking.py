"""Read text files and split them into token-aware chunks with character offsets.

Pure functions only (no model, no Qdrant): the single-process ingestion in
:mod:`qdrant_tools.ingest` and any distributed ingestion must produce the same
chunks from the same file, so everything that decides a chunk lives here.

A chunk is a window of ``chunk_tokens`` consecutive tokens (special tokens not
counted) that overlaps the previous window by ``overlap_tokens``; its text is
the exact slice ``text[start_char:end_char]`` of the document, so offsets in
the payload always point back into the source file. Window ends are moved back
(at most a few tokens) so that a chunk does not end inside a word.

Example:
    >>> from qdrant_tools.chunking import ChunkingConfig, chunk_text
    >>> chunks = chunk_text("one two three four five", ChunkingConfig(chunk_tokens=3, overlap_tokens=1))
    >>> [(c.text, c.start_char, c.end_char) for c in chunks]
    [('one two three', 0, 13), ('three four five', 8, 23)]
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

Span = tuple[int, int]
#: A function mapping a text to the character spans of its tokens, in order.
SpanFn = Callable[[str], Sequence[Span]]

DEFAULT_EXTENSIONS: tuple[str, ...] = (".txt", ".md")
_WORD = re.compile(r"\S+")
_MAX_SNAP = 16  # tokens a window end may move back to avoid splitting a word
_BINARY_PROBE = 8192
_SPACE = re.compile(r"\s")
_HASH_CHARS = 1 << 20
#: Characters tokenized per tokenizer call when a text is cut into chunks (:func:`iter_spans`).
SEGMENT_CHARS = 1 << 16
_SYNC = 16  # spans emitted from one segment that the next must reproduce before its own are used


@dataclass(frozen=True)
class ChunkingConfig:
    """How documents are cut into chunks.

    Args:
        chunk_tokens: tokens per chunk, special tokens not counted. Keep it
            at most the encoder's window minus its special tokens, or chunks
            are truncated when embedded (ingestion reports how many).
        overlap_tokens: tokens shared by consecutive chunks; must be smaller
            than ``chunk_tokens``.

    Raises:
        ValueError: on a non-positive ``chunk_tokens`` or an overlap outside
            ``[0, chunk_tokens)``.
    """

    chunk_tokens: int = 256
    overlap_tokens: int = 32

    def __post_init__(self) -> None:
        if not isinstance(self.chunk_tokens, int) or self.chunk_tokens <= 0:
            raise ValueError(
                f"chunk_tokens must be a positive integer, got {self.chunk_tokens!r}; typical values are 128-512"
            )
        if not isinstance(self.overlap_tokens, int) or not 0 <= self.overlap_tokens < self.chunk_tokens:
            raise ValueError(
                f"overlap_tokens must be an integer in [0, chunk_tokens={self.chunk_tokens}), "
                f"got {self.overlap_tokens!r}; typical values are 0-64"
            )

    def key(self) -> str:
        """Stable string identifying these settings (part of a document's version)."""
        return f"tokens={self.chunk_tokens};overlap={self.overlap_tokens}"


@dataclass(frozen=True)
class Chunk:
    """One chunk of a document: ``text == document_text[start_char:end_char]``."""

    index: int
    text: str
    start_char: int
    end_char: int
    n_tokens: int


@dataclass(frozen=True)
class SourceDocument:
    """A decoded text document ready for chunking.

    ``doc_id`` is the path relative to the ingested root (POSIX separators), so
    the same folder ingested from another machine gets the same ids.
    ``metadata`` (JSON values) is stored with every chunk of the document, top-level
    in the payload where filters reach it; build ``content_hash`` with
    :func:`content_hash` of the text *and* the metadata, so a change of either is a
    new document version.
    ``pages`` holds ``(start_char, label)`` of each page of a paged document (a PDF),
    in order: each chunk's payload then names the page it starts on and the pages it spans
    (:func:`qdrant_tools.payload.page_fields`); pass them to :func:`content_hash` too.
    """

    doc_id: str
    text: str
    source: str
    content_hash: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    pages: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class SkippedFile:
    """A file that was not ingested, and why."""

    source: str
    reason: str


def whitespace_spans(text: str) -> list[Span]:
    """Token spans of whitespace-separated words (the tokenizer-free default)."""
    return [m.span() for m in _WORD.finditer(text)]


def tokenizer_spans(tokenizer: Any) -> SpanFn:
    """Span function from a Hugging Face *fast* tokenizer (uses offset mappings).

    Raises:
        ValueError: if the tokenizer cannot return offsets (a slow tokenizer).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"tokenizer {type(tokenizer).__name__} is not a fast tokenizer and cannot return "
            "character offsets; load it with use_fast=True or chunk with whitespace_spans"
        )

    backend = _untruncated(tokenizer)

    def spans(text: str) -> list[Span]:
        (encoding,) = backend.encode_batch([text], add_special_tokens=False)  # releases Python's lock
        return [o for o in encoding.offsets if o[1] > o[0]]

    return spans


def _untruncated(tokenizer: Any) -> Any:
    """A copy of a fast ``tokenizer``'s Rust tokenizer with truncation and padding off (as the wrapper sets them
    for a call without either): it gives the wrapper's offsets, and threads may call it at once, since no call
    changes its settings."""
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy


def content_hash(text: str, metadata: Mapping[str, Any] | None = None, pages: Sequence[tuple[int, str]] = ()) -> str:
    """SHA-256 (hex) of the UTF-8 encoded text, and of ``metadata`` and ``pages`` when there are any.

    Without metadata and pages the hash is the text's alone, so documents stored before
    they existed keep their versions.

    Example:
        >>> content_hash("a") == content_hash("a", {})
        True
        >>> content_hash("a") == content_hash("a", {"lang": "en"})
        False
        >>> content_hash("a b", pages=[(0, "1")]) == content_hash("a b", pages=[(0, "1"), (2, "2")])
        False
    """
    h = hashlib.sha256()
    for i in range(0, len(text), _HASH_CHARS):  # in pieces: no copy of a large text
        h.update(text[i : i + _HASH_CHARS].encode("utf-8"))
    if metadata:
        h.update(("\x00" + json.dumps(dict(metadata), sort_keys=True, default=str)).encode("utf-8"))
    if pages:
        h.update(("\x00pages" + json.dumps([[int(s), str(label)] for s, label in pages])).encode("utf-8"))
    return h.hexdigest()


def _snap_end(spans: Sequence[Span], start: int, end: int, last: bool) -> int:
    """Move a window end back so it does not split a word (bounded, never empty); ``last``: ``end`` is the text's end."""
    if last:
        return end
    j = end
    while j > start + 1 and end - j < _MAX_SNAP and spans[j][0] == spans[j - 1][1]:
        j -= 1
    # no word boundary nearby: keep the full window
    return j if spans[j][0] != spans[j - 1][1] else end


def _segment_end(text: str, target: int) -> int:
    """The first whitespace position at or after ``target`` (the text's length if none)."""
    if target >= len(text):
        return len(text)
    m = _SPACE.search(text, target)
    return len(text) if m is None else m.start()


def _resync(spans: list[Span], tail: Sequence[Span]) -> list[Span] | None:
    """``spans`` after the run ``tail`` (the last spans already emitted), or ``None`` if they do not contain it."""
    first = tail[0]
    for j, span in enumerate(spans):
        if span[0] > first[0]:
            return None
        if span == first and spans[j : j + len(tail)] == list(tail):
            return spans[j + len(tail) :]
    return None


def iter_spans(
    text: str, spans_fn: SpanFn = whitespace_spans, segment_chars: int | None = SEGMENT_CHARS
) -> Iterator[Span]:
    """The token spans of ``text``, the same as ``spans_fn(text)``, tokenizing about ``segment_chars`` at a time.

    A tokenizer's output for a whole large file takes several hundred bytes per token; in segments the
    memory is bounded. The text is cut at whitespace about every ``segment_chars`` characters; each part is
    tokenized with a margin on both sides, and gives the spans that start in it, used from where its spans
    agree with those the part before gave (the cut and the margin may change a few tokens near either end).
    The segments do not depend on each other's tokens, so two are tokenized at once (a Rust tokenizer
    releases Python's lock). A tokenizer whose spans do not agree across a cut has the rest of the text
    tokenized in one call (logged), so the spans are always those of the whole text.

    Args:
        text: the document text.
        spans_fn: the tokenizer as a span function.
        segment_chars: characters per tokenizer call; ``None``: the whole text in one call.

    Example:
        >>> text = "one two three " * 50
        >>> list(iter_spans(text, segment_chars=40)) == whitespace_spans(text)
        True
    """
    if segment_chars is None or len(text) <= segment_chars:
        yield from spans_fn(text)
        return
    emitted: list[Span] = []  # the last spans emitted (at most _SYNC)
    count = 0
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        for cut, next_cut, future in _ahead(pool, _cuts(text, segment_chars), spans_fn, text):
            spans = future.result()
            if emitted:  # the segment starts before its cut: it must agree with the spans emitted up to it
                synced = _resync(spans, emitted)
                if synced is None or (synced and synced[0][0] < cut):
                    logger.warning(
                        "the tokenizer's spans differ across a cut of the text; tokenizing the rest in one call"
                    )
                    yield from list(spans_fn(text))[count:]
                    return
                spans = synced
            if next_cut is not None:  # spans from the next cut on are the next segment's
                spans = [span for span in spans if span[0] < next_cut]
            yield from spans
            count += len(spans)
            emitted = (emitted + spans)[-_SYNC:]


#: Characters a segment tokenizes on each side of its part of the text: before its cut, where its first tokens
#: may differ from the whole text's, and after the next cut, where the cut may change its last tokens.
_MARGIN = 2048
#: Tokenizer calls in flight at once: a Rust tokenizer releases Python's lock while it works.
_THREADS = 2


def _cuts(text: str, segment_chars: int) -> Iterator[tuple[int, int | None]]:
    """``(cut, next cut)`` of each part of ``text`` (``None``: the part runs to the end): cuts at whitespace,
    about ``segment_chars`` apart."""
    cut = 0
    while True:
        next_cut = _segment_end(text, cut + segment_chars)
        if next_cut >= len(text):
            yield cut, None
            return
        yield cut, next_cut
        cut = next_cut


def _ahead(
    pool: ThreadPoolExecutor, cuts: Iterator[tuple[int, int | None]], spans_fn: SpanFn, text: str
) -> Iterator[tuple[int, int | None, Future[list[Span]]]]:
    """Each part with the future of its segment's spans (document offsets): the part and :data:`_MARGIN`
    characters on each side, from and to whitespace; :data:`_THREADS` segments tokenized ahead."""

    def spans_of(cut: int, next_cut: int | None) -> list[Span]:
        start = 0 if cut <= _MARGIN else _segment_end(text, cut - _MARGIN)
        end = len(text) if next_cut is None else _segment_end(text, next_cut + _MARGIN)
        return [(a + start, b + start) for a, b in spans_fn(text[start:end])]

    queue: collections.deque[tuple[int, int | None, Future[list[Span]]]] = collections.deque()
    for cut, next_cut in cuts:
        queue.append((cut, next_cut, pool.submit(spans_of, cut, next_cut)))
        if len(queue) > _THREADS:
            yield queue.popleft()
    yield from queue


class _SpanWindow:
    """Spans read from an iterator and addressed by their index in the whole text; the ones before
    :meth:`drop`'s index are forgotten."""

    def __init__(self, spans: Iterable[Span]) -> None:
        self._it = iter(spans)
        self._buf: list[Span] = []
        self._base = 0
        self.n: int | None = None  # the number of spans, once the iterator is exhausted

    def fill(self, upto: int) -> None:
        """Read spans until index ``upto - 1`` is held or the text ends."""
        while self.n is None and self._base + len(self._buf) < upto:
            span = next(self._it, None)
            if span is None:
                self.n = self._base + len(self._buf)
            else:
                self._buf.append(span)

    def __getitem__(self, i: int) -> Span:
        return self._buf[i - self._base]

    def drop(self, i: int) -> None:
        """Forget the spans before index ``i``."""
        del self._buf[: i - self._base]
        self._base = i


def iter_chunks(
    text: str,
    config: ChunkingConfig = ChunkingConfig(),
    spans_fn: SpanFn = whitespace_spans,
    segment_chars: int | None = SEGMENT_CHARS,
) -> Iterator[Chunk]:
    """The chunks of :func:`chunk_text`, one at a time: memory bounded by a chunk, not by the text.

    Args:
        text: the document text.
        config: chunk size and overlap.
        spans_fn: tokenizer as a span function (see :func:`tokenizer_spans`).
        segment_chars: characters tokenized per call (:func:`iter_spans`); ``None``: the whole text at once.

    Yields:
        Chunks in document order; none for a text without tokens.
    """
    spans = _SpanWindow(iter_spans(text, spans_fn, segment_chars))
    start, index = 0, 0
    while True:
        spans.fill(start + config.chunk_tokens + 1)
        n = spans.n
        if n is not None and start >= n:
            return
        stop = start + config.chunk_tokens if n is None else min(start + config.chunk_tokens, n)
        end = _snap_end(spans, start, stop, last=n is not None and stop >= n)
        yield Chunk(
            index=index,
            text=text[spans[start][0] : spans[end - 1][1]],
            start_char=spans[start][0],
            end_char=spans[end - 1][1],
            n_tokens=end - start,
        )
        index += 1
        if n is not None and end >= n:
            return
        nxt = max(end - config.overlap_tokens, start + 1)
        # start the next window at a word start when the overlap allows it
        while (
            nxt > start + 1
            and nxt < end
            and spans[nxt][0] == spans[nxt - 1][1]
            and end - nxt < config.overlap_tokens + _MAX_SNAP
        ):
            nxt -= 1
        start = nxt
        spans.drop(start)


def chunk_text(
    text: str,
    config: ChunkingConfig = ChunkingConfig(),
    spans_fn: SpanFn = whitespace_spans,
    segment_chars: int | None = SEGMENT_CHARS,
) -> list[Chunk]:
    """Split ``text`` into overlapping token windows: :func:`iter_chunks` (the same arguments), as a list.

    Returns:
        Chunks in document order; empty for a text without tokens.
    """
    return list(iter_chunks(text, config, spans_fn, segment_chars))


class ChunkBounds:
    """Where each chunk of a text lies, without its text (24 bytes a chunk): built by :func:`chunk_bounds`.

    Example:
        >>> text = "one two three four five"
        >>> bounds = chunk_bounds(text, ChunkingConfig(chunk_tokens=3, overlap_tokens=1))
        >>> len(bounds), bounds.chunk(text, 1) == chunk_text(text, ChunkingConfig(3, 1))[1]
        (2, True)
    """

    def __init__(self) -> None:
        self._cells = array("q")

    def append(self, chunk: Chunk) -> None:
        """Record the next chunk's offsets and token count."""
        self._cells.extend((chunk.start_char, chunk.end_char, chunk.n_tokens))

    def __len__(self) -> int:
        return len(self._cells) // 3

    def chunk(self, text: str, index: int) -> Chunk:
        """The chunk ``index`` of ``text`` (the text the bounds were built from).

        Raises:
            IndexError: ``index`` is not a chunk index.
        """
        if not 0 <= index < len(self):
            raise IndexError(f"chunk index must be in [0, {len(self)}), got {index}")
        start, end, n_tokens = self._cells[3 * index : 3 * index + 3]
        return Chunk(index=index, text=text[start:end], start_char=start, end_char=end, n_tokens=n_tokens)


def chunk_bounds(
    text: str,
    config: ChunkingConfig = ChunkingConfig(),
    spans_fn: SpanFn = whitespace_spans,
    segment_chars: int | None = SEGMENT_CHARS,
) -> ChunkBounds:
    """The bounds of :func:`chunk_text`'s chunks, read in one pass that keeps no chunk text.

    How many chunks a document has is known before its first chunk is embedded, with the memory of its
    offsets alone; :meth:`ChunkBounds.chunk` gives each chunk back.
    """
    bounds = ChunkBounds()
    for chunk in iter_chunks(text, config, spans_fn, segment_chars):
        bounds.append(chunk)
    return bounds


def discover_files(root: str | Path, extensions: Iterable[str] = DEFAULT_EXTENSIONS) -> tuple[list[Path], int]:
    """Files under ``root`` with one of ``extensions``, sorted; hidden paths skipped.

    Returns:
        ``(files, n_other)``: matching files and the number of other files ignored.

    Raises:
        FileNotFoundError: if ``root`` does not exist.
    """
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"path {str(root)!r} does not exist; pass a folder of .txt/.md files or one file")
    exts = {e.lower() if e.startswith(".") else "." + e.lower() for e in extensions}
    if root.is_file():
        return ([root], 0) if root.suffix.lower() in exts else ([], 1)
    files, other = [], 0
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not p.is_file():
            continue
        if p.suffix.lower() in exts:
            files.append(p)
        else:
            other += 1
    return files, other


def document_id(path: Path, root: Path) -> str:
    """Stable id of a file: its path relative to ``root`` (or its name if ``root`` is the file)."""
    path, root = Path(path), Path(root)
    if root.is_file() or path == root:
        return path.name
    return path.relative_to(root).as_posix()


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def linked_folders(root: str | Path) -> list[Path]:
    """The links to folders under the folder ``root`` (not looked into), sorted; hidden paths skipped."""
    found = []
    for folder, dirs, _ in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(Path(folder, d) for d in dirs if os.path.islink(os.path.join(folder, d)))
    return sorted(found)


def place_files(
    files: Iterable[Path], root: str | Path, follow_links: bool = False
) -> tuple[list[tuple[Path, str]], list[SkippedFile]]:
    """Each file found under ``root`` with its document id: the path it resolves to, relative to ``root`` resolved.

    A file reached twice (itself and a link to it, or two links) is read once, so it is stored once under one
    id. A link whose target lies outside ``root`` is skipped unless ``follow_links``; a followed one has the id
    of the path it was found at. Each file left out is a :class:`SkippedFile` saying why.

    Args:
        files: the files found, in order (the first of two paths to one file is kept).
        root: the folder ingested, or the one file.
        follow_links: read the targets of links that leave ``root``.

    Returns:
        ``(placed, skipped)``: ``(path to read, doc_id)`` per file (``root`` joined with the id, or the one
        file ``root``), and the files left out.

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "a.txt").write_text("a")
        >>> (root / "again.txt").symlink_to(root / "a.txt")
        >>> placed, skipped = place_files([root / "a.txt", root / "again.txt"], root)
        >>> [doc_id for _, doc_id in placed], len(skipped)
        (['a.txt'], 1)
    """
    root_real = os.path.realpath(root)
    single = os.path.isfile(root_real)
    placed: list[tuple[Path, str]] = []
    skipped: list[SkippedFile] = []
    first_of: dict[str, str] = {}
    for f in files:
        real = os.path.realpath(f)
        if single:
            doc_id = Path(real).name
        elif _inside(real, root_real):
            doc_id = Path(os.path.relpath(real, root_real)).as_posix()
        elif follow_links:
            doc_id = Path(os.path.relpath(os.path.abspath(f), os.path.abspath(root))).as_posix()
        else:
            skipped.append(
                SkippedFile(str(f), f"a link to {real}, outside the ingested folder; pass --follow-links to read it")
            )
            continue
        if real in first_of:
            skipped.append(SkippedFile(str(f), f"the same file as {first_of[real]!r} (through a link): read once"))
            continue
        first_of[real] = doc_id
        placed.append((Path(root) if single else Path(root, doc_id), doc_id))
    return placed, skipped


#: Why the files of an embedded Qdrant store found under an ingested folder are not read.
STORE_FOLDER_REASON = "an embedded Qdrant store (its segment and config files are not documents)"


def without_stores(files: Sequence[Path], root: str | Path) -> tuple[list[Path], list[SkippedFile]]:
    """``files`` less those inside an embedded Qdrant store under ``root`` (``root`` itself included), and one
    :class:`SkippedFile` per such store folder (:func:`qdrant_tools.store.folder.is_store_folder`).

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / "q" / "collections").mkdir(parents=True)
        >>> _ = (root / "q" / "store.json").write_text("{}")
        >>> kept, skipped = without_stores([root / "a.md", root / "q" / "store.json"], root)
        >>> [p.name for p in kept], [pathlib.Path(s.source).name for s in skipped]
        (['a.md'], ['q'])
    """
    from qdrant_tools.store.folder import is_store_folder

    root, base = Path(root), Path(os.path.abspath(root))
    known: dict[Path, bool] = {}
    stores: dict[Path, SkippedFile] = {}
    kept: list[Path] = []

    def is_store(folder: Path) -> bool:
        if folder not in known:
            known[folder] = is_store_folder(folder)
        return known[folder]

    for file in files:
        try:
            parts = Path(os.path.abspath(file)).relative_to(base).parts[:-1]
        except ValueError:
            kept.append(file)
            continue
        store = next((d for d in (root.joinpath(*parts[:i]) for i in range(len(parts) + 1)) if is_store(d)), None)
        if store is None:
            kept.append(file)
        else:
            stores.setdefault(store, SkippedFile(str(store), STORE_FOLDER_REASON))
    return kept, list(stores.values())


def gather_files(
    root: str | Path,
    extensions: Iterable[str],
    discover: Callable[[str | Path, Iterable[str]], tuple[list[Path], int]],
    follow_links: bool = False,
) -> tuple[list[tuple[Path, str]], list[SkippedFile], int]:
    """The files to read under ``root`` with their document ids (:func:`place_files`), found by ``discover``.

    ``discover`` does not look into links to folders: a link to a folder inside ``root`` adds nothing (its
    files are read where they are); one to a folder outside is skipped unless ``follow_links``, when its files
    are found with ``discover`` (the links inside it are not followed further). The files of an embedded
    Qdrant store under ``root`` are left out (:func:`without_stores`).

    Returns:
        ``(placed, skipped, n_other)``: ``(path, doc_id)`` per file to read, the files and folders left out,
        and how many files had other suffixes.

    Raises:
        FileNotFoundError: if ``root`` does not exist.
    """
    extensions = tuple(extensions)
    files, n_other = discover(root, extensions)
    skipped: list[SkippedFile] = []
    if os.path.isdir(root):
        files, skipped = without_stores(files, root)
        root_real = os.path.realpath(root)
        for link in linked_folders(root):
            real = os.path.realpath(link)
            if _inside(real, root_real) or _inside(root_real, real):  # read where it is, or a loop back
                continue
            if not follow_links:
                reason = f"a link to the folder {real}, outside the ingested folder; pass --follow-links to read it"
                skipped.append(SkippedFile(str(link), reason))
                continue
            more, n = discover(link, extensions)
            files, n_other = [*files, *more], n_other + n
    placed, left_out = place_files(files, root, follow_links)
    for s in (*skipped, *left_out):
        logger.warning("skipping %s: %s", s.source, s.reason)
    return placed, [*skipped, *left_out], n_other


def load_document(
    path: str | Path, root: str | Path | None = None, doc_id: str | None = None
) -> SourceDocument | SkippedFile:
    """Read one file as UTF-8 text, or say why it cannot be ingested.

    Binary files (a NUL byte in the first 8 KiB), non-UTF-8 files and files
    that are empty or whitespace only become a :class:`SkippedFile`. A UTF-8
    byte-order mark is dropped.
    """
    path = Path(path)
    root = Path(root) if root is not None else path
    try:
        data = path.read_bytes()
    except OSError as exc:
        return SkippedFile(str(path), f"unreadable: {exc.strerror or exc}")
    if b"\x00" in data[:_BINARY_PROBE]:
        return SkippedFile(str(path), "binary file (NUL byte found)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return SkippedFile(
            str(path), f"not UTF-8 (invalid byte 0x{data[exc.start]:02x} at offset {exc.start}); convert it to UTF-8"
        )
    if not text.strip():
        return SkippedFile(str(path), "empty file" if not text else "whitespace only")
    doc_id = document_id(path, root) if doc_id is None else doc_id
    return SourceDocument(doc_id=doc_id, text=text, source=str(path), content_hash=content_hash(text))


def load_folder(
    path: str | Path, extensions: Iterable[str] = DEFAULT_EXTENSIONS, follow_links: bool = False
) -> tuple[list[SourceDocument], list[SkippedFile], int]:
    """Read every candidate file under ``path`` (or the one file ``path``); ids and links as :func:`gather_files`.

    Returns:
        ``(documents, skipped, n_other)``: decoded documents, the files that
        were skipped (each logged with its reason), and how many files had
        other extensions.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    placed, skipped, n_other = gather_files(path, extensions, discover_files, follow_links)
    docs: list[SourceDocument] = []
    for f, doc_id in placed:
        r = load_document(f, path, doc_id=doc_id)
        if isinstance(r, SkippedFile):
            logger.warning("skipping %s: %s", r.source, r.reason)
            skipped.append(r)
        else:
            docs.append(r)
    return docs, skipped, n_other
