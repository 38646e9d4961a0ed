"""``PosFairRerank``: re-score first-stage results with a position-fair encoder."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders.spec import UNSET, EncoderSpec
from llamaindex_posfair.integrations.embedding import local_encoder
from llamaindex_posfair.integrations.encoder_site import encoder_site
from llamaindex_posfair.integrations.node_scoring import Scoring, ScoringSettings
from llamaindex_posfair.scoring import NODE_WEIGHT
from qdrant_tools.subchunks import NodeSource, SubchunkConfig

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

dispatcher = get_dispatcher(__name__)

_MODES = {"none": MetadataMode.NONE, "embed": MetadataMode.EMBED, "llm": MetadataMode.LLM, "all": MetadataMode.ALL}


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return np.zeros_like(x) if hi - lo <= 1e-12 else (x - lo) / (hi - lo)


def calibrated_spec() -> EncoderSpec:
    """The reranker's encoder when none is given: the bundled MiniLM, calibrated (``CalibrationConfig()``).

    Unlike :class:`~llamaindex_posfair.encoders.spec.EncoderSpec`, whose default is the plain model of the
    sub-chunk layout, the reranker calibrates by default: its default scoring embeds each whole candidate as one
    vector, where calibration helps (docs/evidence.md).
    """
    return EncoderSpec(calibration=CalibrationConfig())


def drop_duplicates(nodes: list[NodeWithScore]) -> list[NodeWithScore]:
    """Candidates without exact duplicates (same text and same source), the best-scored copy kept.

    An index filled twice with random node ids (``VectorStoreIndex.from_documents`` run again)
    returns every hit twice; scoring both copies would waste the reranker's ``top_n``.
    """
    best: dict[tuple[str, str], NodeWithScore] = {}
    for n in nodes:
        md = n.node.metadata or {}
        source = str(md.get("source") or md.get("file_path") or md.get("file_name") or n.node.ref_doc_id or "")
        key = (n.node.get_content(), source)
        kept = best.get(key)
        if kept is None or (n.score is not None and (kept.score is None or n.score > kept.score)):
            best[key] = n
    chosen = {id(n) for n in best.values()}
    return [n for n in nodes if id(n) in chosen]


class PosFairRerank(BaseNodePostprocessor):
    """Re-score the nodes any retriever returned with a position-fair bi-encoder.

    The query and every candidate's text are embedded with a calibrated (by default: :func:`calibrated_spec`), plain
    or DUMP-prefixed :class:`~llamaindex_posfair.PosFairEncoder`; the new score is their cosine similarity, of the
    whole candidate (``scoring="node"``), of its best sentence-aligned sub-chunk (``"subchunks"``) or both weighted
    (``"weighted"``), optionally blended with the min-max-normalised first-stage score (``blend_weight``). This gives
    position fairness to an existing index without re-indexing: retrieve a generous ``similarity_top_k`` and keep
    ``top_n`` (docs/integration.md, "LlamaIndex"). With ``endpoint=URL`` a ``posfair serve`` server scores
    (docs/serving.md). Emits LlamaIndex's rerank events, as ``SentenceTransformerRerank`` does. For embedding at
    indexing time use :class:`~llamaindex_posfair.PosFairEmbedding`.

    Args:
        top_n: nodes returned, best first.
        model_name: model folder, hub name or ``"bundled:all-MiniLM-L6-v2"`` (default).
        calibration: calibration settings (default ``CalibrationConfig()`` when neither ``spec`` nor ``encoder``
            is given: :func:`calibrated_spec`); ``None`` re-scores with the plain model.
        spec: a whole :class:`~llamaindex_posfair.encoders.spec.EncoderSpec` instead of
            ``model_name``/``calibration``/settings (``batch_size`` = candidates per forward pass).
        keep_retrieval_score: copy each node's first-stage score to
            ``node.metadata["retrieval_score"]``.
        blend_weight: weight of the first-stage score in ``[0, 1]``.
        metadata_mode: what of the node is embedded: ``"none"`` (text only,
            default), ``"embed"``, ``"llm"`` or ``"all"``.
        scoring: ``"node"``, ``"subchunks"`` or ``"weighted"`` (see above).
        subchunk_tokens / subchunk_overlap: sub-chunk budget and sentence overlap.
        node_weight: weight of the node cosine in ``"weighted"``.
        node_source: ``"encoded"`` or ``"subchunk-mean"`` (a node vector derived from the sub-chunks, as a
            collection ingested with ``node_source="subchunk-mean"`` stores it; :data:`qdrant_tools.subchunks.NodeSource`).
        drop_duplicates: drop exact duplicate candidates before scoring.
        encoder: an already loaded ``PosFairEncoder`` (or view) to reuse; the spec is then the encoder's.
        endpoint: URL of a ``posfair serve`` server (``None``: run the model in this process).
        endpoint_timeout_s: seconds per HTTP call to ``endpoint``.
        **settings: any other ``EncoderSpec`` field (``query_prompt``, ``max_length``, ``device``, ...).

    Raises:
        ValueError: no query, or an empty query.
        llamaindex_posfair.serve.client.ServeMismatchError: ``endpoint`` serves another encoder.

    Example:
        >>> from llamaindex_posfair import CalibrationConfig, PosFairRerank
        >>> rerank = PosFairRerank(top_n=3, calibration=CalibrationConfig(strength=0.5))
        >>> engine = index.as_query_engine(similarity_top_k=20, node_postprocessors=[rerank])  # doctest: +SKIP
        >>> nodes = rerank.postprocess_nodes(retriever.retrieve("q"), query_str="q")  # doctest: +SKIP
        >>> remote = PosFairRerank(top_n=3, endpoint="http://gpu-host:8000")  # doctest: +SKIP
    """

    top_n: int = Field(default=5, gt=0, description="Number of nodes returned, best first.")
    spec: EncoderSpec = Field(
        default_factory=calibrated_spec,
        description="Every encoder setting (model and weights hash, calibration, prompts, max length, dtype, ...); "
        "default: the bundled MiniLM, calibrated.",
    )
    keep_retrieval_score: bool = Field(
        default=False, description="Keep the first-stage score in node.metadata['retrieval_score']."
    )
    blend_weight: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Weight of the (min-max normalised) first-stage score in [0, 1]."
    )
    metadata_mode: Literal["none", "embed", "llm", "all"] = Field(
        default="none", description="Which node content is embedded: text only ('none') or with metadata."
    )
    scoring: Scoring = Field(
        default="node",
        description="'node': one vector per candidate; 'subchunks': its best sentence-aligned sub-chunk; "
        "'weighted': node_weight * node + (1 - node_weight) * best sub-chunk.",
    )
    subchunk_tokens: int = Field(
        default=SubchunkConfig().max_tokens, ge=4, description="Token budget of a sub-chunk (scoring 'subchunks')."
    )
    subchunk_overlap: int = Field(
        default=SubchunkConfig().overlap_sentences, ge=0, description="Sentences shared by neighbouring sub-chunks."
    )
    node_weight: float = Field(
        default=NODE_WEIGHT, ge=0.0, le=1.0, description="Weight of the node cosine in scoring 'weighted'."
    )
    node_source: NodeSource = Field(
        default="encoded",
        description="'encoded': a candidate's node vector encodes its text; 'subchunk-mean': the normalised mean "
        "of its sub-chunk vectors (as a collection written with node vectors derived from sub-chunks).",
    )
    drop_duplicates: bool = Field(
        default=True, description="Drop exact duplicate candidates (same text and source) before scoring."
    )

    endpoint: str | None = Field(
        default=None, description="URL of a `posfair serve` server; None runs the model in this process."
    )
    endpoint_timeout_s: float = Field(default=60.0, gt=0, description="Seconds per HTTP call to the endpoint.")

    _site: Any = PrivateAttr(default=None)

    def __init__(
        self,
        top_n: int = 5,
        *,
        model_name: str | None = None,
        calibration: Any = UNSET,
        spec: Any = None,
        encoder: Any = None,
        endpoint: str | None = None,
        endpoint_timeout_s: float = 60.0,
        **settings: Any,
    ) -> None:
        own = {k: settings.pop(k) for k in list(settings) if k in type(self).model_fields}
        if spec is None and encoder is None and calibration is UNSET:
            calibration = calibrated_spec().calibration
        spec, site = encoder_site(
            spec, model_name, calibration, encoder, settings, endpoint=endpoint, timeout_s=endpoint_timeout_s
        )
        super().__init__(top_n=top_n, spec=spec, endpoint=endpoint, endpoint_timeout_s=endpoint_timeout_s, **own)
        self._site = site

    @classmethod
    def from_collection(
        cls, client: StoreLike, collection: str, top_n: int = 5, *, vector: str | None = None, **settings: Any
    ) -> PosFairRerank:
        """A reranker that scores as ``collection`` was written: its recipe's encoder and sub-chunks.

        Args:
            client: a ``QdrantClient`` or the embedded store holding ``collection``.
            collection: a collection written by ``posfair ingest`` (it records its recipe).
            top_n: nodes returned.
            vector: the recipe vector whose encoder scores (default: the one searched).
            settings: any other field or argument (``endpoint=``, ``blend_weight=``, ``encoder=`` ...);
                an encoder setting must agree with the recipe.

        Raises:
            LookupError: no such collection.
            ValueError: the collection records no recipe (written before recipes): pass ``spec=`` and the
                scoring settings instead.
            CollectionMismatchError: a setting contradicts the recipe.

        Example:
            >>> rerank = PosFairRerank.from_collection(client, "demo", top_n=3)  # doctest: +SKIP
        """
        from llamaindex_posfair.integrations.gate import Gate
        from llamaindex_posfair.integrations.recipe import read_recipe

        recipe = read_recipe(client, collection)
        if recipe is None:
            raise ValueError(
                f"collection {collection!r} records no recipe (written before recipes, or not by posfair ingest); "
                "construct PosFairRerank(spec=..., scoring=...) instead, or re-ingest it"
            )
        gate = Gate.of(collection, recipe, vector, client)
        given = {k: settings.pop(k) for k in list(settings) if k in EncoderSpec.model_fields}
        base = {**recipe.rerank_settings(vector), "spec": gate.spec(given)}
        if settings.get("encoder") is None:
            base["spec"] = gate.check_reader(base["spec"])
        else:  # the loaded encoder is the spec (spec_and_encoder refuses both)
            del base["spec"]
            settings["encoder"] = gate.check_reader(settings["encoder"])
        return cls(top_n, **{**base, **settings})

    @classmethod
    def class_name(cls) -> str:
        return "PosFairRerank"

    @property
    def encoder(self) -> Any:
        """The underlying :class:`~llamaindex_posfair.PosFairEncoder`.

        Raises:
            RuntimeError: with ``endpoint`` (no model is loaded in this process).
        """
        return local_encoder(self._site, self.endpoint)

    @property
    def model_name(self) -> str:
        """The model id (reported in LlamaIndex's rerank events)."""
        return self.spec.model

    def _start(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> tuple[list[NodeWithScore], str, list[str]]:
        """Check the query, emit the start event; the candidates (duplicates dropped), the query, their texts."""
        if query_bundle is None:
            raise ValueError("PosFairRerank needs the query: pass query_bundle= or query_str=")
        query = query_bundle.query_str
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r}")
        dispatcher.event(
            ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n, model_name=self.model_name)
        )
        if self.drop_duplicates:
            nodes = drop_duplicates(nodes)
        mode = _MODES[self.metadata_mode]
        return nodes, query, [n.node.get_content(metadata_mode=mode) for n in nodes]

    def _event(self, nodes: list[NodeWithScore], query: str) -> Any:
        return self.callback_manager.event(
            CBEventType.RERANKING,
            payload={
                EventPayload.NODES: nodes,
                EventPayload.MODEL_NAME: self.model_name,
                EventPayload.QUERY_STR: query,
                EventPayload.TOP_K: self.top_n,
            },
        )

    def _ranked(self, nodes: list[NodeWithScore], cosine: np.ndarray) -> list[NodeWithScore]:
        """The ``top_n`` nodes by cosine (blended with the first-stage score when ``blend_weight > 0``)."""
        if self.blend_weight > 0:
            first = np.array([n.score if n.score is not None else np.nan for n in nodes], dtype=np.float64)
            first = np.where(np.isnan(first), np.nanmin(first) if np.isfinite(first).any() else 0.0, first)
            scores = (1 - self.blend_weight) * _minmax(cosine) + self.blend_weight * _minmax(first)
        else:
            scores = cosine
        out = []
        for n, s in zip(nodes, scores):
            if self.keep_retrieval_score:
                n.node.metadata["retrieval_score"] = n.score
            out.append(NodeWithScore(node=n.node, score=float(s)))
        out.sort(key=lambda n: -n.score)
        return out[: self.top_n]

    def _scoring(self) -> ScoringSettings:
        return ScoringSettings(
            self.scoring,
            SubchunkConfig(self.subchunk_tokens, self.subchunk_overlap),
            self.node_weight,
            self.node_source,
        )

    @staticmethod
    def _end(out: list[NodeWithScore]) -> list[NodeWithScore]:
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        nodes, query, texts = self._start(nodes, query_bundle)
        if not nodes:
            return self._end([])
        with self._event(nodes, query) as event:
            out = self._ranked(nodes, self._site.scores(query, texts, self._scoring()))
            event.on_end(payload={EventPayload.NODES: out})
        return self._end(out)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """Async: with ``endpoint`` the server call is awaited; a local model runs in a worker thread."""
        if self.endpoint is None:
            return await asyncio.to_thread(self._postprocess_nodes, nodes, query_bundle)
        nodes, query, texts = self._start(nodes, query_bundle)
        if not nodes:
            return self._end([])
        with self._event(nodes, query) as event:
            out = self._ranked(nodes, await self._site.ascores(query, texts, self._scoring()))
            event.on_end(payload={EventPayload.NODES: out})
        return self._end(out)
