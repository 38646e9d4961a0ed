"""The recipe of a collection: how ``posfair ingest`` wrote it, recorded in the collection itself.

A :class:`Recipe` holds every setting a reader needs to agree with the writer: the encoder of each named vector
(an :class:`~llamaindex_posfair.encoders.spec.EncoderSpec` without its run-time fields, its dtype resolved), the
layout (:class:`qdrant_tools.layout.NodeLayout`), the default search and BM25. Ingestion writes it into the
collection's metadata (:data:`qdrant_tools.metadata.RECIPE_KEY`) and every reader (``posfair query``, ``posfair
serve --collection``, the retriever, the store, :meth:`PosFairRerank.from_collection`) reads it; a setting given
beside it must agree, or :class:`~qdrant_tools.spec.CollectionMismatchError` names both values.
:meth:`Recipe.default` is the default pipeline.

Example:
    >>> from llamaindex_posfair.integrations.recipe import Recipe
    >>> r = Recipe.default()
    >>> r.node_vector(), r.layout.subchunks.max_tokens, r.encoder_spec().calibration is None
    ('vanilla', 32, True)
    >>> r.encoder_spec(given={"max_length": 128})
    Traceback (most recent call last):
    ...
    qdrant_tools.spec.CollectionMismatchError: the collection was written with max_length none, but max_length gives 128; drop max_length to use the collection's, or write a new collection
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.spec import VECTOR_FIELDS, EncoderSet, EncoderSpec
from llamaindex_posfair.integrations.gate import conflict, contradiction, settle
from qdrant_tools.driver import IngestSettings
from qdrant_tools.layout import NodeLayout, layout_fields
from qdrant_tools.metadata import RECIPE_KEY, read_metadata
from qdrant_tools.search import RRF_SEARCH, SearchSettings
from qdrant_tools.sparse import Bm25Sparse
from qdrant_tools.spec import CollectionMismatchError
from qdrant_tools.subchunks import SubchunkConfig

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import AsyncStoreLike, StoreLike

__all__ = [
    "Recipe",
    "aread_recipe",
    "read_recipe",
    "recorded_search",
    "search_changes",
    "switched_search",
    "write_recipe",
]

logger = logging.getLogger(__name__)

#: EncoderSpec fields a recipe records: those that shape the vectors (run-time fields stay the reader's,
#: and ``trust_remote_code`` is always the reader's own opt-in).
RECORDED_FIELDS = tuple(VECTOR_FIELDS)
S = TypeVar("S", bound=IngestSettings)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


#: The search fields that say how the dense and the BM25 rankings are fused.
FUSION_FIELDS = ("fusion", "fusion_limit", "sparse_weight", "rrf_k")
#: What a layout, search or encoder field missing from a recorded recipe meant when it was written (a recipe records
#: every field of its time; these are the fields whose default has since become the product's).
_BEFORE_PRODUCT_DEFAULTS: dict[str, dict[str, Any]] = {
    "vector": {"calibration": CalibrationConfig()},
    "layout": {"fused_weight": None, "node_quantization": None, "node_on_disk": False, "fused_quantization": None},
    "search": {"prefetch_limit": 100, "prefetch_max": None, "exact_up_to": 10_000, "fusion": "rrf", "fusion_limit": 50},
}


def recorded_search(recipe: Recipe | None) -> SearchSettings:
    """The search ``recipe`` records; for a collection written before recipes (``None``), the search of that
    time (best sub-chunk only, the candidates of then), so it ranks as it did."""
    if recipe is not None:
        return recipe.search
    return SearchSettings(**_BEFORE_PRODUCT_DEFAULTS["search"], node_weight=0.0)


def _read_back(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` (a recorded recipe) with its encoders, layout and search as they were meant when written: a flat
    ``"chunking"`` (``subchunk_tokens``, ``subchunk_overlap``) as its layout, a layout field recorded by its earlier
    name under today's (:func:`qdrant_tools.layout.layout_fields`: ``node_int8``, ``subchunk_int8``,
    ``node_from_subchunks``), a missing field as it was then (an encoder without ``calibration``: calibrated, the
    default then), and a missing search node weight as the layout's fused weight (recorded once, in the layout),
    else 0."""
    data = dict(record)
    flat = dict(data.pop("chunking", None) or {})
    if "layout" not in data and flat:
        sub = SubchunkConfig()
        tokens = flat.pop("subchunk_tokens", sub.max_tokens)
        overlap = flat.pop("subchunk_overlap", sub.overlap_sentences)
        data["layout"] = {**flat, "subchunks": None if tokens is None else SubchunkConfig(tokens, overlap)}
    layout = {**_BEFORE_PRODUCT_DEFAULTS["layout"], **layout_fields(data.get("layout", {}))}
    fused = layout["fused_weight"]
    search = {**_BEFORE_PRODUCT_DEFAULTS["search"], "node_weight": 0.0 if fused is None else fused}
    if isinstance(data.get("vectors"), Mapping):
        was = _BEFORE_PRODUCT_DEFAULTS["vector"]
        data["vectors"] = {n: {**was, **v} if isinstance(v, Mapping) else v for n, v in data["vectors"].items()}
    return {**data, "layout": layout, "search": {**search, **data.get("search", {})}}


