"""How a collection's nodes are written: node size, sub-chunks, fused rows and quantization.

:class:`NodeLayout` is the one description of a collection's layout, and ``NodeLayout()`` is the layout
``posfair ingest`` writes. The recipe a collection records (:mod:`llamaindex_posfair.integrations.recipe`)
stores it, every ingestion path takes it (:class:`qdrant_tools.driver.IngestSettings` ``layout``), and the
benchmarks vary it. The BM25 sparse vector and the collection metadata are settings of the run beside it
(:class:`~qdrant_tools.driver.IngestSettings` ``sparse`` and ``metadata``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from qdrant_tools.encoding import Encoder, PointEncoding, build_point_encoding
from qdrant_tools.search import SearchSettings
from qdrant_tools.sparse import Bm25Sparse
from qdrant_tools.subchunks import NodeSource, SubchunkConfig, check_node_source

__all__ = ["EARLIER_NAMES", "NodeLayout", "layout_fields"]

_NEEDS_SUBCHUNKS = "pass subchunks=SubchunkConfig(...)"


class _Follows:
    """The default of a field that follows the layout's other fields (resolved when the layout is built)."""

    def __repr__(self) -> str:
        return "FOLLOWS"


_FOLLOWS: Any = _Follows()


@dataclass(frozen=True, kw_only=True)
class NodeLayout:
    """How documents are cut into nodes and which vectors each node stores.

    ``NodeLayout()`` is the layout ``posfair ingest`` writes: 32-token sub-chunks, node vectors encoded from
    the node text, the fused multivector at the default search's node weight kept as an int8 copy in RAM
    (floats memory-mapped), and the node vectors' int8 copy in RAM (floats memory-mapped): the compact layout
    of research/results/compact_sweep/sweep.md. Three defaults follow the fields given: ``fused_weight`` is
    ``None`` without sub-chunks, ``fused_quantization`` is ``None`` without fused rows, and ``node_on_disk``
    is whether the node vectors have their int8 copy (``node_quantization``).

    Each choice has one spelling, the one of ``posfair ingest``'s flags and of the recorded layout: a quantized copy
    is ``"int8"`` or ``"binary"`` (``None``: none), and the node vector's source is ``"encoded"`` or
    ``"subchunk-mean"``.

    Args:
        chunk_tokens: tokens per node (special tokens not counted); ``None`` =
            ``min(256, encoder window - special tokens)``.
        overlap_tokens: tokens shared by neighbouring nodes; ``None`` = ``min(32, chunk_tokens // 8)``.
        subchunks: store each node with a multivector of its sentence-aligned sub-chunks, so a node is
            found by its best sub-chunk (:mod:`qdrant_tools.subchunks`); ``None`` = the single-vector layout.
        subchunk_quantization: ``"int8"``: the sub-chunk vectors are kept as an int8 scalar-quantized copy
            (4x smaller); ``None``: floats only.
        subchunk_graph_m: HNSW ``m`` of the sub-chunk multivector; 0 = no graph (it only re-scores). With a
            graph, searches of collections above ``SearchSettings.exact_up_to`` also draw candidates from it,
            at an index build that costs far more (docs/storage.md, "Any size").
        node_source: where the node vector of the sub-chunk encoder comes from: ``"encoded"``, an encoding of
            the node text; ``"subchunk-mean"``, the normalised mean of the node's sub-chunk vectors (each text is
            encoded once; :data:`qdrant_tools.subchunks.NodeSource`).
        fused_weight: also store each node's sub-chunks fused with its node vector at this node weight
            (:data:`qdrant_tools.subchunks.FUSED_VECTOR`), so a search at that weight scores in one arm;
            ``None`` = none.
        node_quantization: ``"int8"``: an int8 scalar-quantized copy of the node vectors (in RAM) for their HNSW
            search: faster candidates in large collections; the float originals stay and score the results.
            ``None``: floats only.
        node_on_disk: the float node vectors are memory-mapped instead of held in RAM (needs
            ``node_quantization="int8"``: the HNSW search reads the int8 copy, and a ranking by the node vector
            re-scores from the originals).
        fused_quantization: the fused multivector is kept as a quantized copy in RAM (``"int8"``: scalar,
            ``"binary"``: one bit per dimension), which searches scan, while its float originals are
            memory-mapped and re-score the best hits (:func:`qdrant_tools.search.ranking_params`); ``None`` =
            float rows in RAM. Needs ``fused_weight``.

    Raises:
        ValueError: a value out of range, or a sub-chunk setting without ``subchunks`` (the message names
            the field and the fix).

    Example:
        >>> from qdrant_tools.layout import NodeLayout
        >>> layout = NodeLayout()
        >>> layout.subchunks.max_tokens, layout.fused_weight, layout.fused_quantization, layout.node_on_disk
        (32, 0.5, 'int8', True)
        >>> single = NodeLayout(subchunks=None, node_quantization=None)
        >>> single.fused_weight, single.fused_quantization, single.node_on_disk
        (None, None, False)
        >>> NodeLayout(subchunks=None, node_source="subchunk-mean")
        Traceback (most recent call last):
        ...
        ValueError: node vectors derived from sub-chunks (node_source="subchunk-mean") need sub-chunks; pass subchunks=SubchunkConfig(...) or pass node_source="encoded"

    Use :class:`qdrant_tools.chunking.ChunkingConfig` for the node size of one text alone, and
    :class:`qdrant_tools.driver.IngestSettings` for a whole ingestion run (a layout plus run settings).
    """

    chunk_tokens: int | None = None
    overlap_tokens: int | None = None
    subchunks: SubchunkConfig | None = field(default_factory=SubchunkConfig)
    subchunk_quantization: Literal["int8"] | None = None
    subchunk_graph_m: int = 0
    node_source: NodeSource = "encoded"
    fused_weight: float | None = _FOLLOWS
    node_quantization: Literal["int8"] | None = "int8"
    node_on_disk: bool = _FOLLOWS
    fused_quantization: Literal["int8", "binary"] | None = _FOLLOWS

    def __post_init__(self) -> None:
        self._resolve_followers()
        self._check_sizes()
        self._check_flags()
        self._check_subchunk_settings()

    def _resolve_followers(self) -> None:
        """Give the fields left at a following default their value (see the class docstring)."""
        if self.fused_weight is _FOLLOWS:
            object.__setattr__(self, "fused_weight", None if self.subchunks is None else SearchSettings().node_weight)
        if self.fused_quantization is _FOLLOWS:
            object.__setattr__(self, "fused_quantization", None if self.fused_weight is None else "int8")
        if self.node_on_disk is _FOLLOWS:
            object.__setattr__(self, "node_on_disk", self.node_quantization == "int8")

    def _check_sizes(self) -> None:
        if self.chunk_tokens is not None and (not _is_int(self.chunk_tokens) or self.chunk_tokens < 1):
            raise ValueError(
                f"chunk_tokens must be a positive integer or None, got {self.chunk_tokens!r}; "
                "e.g. 254 (None: min(256, the encoder window))"
            )
        if self.overlap_tokens is not None and (not _is_int(self.overlap_tokens) or self.overlap_tokens < 0):
            raise ValueError(
                f"overlap_tokens must be an integer >= 0 or None, got {self.overlap_tokens!r}; "
                "e.g. 32 (None: min(32, chunk_tokens // 8))"
            )
        if not _is_int(self.subchunk_graph_m) or self.subchunk_graph_m < 0:
            raise ValueError(
                f"subchunk_graph_m must be an integer >= 0, got {self.subchunk_graph_m!r}; 0 (no graph) or 16"
            )

    def _check_flags(self) -> None:
        if not isinstance(self.node_on_disk, bool):
            raise ValueError(f"node_on_disk must be True or False, got {self.node_on_disk!r}")
        check_node_source(self.node_source)
        if self.subchunks is not None and not isinstance(self.subchunks, SubchunkConfig):
            raise ValueError(
                f"subchunks must be a SubchunkConfig or None, got {self.subchunks!r}; e.g. SubchunkConfig(32, 0)"
            )
        for name in ("node_quantization", "subchunk_quantization"):
            if getattr(self, name) not in (None, "int8"):
                raise ValueError(f'{name} must be "int8" or None, got {getattr(self, name)!r}; e.g. "int8"')
        if self.fused_quantization not in (None, "int8", "binary"):
            raise ValueError(
                f'fused_quantization must be "int8", "binary" or None, got {self.fused_quantization!r}; e.g. "int8"'
            )
        if self.node_on_disk and self.node_quantization is None:
            raise ValueError(
                "memory-mapped node vectors (node_on_disk) need their int8 copy in RAM for the HNSW search; "
                'pass node_quantization="int8" or drop node_on_disk'
            )
        weight = self.fused_weight
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
            raise ValueError(f"fused_weight must be a number in (0, 1) or None, got {weight!r}; e.g. 0.5")
        if weight is not None and not 0.0 < weight < 1.0:
            raise ValueError(
                f"fused_weight must lie strictly between 0 and 1, got {weight!r}; "
                "e.g. 0.5 (the node weight), or None for no fused multivector"
            )

    def _check_subchunk_settings(self) -> None:
        if self.fused_quantization is not None and self.fused_weight is None:
            raise ValueError(
                "a quantized fused multivector (fused_quantization) needs the fused multivector; "
                "pass fused_weight (e.g. 0.5) or drop fused_quantization"
            )
        if self.subchunks is not None:
            return
        if self.subchunk_quantization is not None:
            raise ValueError(
                "quantized sub-chunk vectors (subchunk_quantization) need sub-chunks; "
                f"{_NEEDS_SUBCHUNKS} or drop subchunk_quantization"
            )
        if self.node_source != "encoded":
            raise ValueError(
                f'node vectors derived from sub-chunks (node_source="{self.node_source}") need sub-chunks; '
                f'{_NEEDS_SUBCHUNKS} or pass node_source="encoded"'
            )
        if self.fused_weight is not None:
            raise ValueError(
                "a fused multivector (fused_weight) fuses sub-chunks with the node vector, so it needs sub-chunks; "
                f"{_NEEDS_SUBCHUNKS} or drop fused_weight"
            )

    def replace(self, **changes: Any) -> NodeLayout:
        """This layout with ``changes`` (checked again).

        Raises:
            ValueError: the changed layout is invalid (see the class).
        """
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> NodeLayout:
        """The layout a recipe records (its ``"layout"``), fields recorded by their earlier names read as today's
        (:func:`layout_fields`).

        Raises:
            ValueError: a field is invalid (see the class).
        """
        return cls(**layout_fields(record))

    def point_encoding(self, vectors: Mapping[str, Encoder], sparse: Bm25Sparse | None = None) -> PointEncoding:
        """The :class:`~qdrant_tools.encoding.PointEncoding` that writes this layout with ``vectors``' encoders
        (and a BM25 vector with ``sparse``): their sizes, fingerprints and the chunking key, and this layout itself
        (``PointEncoding.layout``).

        Raises:
            ValueError: ``vectors`` is empty or uses a reserved name, or the first encoder's window holds no text.
        """
        return build_point_encoding(vectors, self, sparse=sparse)


#: The earlier name of a layout field -> its name now and what each earlier value means (recorded layouts keep
#: them: :func:`layout_fields`).
EARLIER_NAMES: dict[str, tuple[str, dict[bool, Any]]] = {
    "node_int8": ("node_quantization", {True: "int8", False: None}),
    "subchunk_int8": ("subchunk_quantization", {True: "int8", False: None}),
    "node_from_subchunks": ("node_source", {True: "subchunk-mean", False: "encoded"}),
}


def layout_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record``, a recorded layout's fields, with the fields recorded by an earlier name (:data:`EARLIER_NAMES`)
    under today's name and value; a field recorded by both names keeps today's.

    Example:
        >>> layout_fields({"node_int8": True, "node_from_subchunks": False, "chunk_tokens": 254})
        {'chunk_tokens': 254, 'node_quantization': 'int8', 'node_source': 'encoded'}
    """
    fields = {k: v for k, v in record.items() if k not in EARLIER_NAMES}
    for old, (new, meaning) in EARLIER_NAMES.items():
        if old in record and new not in fields:
            fields[new] = meaning.get(record[old], record[old])
    return fields


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
