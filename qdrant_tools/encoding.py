"""From documents to encoded points: the encoder side shared by every ingestion path.

* :class:`Encoder`: what ingestion needs from an encoder;
* :func:`build_point_encoding` -> :class:`PointEncoding`: what the driver needs to know
  about the encoders (sizes, fingerprints, window, chunking), picklable, so a
  Ray driver can learn it without loading the model itself;
* :func:`plan_chunk`: one chunk as a point (id and payload); both writers plan every point with it
  (``posfair ingest`` through :func:`prepare_document`, the vector store through its node planner),
  so ids, payloads, truncation and sub-chunk spans agree;
* :class:`ChunkEncoder`: the loaded encoders of one process (the local driver
  or a Ray actor) turning documents into :class:`qdrant_tools.writer.PointBatch`.

Embedding is local compute and is never retried.

Example:
    >>> encoding = build_point_encoding({"calibrated": encoder}, NodeLayout())                       # doctest: +SKIP
    >>> ChunkEncoder({"calibrated": encoder}, encoding).encode(chunks)                               # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from qdrant_tools import ids
from qdrant_tools import payload as P
from qdrant_tools.chunking import (
    Chunk,
    ChunkBounds,
    ChunkingConfig,
    SourceDocument,
    SpanFn,
    chunk_bounds,
    tokenizer_spans,
    whitespace_spans,
)
from qdrant_tools.metadata import FUSED_WEIGHT_KEY, RECIPE_KEY
from qdrant_tools.sparse import SPARSE_VECTOR, Bm25Sparse
from qdrant_tools.spec import HnswSpec, QuantizationSpec, SparseVectorConfig, VectorConfig
from qdrant_tools.subchunks import FUSED_VECTOR, SUBCHUNK_VECTOR, SubchunkConfig, subchunk_text
from qdrant_tools.writer import PointBatch

if TYPE_CHECKING:  # qdrant_tools.layout imports this module: the layout object is passed in at run time
    from qdrant_tools.layout import NodeLayout

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_TOKENS = 256
DEFAULT_OVERLAP_TOKENS = 32
#: The int8 copy of a vector (``"int8"`` of a layout's ``node_quantization``, ``subchunk_quantization``,
#: ``fused_quantization``): scalar, outliers clipped.
INT8_COPY = QuantizationSpec(kind="int8", quantile=0.99)


#: The binary copy of a vector (``fused_quantization="binary"``): one bit per dimension, kept in RAM.
BINARY_COPY = QuantizationSpec(kind="binary")
#: A layout's quantization (``None``, ``"int8"``, ``"binary"``) -> the quantized copy it keeps.
QUANTIZED_COPIES: dict[str | None, QuantizationSpec | None] = {None: None, "int8": INT8_COPY, "binary": BINARY_COPY}


def fused_vector_config(size: int, quantization: str | None = None) -> VectorConfig:
    """The fused multivector (:func:`fused_rows`): unit rows scored by dot product, no graph (it re-scores);
    ``quantization`` (``"int8"`` or ``"binary"``): a quantized copy in RAM, the float rows memory-mapped."""
    copy = QUANTIZED_COPIES[quantization]
    on_disk = True if copy is not None else None
    return VectorConfig(
        name=FUSED_VECTOR,
        size=size,
        distance="dot",
        multivector=True,
        hnsw=HnswSpec(m=0),
        quantization=copy,
        on_disk=on_disk,
    )


@runtime_checkable
class Encoder(Protocol):
    """What ingestion needs from an encoder (``PosFairEncoder`` satisfies it).

    An optional ``tokenizer`` attribute (a fast Hugging Face tokenizer) makes
    chunks follow the encoder's own tokens; without it chunks follow words.
    """

    @property
    def dimension(self) -> int: ...

    @property
    def max_length(self) -> int: ...

    def encode_documents(self, texts: list[str]) -> np.ndarray: ...

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...

    def fingerprint(self) -> str: ...

    def count_tokens(self, texts: list[str]) -> list[int]: ...


def describe_encoder(encoder: Any) -> str:
    """Short description of an encoder for error messages."""
    name = getattr(encoder, "model_id", None) or type(encoder).__name__
    try:
        return f"{name} (fingerprint {encoder.fingerprint()})"
    except Exception:  # pragma: no cover - description only
        return str(name)


def chunking_key(chunking: ChunkingConfig, spans_name: str) -> str:
    """The string that identifies how a document was chunked (part of its version, stored with every point).

    :func:`build_point_encoding` appends the sub-chunk settings: another budget or overlap re-embeds every document.
    """
    return f"{chunking.key()};spans={spans_name}"


def spans_for(encoder: Any) -> tuple[SpanFn, str]:
    """Chunk on the encoder's own (fast) tokenizer if it has one, else on whitespace."""
    tok = getattr(encoder, "tokenizer", None)
    if tok is not None and getattr(tok, "is_fast", False):
        return tokenizer_spans(tok), "tokenizer"
    return whitespace_spans, "whitespace"