class Recipe(_Frozen):
    """Everything that says how a collection was written (see the module docstring).

    Args:
        vectors: Qdrant vector name -> the encoder that wrote it (recorded fields only).
        layout: nodes, sub-chunks and the vectors stored (:class:`~qdrant_tools.layout.NodeLayout`).
        search: the default search.
        bm25: the BM25 sparse vector's settings (hybrid search), or ``None``.
    """

    format: Literal[1] = 1
    vectors: dict[str, EncoderSpec] = Field(min_length=1, description="Vector name -> its encoder.")
    layout: NodeLayout = Field(default_factory=NodeLayout, description="How nodes are cut and stored.")
    search: SearchSettings = Field(
        default_factory=SearchSettings, description="The default search (a query may override it)."
    )
    bm25: dict[str, Any] | None = Field(
        None, description="Settings of the BM25 sparse vector of each node (Bm25Sparse.settings()); None = none."
    )

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Recipe:
        """The recipe a collection records (``metadata()[RECIPE_KEY]``), read as it was written: a recipe
        written before a field existed reads that field as it was then (:func:`_read_back`).

        Raises:
            pydantic.ValidationError: the record is not a recipe this version understands.
        """
        return cls.model_validate(_read_back(record))

    @classmethod
    def default(cls) -> Recipe:
        """The default pipeline: the bundled MiniLM, uncalibrated, with ``NodeLayout()``, ``SearchSettings()``
        and BM25."""
        return cls.for_encoder(EncoderSpec())

    @classmethod
    def for_encoder(cls, spec: EncoderSpec) -> Recipe:
        """The shipped layout and search (:meth:`default`) for another encoder's single vector."""
        return cls.build(EncoderSet.single(spec), NodeLayout(), SearchSettings(), Bm25Sparse())

    def ingest_settings(self, kind: type[S] = IngestSettings, **run: Any) -> S:
        """The settings that write this recipe: an :class:`qdrant_tools.driver.IngestSettings`, or ``kind``, a
        subclass such as :class:`qdrant_tools.ingest.IngestConfig` (``run``: run-time fields such as
        ``show_progress``, ``prune``, ``batch_size``)."""
        return kind(layout=self.layout, sparse=self.sparse_encoder(), metadata=self.metadata(), **run)

    def bind(self, encoder: Any) -> dict[str, Any]:
        """Vector name -> ``encoder`` (or its calibration view) for every vector of the recipe.

        Raises:
            ValueError: a vector needs another model or settings than ``encoder``.
        """
        return EncoderSet(vectors=self.vectors).bind(encoder)

    @classmethod
    def build(
        cls,
        encoders: EncoderSet,
        layout: NodeLayout | None = None,
        search: SearchSettings | None = None,
        bm25: Bm25Sparse | None = None,
    ) -> Recipe:
        """A recipe of ``encoders`` (pinned where their files are here; run-time fields dropped)."""
        vectors = {n: _recorded(s) for n, s in encoders.pinned().vectors.items()}
        return cls(
            vectors=vectors,
            layout=layout or NodeLayout(),
            search=search or SearchSettings(),
            bm25=None if bm25 is None else bm25.settings(),
        )

    def sparse_encoder(self) -> Bm25Sparse | None:
        """The BM25 model of the collection's sparse vector (``None``: no sparse vector)."""
        return None if self.bm25 is None else Bm25Sparse(self.bm25)

    def metadata(self) -> dict[str, Any]:
        """The collection metadata that records this recipe (read back by :meth:`from_record`): the encoders'
        run-time fields left out, and the search's node weight too where it is the layout's fused weight (each
        fact recorded once)."""
        runtime = set(EncoderSpec.model_fields) - set(RECORDED_FIELDS) - {"dump_tokens"}
        exclude: dict[str, Any] = {"vectors": {n: runtime for n in self.vectors}}
        if self.layout.fused_weight == self.search.node_weight:
            exclude["search"] = {"node_weight"}
        return {RECIPE_KEY: self.model_dump(mode="json", exclude=exclude)}

    def with_fused_rows(
        self,
        weight: float,
        node_quantization: str | None,
        fused_quantization: str | None = None,
        node_on_disk: bool = False,
    ) -> Recipe:
        """This recipe for a copy holding the fused multivector at ``weight``, stored as the other arguments say
        (:func:`qdrant_tools.fuse.fuse_collection`; a node quantization the recipe has is kept).

        Raises:
            ValueError: the recipe has no sub-chunks, ``weight`` is outside (0, 1), or the storage is invalid.
        """
        layout = self.layout.replace(
            fused_weight=weight,
            node_quantization=node_quantization or self.layout.node_quantization,
            fused_quantization=fused_quantization,
            node_on_disk=node_on_disk,
        )
        return self.model_copy(update={"layout": layout})

    def node_vector(self, requested: str | None = None) -> str:
        """The vector a query searches: ``requested``, the recipe's, ``"calibrated"``, or the only one.

        Raises:
            ValueError: ``requested`` is not one of the recipe's vectors.
        """
        name = requested or self.search.vector
        if name is None:
            name = "calibrated" if "calibrated" in self.vectors else sorted(self.vectors)[0]
        if name not in self.vectors:
            raise ValueError(f"vector {name!r} is not in the collection's recipe (it has {sorted(self.vectors)})")
        return name

    def encoder_spec(
        self,
        vector: str | None = None,
        given: Mapping[str, Any] | None = None,
        *,
        names: Mapping[str, str] | None = None,
        query: bool = False,
    ) -> EncoderSpec:
        """The spec that encodes for ``vector`` (default :meth:`node_vector`), with the caller's ``given`` fields
        applied by :func:`llamaindex_posfair.integrations.gate.settle` (``names``: their flags, for the error;
        ``query``: a reader's spec, whose dtype and runtime are its own).

        Raises:
            CollectionMismatchError: a recorded field disagrees (both values named).
        """
        stored = self.vectors[self.node_vector(vector)]
        return settle(stored, given, names=names, read=query)

    def rerank_settings(self, vector: str | None = None) -> dict[str, Any]:
        """:class:`~llamaindex_posfair.PosFairRerank` settings that score as this collection does:
        its encoder, and its sub-chunks (weighted with the node cosine when the search weighs it)."""
        layout, weight = self.layout, self.search.node_weight
        if layout.subchunks is None:
            scoring: dict[str, Any] = {"scoring": "node"}
        else:
            scoring = {
                "scoring": "weighted" if weight > 0 else "subchunks",
                "subchunk_tokens": layout.subchunks.max_tokens,
                "subchunk_overlap": layout.subchunks.overlap_sentences,
                "node_weight": weight,
                "node_source": layout.node_source,
            }
        return {"spec": self.encoder_spec(vector, query=True), **scoring}

    def check_layout(self, given: Mapping[str, Any], names: Mapping[str, str] | None = None) -> None:
        """Raise :class:`~qdrant_tools.spec.CollectionMismatchError` where ``given`` layout fields disagree with
        the recipe's layout.

        Args:
            given: :class:`~qdrant_tools.layout.NodeLayout` fields, e.g. those a command's flags set.
            names: field -> the name the caller knows it by (CLI flags), for the error.

        Raises:
            CollectionMismatchError: a field disagrees (both values named).
        """
        for field, value in given.items():
            stored = getattr(self.layout, field)
            if value != stored:
                raise CollectionMismatchError(conflict("the collection", field, stored, value, names))

    def check_vectors(self, names: Sequence[str] | None, flag: str = "vectors") -> None:
        """Raise :class:`~qdrant_tools.spec.CollectionMismatchError` unless ``names`` are the recipe's vectors.

        Args:
            names: the vector names the caller asks for, in any order (``None``: none asked, nothing to check).
            flag: the name the caller knows the setting by (a CLI flag), for the error.

        Raises:
            CollectionMismatchError: ``names`` differ from the recorded vectors (both sides named).
        """
        stored = sorted(self.vectors)
        if names is not None and sorted(names) != stored:
            raise CollectionMismatchError(
                conflict("the collection", "vectors", stored, sorted(names), {"vectors": flag})
            )

    def check_bm25(self, bm25: bool | None, flag: str = "bm25") -> None:
        """Raise :class:`~qdrant_tools.spec.CollectionMismatchError` unless ``bm25`` says what the recipe records:
        whether the collection has a BM25 sparse vector.

        Args:
            bm25: whether the caller asks for a BM25 vector (``None``: not asked, nothing to check).
            flag: the name the caller knows the setting by (a CLI flag), for the error.

        Raises:
            CollectionMismatchError: ``bm25`` contradicts the recipe (both sides named).
        """
        if bm25 is not None and bm25 != (self.bm25 is not None):
            shown = {True: "a BM25 vector", False: "no BM25 vector"}
            raise CollectionMismatchError(contradiction("the collection", shown[not bm25], flag, shown[bm25]))


def switched_search(search: SearchSettings, fusion: Literal["rrf", "dbsf"], **given: Any) -> SearchSettings:
    """``search`` with the fusion fields of ``fusion``'s shipped search (``SearchSettings()`` for DBSF, the
    earlier :data:`~qdrant_tools.search.RRF_SEARCH` for weighted RRF), ``given`` fusion fields on top; every other
    field is kept.

    Example:
        >>> s = switched_search(RRF_SEARCH, "dbsf")
        >>> (s.fusion, s.sparse_weight, s.rrf_k, s.fusion_limit) == ("dbsf", 1.0, None, 100), s == SearchSettings()
        (True, True)

    Raises:
        ValueError: a field that is not a fusion field, or a setting that does not fit the fusion (named).
    """
    if fusion not in ("rrf", "dbsf"):
        raise ValueError(f'fusion must be "rrf" or "dbsf", got {fusion!r}')
    other = sorted(set(given) - set(FUSION_FIELDS))
    if other:
        raise ValueError(f"{other} are not fusion settings; the fusion settings are {list(FUSION_FIELDS)}")
    base = SearchSettings() if fusion == "dbsf" else RRF_SEARCH
    fields = {f: getattr(base, f) for f in FUSION_FIELDS}
    fields.update({k: v for k, v in given.items() if v is not None})
    return dataclasses.replace(search, **fields)