def document_token_counter(encoder: Any) -> Callable[[list[str]], list[int]]:
    """Tokens the encoder sees per document text: its ``document_prompt`` (if any) prepended, special tokens included.

    The encoder embeds ``document_prompt + text`` (as sentence-transformers does), so the prompt's tokens
    take room in the window: chunk sizes and each chunk's ``n_tokens`` / ``truncated`` count them.

    Example:
        >>> class Enc:
        ...     document_prompt = "passage: "
        ...     def count_tokens(self, texts): return [len(t.split()) + 2 for t in texts]
        >>> document_token_counter(Enc())(["one two three"])
        [6]
    """
    prompt = getattr(encoder, "document_prompt", None) or ""
    if not prompt:
        return lambda texts: list(encoder.count_tokens(list(texts)))
    return lambda texts: list(encoder.count_tokens([prompt + t for t in texts]))


def resolve_chunking(
    encoder: Encoder, chunk_tokens: int | None = None, overlap_tokens: int | None = None
) -> ChunkingConfig:
    """Chunking that fits the encoder's window unless sizes are given explicitly.

    The window is ``max_length`` less the special tokens and the tokens of the encoder's
    ``document_prompt`` (:func:`document_token_counter`). An explicit ``chunk_tokens`` above
    the window is allowed (the chunks are truncated when embedded, and the report says how
    many) but logged.

    Raises:
        ValueError: the encoder's window holds no text after its special and prompt tokens.
    """
    n_special = int(document_token_counter(encoder)([""])[0])
    window = int(encoder.max_length) - n_special
    if window <= 0:
        raise ValueError(
            f"encoder max_length={encoder.max_length} leaves no room for text after {n_special} special "
            "and document-prompt tokens; raise --max-length or shorten --document-prompt"
        )
    if chunk_tokens is None:
        chunk_tokens = min(DEFAULT_CHUNK_TOKENS, window)
    elif chunk_tokens > window:
        logger.warning(
            "chunk_tokens=%d exceeds the model window of %d text tokens (max_length %d, less special "
            "and document-prompt tokens); "
            "chunks will be truncated when embedded",
            chunk_tokens,
            window,
            encoder.max_length,
        )
    if overlap_tokens is None:
        overlap_tokens = min(DEFAULT_OVERLAP_TOKENS, chunk_tokens // 8)
    return ChunkingConfig(chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)


@dataclass(frozen=True)
class PointEncoding:
    """What each point of a run is encoded into, and by which encoders: the run's layout, the vectors per node,
    their sizes and fingerprints, the resolved chunking and its key, the sparse vector (what the driver knows;
    picklable; no model).

    Args:
        layout: the collection's :class:`~qdrant_tools.layout.NodeLayout` (node size, sub-chunks, derived node
            vectors, fused rows, int8 copies, memory-mapping); the one home of those settings.
        dimensions: vector name -> output size.
        fingerprints: vector name -> encoder fingerprint.
        descriptions: vector name -> description for error messages.
        max_length: the smallest encoder window (tokens, special tokens included).
        chunking: the node sizes, ``layout``'s resolved against the first encoder's window
            (:func:`resolve_chunking`).
        chunking_key: :func:`chunking_key` of ``chunking`` and ``spans_name``, with the sub-chunk, BM25 and
            fused parts (:func:`build_point_encoding`).
        spans_name: ``"tokenizer"`` or ``"whitespace"`` (see :func:`spans_for`).
        subchunk_source: the vector whose encoder embeds the sub-chunks: ``"calibrated"`` if the run
            writes it, else the first vector (``None`` without sub-chunks).
        sparse: the BM25 model of the sparse vector :data:`~qdrant_tools.sparse.SPARSE_VECTOR` of each
            node's text (hybrid search); ``None`` = no sparse vector.
    """

    layout: NodeLayout
    dimensions: dict[str, int]
    fingerprints: dict[str, str]
    descriptions: dict[str, str]
    max_length: int
    chunking: ChunkingConfig
    chunking_key: str
    spans_name: str
    subchunk_source: str | None = None
    sparse: Bm25Sparse | None = None

    @property
    def label(self) -> str:
        """Human-readable chunking, for reports."""
        c = self.chunking
        layout = self.layout
        label = f"{c.chunk_tokens}-token chunks, {c.overlap_tokens} overlap, {self.spans_name} tokens"
        if layout.subchunks is not None:
            s = layout.subchunks
            label += f"; sub-chunks of <= {s.max_tokens} tokens, {s.overlap_sentences}-sentence overlap"
            if layout.node_source == "subchunk-mean":
                label += "; node vectors = mean of the sub-chunk vectors"
            if layout.fused_weight is not None:
                label += f"; fused multivector (node weight {layout.fused_weight:g})"
        if self.sparse is not None:
            label += "; BM25 sparse vectors"
        return label

    def sparse_configs(self) -> list[SparseVectorConfig]:
        """The collection's sparse vectors: BM25 with the IDF modifier (Qdrant weights query terms by IDF)."""
        return [] if self.sparse is None else [SparseVectorConfig(name=SPARSE_VECTOR, modifier="idf")]

    def sparse_vectors(self, texts: Sequence[str]) -> dict[str, list[Any]]:
        """``{SPARSE_VECTOR: one BM25 document vector per text}`` (``{}`` without sparse vectors)."""
        return {} if self.sparse is None or not texts else {SPARSE_VECTOR: self.sparse.embed_documents(texts)}

    def version(self, content_hash: str) -> str:
        """The version of a document with ``content_hash`` written with this encoding (part of its point ids)."""
        return ids.document_version(content_hash, self.chunking_key, self.fingerprints)

    @property
    def source_vector(self) -> str:
        """The vector whose encoder embeds the sub-chunks (``subchunk_source``, else the first vector)."""
        return self.subchunk_source or next(iter(self.dimensions))

    def vector_configs(self) -> list[VectorConfig]:
        """The collection's named vectors: one dense vector per encoder, plus the sub-chunk multivector
        (no HNSW graph unless the layout's ``subchunk_graph_m`` > 0: it re-scores candidates found through other
        indexes; memory-mapped when the fused multivector is there, which default queries score instead).

        Example:
            >>> from qdrant_tools.layout import NodeLayout
            >>> layout = NodeLayout(subchunk_graph_m=16)
            >>> encoding = PointEncoding(layout, {"vanilla": 8}, {}, {}, 64, ChunkingConfig(32, 4), "k", "whitespace")
            >>> [(v.name, v.hnsw.m if v.hnsw else None) for v in encoding.vector_configs()]
            [('vanilla', None), ('subchunks', 16), ('subchunks_fused', 0)]
        """
        layout = self.layout
        node_quant = QUANTIZED_COPIES[layout.node_quantization]
        node_disk = True if layout.node_on_disk else None
        out = [
            VectorConfig(name=n, size=d, quantization=node_quant, on_disk=node_disk) for n, d in self.dimensions.items()
        ]
        if layout.subchunks is not None:
            quant = QUANTIZED_COPIES[layout.subchunk_quantization]
            size = self.dimensions[self.source_vector]
            # with the fused rows in RAM, the plain sub-chunks serve other weights and the evidence: memory-mapped
            on_disk = True if layout.fused_weight is not None else None
            out.append(
                VectorConfig(
                    name=SUBCHUNK_VECTOR,
                    size=size,
                    multivector=True,
                    hnsw=HnswSpec(m=layout.subchunk_graph_m),
                    quantization=quant,
                    on_disk=on_disk,
                )
            )
            if layout.fused_weight is not None:
                out.append(fused_vector_config(size, layout.fused_quantization))
        return out

    def metadata(self, run: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The collection metadata a run writes: ``run`` (the run's own, e.g. the recipe), and the fused
        multivector's weight under :data:`~qdrant_tools.metadata.FUSED_WEIGHT_KEY` only where ``run`` records no
        recipe (a recipe records the weight in its layout: each fact once)."""
        weight, out = self.layout.fused_weight, dict(run or {})
        if weight is not None and RECIPE_KEY not in out:
            out[FUSED_WEIGHT_KEY] = weight
        return out


def build_point_encoding(
    vectors: Mapping[str, Encoder], layout: NodeLayout, sparse: Bm25Sparse | None = None
) -> PointEncoding:
    """The :class:`PointEncoding` that writes ``layout`` with ``vectors``' encoders (and a BM25 vector with
    ``sparse``): sizes, fingerprints and the chunking read off the loaded encoders (chunking follows the first).

    :meth:`qdrant_tools.layout.NodeLayout.point_encoding` calls it; ``layout`` has checked its own fields.

    Raises:
        ValueError: ``vectors`` is empty or uses a reserved vector name, or the first encoder's window
            holds no text.
    """
    if not vectors:
        raise ValueError("vectors must map at least one vector name to an encoder, e.g. {'calibrated': encoder}")
    for reserved in (SUBCHUNK_VECTOR, FUSED_VECTOR):
        if reserved in vectors:
            raise ValueError(f"the vector name {reserved!r} is reserved for sub-chunk vectors; rename the vector")
    first = next(iter(vectors.values()))
    chunking = resolve_chunking(first, layout.chunk_tokens, layout.overlap_tokens)
    _, spans_name = spans_for(first)
    source = None
    key = chunking_key(chunking, spans_name)
    if layout.subchunks is not None:
        source = "calibrated" if "calibrated" in vectors else next(iter(vectors))
        derived = ";node=subchunk-mean" if layout.node_source == "subchunk-mean" else ""
        key += f";{layout.subchunks.key()};src={source}{derived}"
    if sparse is not None:
        key += f";bm25={sparse.fingerprint()}"
    if layout.fused_weight is not None:
        key = fused_chunking_key(key, layout.fused_weight)
    return PointEncoding(
        layout=layout,
        dimensions={n: int(e.dimension) for n, e in vectors.items()},
        fingerprints={n: e.fingerprint() for n, e in vectors.items()},
        descriptions={n: describe_encoder(e) for n, e in vectors.items()},
        max_length=min(int(e.max_length) for e in vectors.values()),
        chunking=chunking,
        chunking_key=key,
        spans_name=spans_name,
        subchunk_source=source,
        sparse=sparse,
    )


def fused_chunking_key(key: str, weight: float) -> str:
    """The chunking key of a layout written without the fused multivector, with it at node weight ``weight``.

    The one place the fused part of a key is written (:func:`build_point_encoding`, and
    :func:`qdrant_tools.fuse.fuse_collection`, which re-keys stored points): it precedes a BM25 part.

    Example:
        >>> fused_chunking_key("c;sub=32;src=v;bm25=ab", 0.5)
        'c;sub=32;src=v;fused=0.5;bm25=ab'
        >>> fused_chunking_key("c;sub=32;src=v", 0.25)
        'c;sub=32;src=v;fused=0.25'
    """
    head, sep, bm25 = key.partition(";bm25=")
    return f"{head};fused={weight:g}{sep}{bm25}"


def subchunk_source_of(key: str) -> str | None:
    """The vector whose encoder embedded the sub-chunks, read off a chunking key (``None``: no sub-chunks).

    Example:
        >>> subchunk_source_of("c;sub=32;src=calibrated;bm25=ab")
        'calibrated'
    """
    for part in key.split(";"):
        if part.startswith("src="):
            return part[len("src=") :]
    return None


def subchunk_mean(vectors: np.ndarray) -> np.ndarray:
    """A node vector derived from its ``(k, dim)`` sub-chunk vectors: their mean, scaled to unit length.

    What ``node_source="subchunk-mean"`` stores instead of encoding the node text (and what the reranker and
    ``bench/scale.py`` compute for such a layout). A zero mean stays zero.

    Example:
        >>> subchunk_mean(np.array([[1.0, 0.0], [0.0, 1.0]])).astype(float).round(4).tolist()
        [0.7071, 0.7071]
    """
    mean = np.asarray(vectors, dtype=np.float32).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else mean


def whole_text_node_vectors(node: np.ndarray, subs: Sequence[np.ndarray], truncated: Sequence[bool]) -> np.ndarray:
    """``node`` with the row of every truncated node replaced by :func:`subchunk_mean` of its sub-chunk vectors.

    A node longer than the encoder's window (``truncated``) is encoded from its first tokens only,
    while its sub-chunks cover all of it; the mean of their vectors is a node vector of the whole
    text, so that evidence late in a long node is not scored against a vector that never saw it.
    Nodes within the window keep their vectors.

    Example:
        >>> rows = whole_text_node_vectors(np.array([[1.0, 0.0], [1.0, 0.0]]), [np.eye(2), np.eye(2)], [False, True])
        >>> rows.astype(float).round(4).tolist()
        [[1.0, 0.0], [0.7071, 0.7071]]
    """
    if not any(truncated):
        return node
    out = np.array(node, dtype=np.float32)
    for i, long in enumerate(truncated):
        if long:
            out[i] = subchunk_mean(subs[i])
    return out


def fused_rows(node: np.ndarray, subs: np.ndarray, weight: float) -> np.ndarray:
    """The rows ``(1 - w) * s_j + w * node`` of :data:`~qdrant_tools.subchunks.FUSED_VECTOR` (each input scaled to
    unit length first): under the dot product, a unit query's MaxSim over them is
    ``(1 - w) * max_j cos(q, s_j) + w * cos(q, node)``.

    Example:
        >>> fused_rows(np.array([0.0, 2.0]), np.array([[1.0, 0.0]]), 0.25).tolist()
        [[0.75, 0.25]]
    """
    n = np.asarray(node, dtype=np.float32)
    s = np.asarray(subs, dtype=np.float32)
    n = n / max(float(np.linalg.norm(n)), 1e-12)
    s = s / np.maximum(np.linalg.norm(s, axis=1, keepdims=True), 1e-12)
    return ((1.0 - weight) * s + weight * n[None, :]).astype(np.float32)


@dataclass(frozen=True)
class PlannedChunk:
    """A chunk ready to embed: its point id, text and payload."""

    doc_id: str
    point_id: str
    text: str
    payload: dict[str, Any]


def plan_chunk(
    doc: SourceDocument,
    chunk: Chunk,
    *,
    n_tokens: int,
    n_chunks: int,
    version: str,
    encoding: PointEncoding,
    spans_fn: SpanFn,
    node_record: Mapping[str, Any] | None = None,
    point_id: str | None = None,
) -> PlannedChunk:
    """One chunk as a point to encode, its id and payload (:func:`qdrant_tools.payload.build_payload`). ``posfair
    ingest`` plans a document's chunks here (:func:`prepare_document`), the vector store its nodes
    (``llamaindex_posfair.integrations.nodes.planned_nodes``), so their points cannot drift apart.

    Args:
        doc, chunk: the chunk (text and document offsets) and its document.
        n_tokens: tokens the encoder sees of the chunk (:func:`document_token_counter`); more than the
            encoders' window (``encoding.max_length``) marks it truncated.
        n_chunks, version: how many chunks the document version has, and the version (:meth:`PointEncoding.version`).
        encoding, spans_fn: the run's point encoding, and the token spans its sub-chunks follow (:func:`spans_for`).
        node_record: LlamaIndex's record of a node the vector store writes; ``None`` for a chunk of a document.
        point_id: the point id; ``None`` = :func:`qdrant_tools.ids.point_id` of the document, version and index.

    Raises:
        ValueError: document metadata a payload cannot hold (:func:`qdrant_tools.payload.json_metadata`).
    """
    subchunks = encoding.layout.subchunks
    fields = P.posfair_record(
        doc,
        chunk,
        n_chunks=n_chunks,
        version=version,
        fingerprints=encoding.fingerprints,
        n_tokens=n_tokens,
        truncated=n_tokens > encoding.max_length,
        chunking_key=encoding.chunking_key,
        subchunk_spans=None if subchunks is None else subchunk_spans(chunk, subchunks, spans_fn),
    )
    pid = point_id if point_id is not None else ids.point_id(doc.doc_id, version, chunk.index)
    return PlannedChunk(doc.doc_id, pid, chunk.text, P.build_payload(doc, fields, node_record))


def prepare_document(
    doc: SourceDocument,
    encoding: PointEncoding,
    spans_fn: SpanFn,
    count_tokens: Callable[[list[str]], list[int]],
    *,
    skip: Collection[int] = (),
    bounds: ChunkBounds | None = None,
    indices: Iterable[int] | None = None,
) -> list[PlannedChunk]:
    """Chunk one document into planned points (:func:`plan_chunk`; pure given its inputs), leaving out chunk
    indices in ``skip``.

    ``count_tokens`` counts what the encoder embeds (:func:`document_token_counter`: document prompt and
    special tokens included), so ``n_tokens`` and ``truncated`` tell the truth.

    A large document is planned a window at a time: ``bounds`` (:func:`qdrant_tools.chunking.chunk_bounds`
    of the document, read once) with ``indices``, the chunk indices of one window; the points are those
    the whole document's plan has at these indices.
    """
    version = encoding.version(doc.content_hash)
    if bounds is None:
        bounds = chunk_bounds(doc.text, encoding.chunking, spans_fn)
    n_chunks = len(bounds)
    chunks = [bounds.chunk(doc.text, i) for i in (range(n_chunks) if indices is None else indices) if i not in skip]
    n_tokens = list(count_tokens([c.text for c in chunks])) if chunks else []
    return [
        plan_chunk(doc, c, n_tokens=int(n), n_chunks=n_chunks, version=version, encoding=encoding, spans_fn=spans_fn)
        for c, n in zip(chunks, n_tokens)
    ]


def subchunk_spans(chunk: Any, config: SubchunkConfig, spans_fn: SpanFn) -> list[list[int]]:
    """Document offsets of a chunk's sub-chunks (at least one: the whole chunk if it has no sentence)."""
    subs = subchunk_text(chunk.text, config, spans_fn)
    if not subs:
        return [[chunk.start_char, chunk.end_char]]
    return [[chunk.start_char + s.start_char, chunk.start_char + s.end_char] for s in subs]


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


class ChunkEncoder:
    """The loaded encoders of one process: documents -> chunks -> :class:`PointBatch`.

    Args:
        vectors: vector name -> loaded encoder (chunking and token counts use the first).
        encoding: the run's :class:`PointEncoding`; the encoders must match it.

    Raises:
        RuntimeError: the encoders' fingerprints or tokenization differ from the point encoding
            (a worker that loaded other model files or settings).

    Example:
        >>> enc = ChunkEncoder(vectors, build_point_encoding(vectors))  # doctest: +SKIP
        >>> batch = enc.encode(enc.chunks(doc))                   # doctest: +SKIP
    """

    def __init__(self, vectors: Mapping[str, Encoder], encoding: PointEncoding) -> None:
        self.vectors = dict(vectors)
        self.encoding = encoding
        self.first = next(iter(self.vectors.values()))
        self.spans_fn, spans_name = spans_for(self.first)
        fps = {n: e.fingerprint() for n, e in self.vectors.items()}
        if fps != encoding.fingerprints or spans_name != encoding.spans_name:
            raise RuntimeError(
                f"encoders differ from the point encoding (fingerprints {fps} vs {encoding.fingerprints}, chunking on "
                f"{spans_name} vs {encoding.spans_name}); every worker must load the same model files and settings"
            )

    def chunks(
        self,
        doc: SourceDocument,
        skip: Collection[int] = (),
        bounds: ChunkBounds | None = None,
        indices: Iterable[int] | None = None,
    ) -> list[PlannedChunk]:
        """The chunks of ``doc`` still to encode (indices in ``skip`` are already stored); with ``bounds``
        (:meth:`bounds`) and ``indices``, only those of one window (:func:`prepare_document`)."""
        count = document_token_counter(self.first)
        return prepare_document(doc, self.encoding, self.spans_fn, count, skip=skip, bounds=bounds, indices=indices)

    def bounds(self, doc: SourceDocument) -> ChunkBounds:
        """Where each chunk of ``doc`` lies (one pass over its text, no chunk text kept): how many chunks it has,
        before a window of them is planned with :meth:`chunks`."""
        return chunk_bounds(doc.text, self.encoding.chunking, self.spans_fn)

    def encode(
        self,
        chunks: Sequence[PlannedChunk],
        token_budget: int | None = None,
        given: Mapping[str, np.ndarray] | None = None,
    ) -> PointBatch:
        """Embed ``chunks`` with every encoder; one forward batch, or batches of ``token_budget`` padded tokens.

        ``given``: vector name -> ``(len(chunks), dimension)`` node vectors already computed by the same
        encoder (e.g. by a LlamaIndex embed model); those are not encoded again.

        Raises:
            RuntimeError: an encoder returned another shape than ``(rows, dimension)``.
            ValueError: a ``given`` vector of another name or shape.
        """
        given = self._checked_given(given or {}, len(chunks))
        texts = [c.text for c in chunks]
        if token_budget is None:
            groups = [list(range(len(chunks)))] if chunks else []
        else:
            lengths = [min(int(P.posfair_fields(c.payload)[P.N_TOKENS]), self.encoding.max_length) for c in chunks]
            groups = token_budget_batches(lengths, token_budget)
        layout = self.encoding.layout
        subs = self._subchunk_vectors(chunks) if layout.subchunks is not None and chunks else None
        derived = self.encoding.source_vector if layout.node_source == "subchunk-mean" and subs is not None else None
        vectors = {}
        for name, enc in self.vectors.items():
            if name in given:
                vectors[name] = given[name]
            elif name == derived:
                vectors[name] = np.stack([subchunk_mean(v) for v in subs])
            else:
                vectors[name] = self._encoded(name, enc, texts, groups)
        if subs is not None:
            source = self.encoding.source_vector
            vectors[source] = whole_text_node_vectors(
                vectors[source], subs, [P.posfair_fields(c.payload)[P.TRUNCATED] for c in chunks]
            )
            vectors[SUBCHUNK_VECTOR] = subs
            if layout.fused_weight is not None:
                node = vectors[source]
                vectors[FUSED_VECTOR] = [fused_rows(n, v, layout.fused_weight) for n, v in zip(node, subs)]
        return PointBatch(
            ids=[c.point_id for c in chunks],
            payloads=[c.payload for c in chunks],
            vectors=vectors,
            sparse=self.encoding.sparse_vectors(texts),
        )

    def _checked_given(self, given: Mapping[str, Any], n: int) -> dict[str, np.ndarray]:
        out = {}
        for name, value in given.items():
            if name not in self.encoding.dimensions:
                raise ValueError(
                    f"given vectors {name!r} are not a vector of the point encoding ({sorted(self.encoding.dimensions)})"
                )
            arr = np.asarray(value, dtype=np.float32)
            if arr.shape != (n, self.encoding.dimensions[name]):
                raise ValueError(
                    f"given vectors {name!r} have shape {arr.shape}, expected {(n, self.encoding.dimensions[name])}: "
                    "one vector per chunk, from the collection's encoder"
                )
            out[name] = arr
        return out

    def _encoded(self, name: str, enc: Encoder, texts: list[str], groups: list[list[int]]) -> np.ndarray:
        """``texts`` encoded by the encoder of vector ``name``, one forward call per group of indices."""
        dim = self.encoding.dimensions[name]
        arr = np.zeros((len(texts), dim), dtype=np.float32)
        for idx in groups:
            part = np.asarray(enc.encode_documents([texts[j] for j in idx]), dtype=np.float32)
            if part.shape != (len(idx), dim):
                raise RuntimeError(
                    f"encoder for vector {name!r} returned shape {part.shape}, expected {(len(idx), dim)}"
                )
            arr[idx] = part
        return arr

    def _subchunk_vectors(self, chunks: Sequence[PlannedChunk]) -> list[np.ndarray]:
        """Per chunk, the ``(k, dim)`` vectors of its sub-chunks, embedded together by the source encoder."""
        texts, owners = [], []
        for i, c in enumerate(chunks):
            fields = P.posfair_fields(c.payload)
            base = int(fields[P.START_CHAR])
            for start, end in fields[P.SUBCHUNK_SPANS]:
                texts.append(c.text[start - base : end - base])
                owners.append(i)
        source = self.encoding.source_vector
        arr = np.asarray(self.vectors[source].encode_documents(texts), dtype=np.float32)
        dim = self.encoding.dimensions[source]
        if arr.shape != (len(texts), dim):
            raise RuntimeError(f"sub-chunk encoder returned shape {arr.shape}, expected {(len(texts), dim)}")
        cuts = np.cumsum(np.bincount(np.asarray(owners), minlength=len(chunks)))[:-1]
        return np.split(arr, cuts)