def search_changes(before: SearchSettings, after: SearchSettings) -> list[str]:
    """``"field: before -> after"`` for every search field that differs.

    Example:
        >>> search_changes(RRF_SEARCH, SearchSettings())
        ["fusion: 'rrf' -> 'dbsf'", 'sparse_weight: 1.5 -> 1.0', 'rrf_k: 60 -> None']
    """
    return [
        f"{f.name}: {getattr(before, f.name)!r} -> {getattr(after, f.name)!r}"
        for f in dataclasses.fields(SearchSettings)
        if getattr(before, f.name) != getattr(after, f.name)
    ]


def write_recipe(client: StoreLike, collection: str, recipe: Recipe) -> None:
    """Record ``recipe`` in ``collection``'s metadata (replacing the recorded one; no point is touched).

    Raises:
        LookupError: the collection does not exist.
    """
    if not client.collection_exists(collection):
        raise LookupError(f"collection {collection!r} not found")
    client.update_collection(collection, metadata=recipe.metadata())


#: Collections already told (once per process) that they search with another fusion than the default.
_FUSION_NOTICED: set[str] = set()


def notice_search_default(recipe: Recipe, collection: str) -> None:
    """Log once per collection that its recorded fusion is not the current default, and how to switch."""
    fusion, default = recipe.search.fusion, SearchSettings().fusion
    if fusion == default or collection in _FUSION_NOTICED or recipe.bm25 is None:
        return
    _FUSION_NOTICED.add(collection)
    logger.warning(
        "collection %r searches with %s fusion, as recorded when it was written; new collections use %s "
        "(docs/evidence.md). Switch it without re-embedding: posfair collection set-search %s --fusion %s",
        collection,
        fusion.upper(),
        default.upper(),
        collection,
        default,
    )


def _recorded(spec: EncoderSpec) -> EncoderSpec:
    """``spec`` with its dtype resolved on its device and the run-time fields at their defaults (what a recipe
    records: the precision the vectors were computed in, never ``"auto"``)."""
    return EncoderSpec.model_validate(spec.resolved().model_dump(include=set(RECORDED_FIELDS) | {"dump_tokens"}))


def read_recipe(client: StoreLike, collection: str, *, notice: bool = True) -> Recipe | None:
    """The recipe recorded in ``collection`` (``None``: written before recipes, or not by posfair ingest).

    With ``notice``, a collection whose recorded fusion is not the current default is told so once
    (:func:`notice_search_default`).

    Raises:
        LookupError: the collection does not exist.
        ValueError: the recorded recipe is not one this version understands (names the fix).
    """
    return _recipe_of(read_metadata(client, collection), collection, notice)


async def aread_recipe(aclient: AsyncStoreLike, collection: str) -> Recipe | None:
    """:func:`read_recipe` through an async client (an ``AsyncQdrantClient`` or an ``AsyncStore``).

    Raises:
        LookupError / ValueError: as :func:`read_recipe`.
    """
    if not await aclient.collection_exists(collection):
        raise LookupError(f"collection {collection!r} not found")
    config = (await aclient.get_collection(collection)).config
    return _recipe_of(dict(getattr(config, "metadata", None) or {}), collection, notice=True)


def _recipe_of(metadata: dict[str, Any], collection: str, notice: bool) -> Recipe | None:
    """The recipe in a collection's metadata (``None``: it records none); ``notice``: see :func:`read_recipe`."""
    data = metadata.get(RECIPE_KEY)
    if data is None:
        return None
    try:
        recipe = Recipe.from_record(data)
    except ValueError as exc:
        raise ValueError(
            f"collection {collection!r} records a recipe this version of llamaindex-posfair cannot read ({exc}); "
            "upgrade llamaindex-posfair, or re-ingest into a new collection"
        ) from None
    if notice:
        notice_search_default(recipe, collection)
    return recipe
