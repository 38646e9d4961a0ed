"""``PosFairNodeParser``: posfair's nodes as a LlamaIndex ``NodeParser``.

It cuts documents exactly as ``posfair ingest`` does (:func:`qdrant_tools.chunking.chunk_text`
on the encoder's own tokens, the collection layout's node size and overlap), so
``IngestionPipeline(transformations=[PosFairNodeParser.from_embed_model(embed), embed], ...)``
gives the CLI's nodes. Node ids are deterministic (the document id, its content
and the layout), so re-running a pipeline rewrites the same points. Every metadata
key is excluded from the embedded text, as the CLI embeds the bare chunk.

Example:
    >>> from llama_index.core import Document
    >>> from llamaindex_posfair import PosFairEmbedding, PosFairNodeParser
    >>> parser = PosFairNodeParser.from_embed_model(PosFairEmbedding())  # doctest: +SKIP
    >>> nodes = parser.get_nodes_from_documents([Document(text="One. Two.", id_="a.md")])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, TextNode

from llamaindex_posfair.integrations.recipe import Recipe
from qdrant_tools.chunking import ChunkingConfig, chunk_text, content_hash
from qdrant_tools.encoding import PointEncoding, spans_for
from qdrant_tools.ids import document_version, point_id

__all__ = ["PosFairNodeParser"]


class PosFairNodeParser(NodeParser):
    """Split documents into posfair's nodes (token windows snapped to word ends, with overlap).

    Build it with :meth:`from_embed_model` (or :meth:`from_encoder`): the node size comes from the
    collection layout and the encoder's window, the tokens from the encoder's tokenizer.

    Args:
        chunk_tokens: tokens per node (special tokens not counted).
        overlap_tokens: tokens shared by consecutive nodes.
    """

    chunk_tokens: int = Field(gt=0, description="Tokens per node (special tokens not counted).")
    overlap_tokens: int = Field(ge=0, description="Tokens shared by consecutive nodes.")
    layout_key: str = Field(default="", description="The collection layout's chunking key (part of node ids).")

    _spans_fn: Any = PrivateAttr(default=None)
    _fingerprints: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "PosFairNodeParser"

    @classmethod
    def from_encoding(cls, encoding: PointEncoding, spans_fn: Any, **kwargs: Any) -> PosFairNodeParser:
        """The parser of an :class:`~qdrant_tools.encoding.PointEncoding` (its chunking and key)."""
        parser = cls(
            chunk_tokens=encoding.chunking.chunk_tokens,
            overlap_tokens=encoding.chunking.overlap_tokens,
            layout_key=encoding.chunking_key,
            **kwargs,
        )
        parser._spans_fn = spans_fn
        parser._fingerprints = dict(encoding.fingerprints)
        return parser

    @classmethod
    def from_encoder(cls, encoder: Any, layout: Recipe | None = None, **kwargs: Any) -> PosFairNodeParser:
        """The parser for ``encoder`` (a loaded ``PosFairEncoder``) and a collection ``layout`` (default: the
        shipped one, :meth:`Recipe.for_encoder`)."""
        layout = layout or Recipe.for_encoder(encoder.spec)
        encoding = layout.ingest_settings(show_progress=False).point_encoding(layout.bind(encoder))
        spans_fn, _ = spans_for(encoder)
        return cls.from_encoding(encoding, spans_fn, **kwargs)

    @classmethod
    def from_embed_model(cls, embed_model: Any, layout: Recipe | None = None, **kwargs: Any) -> PosFairNodeParser:
        """The parser for a :class:`~llamaindex_posfair.PosFairEmbedding` (its loaded encoder)."""
        return cls.from_encoder(embed_model.encoder, layout, **kwargs)

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        if self._spans_fn is None:
            raise RuntimeError("build PosFairNodeParser with from_embed_model(...) or from_encoder(...)")
        config = ChunkingConfig(chunk_tokens=self.chunk_tokens, overlap_tokens=self.overlap_tokens)
        out: list[BaseNode] = []
        for doc in nodes:
            out.extend(self._split(doc, config))
        return out

    def _split(self, doc: BaseNode, config: ChunkingConfig) -> list[TextNode]:
        text = doc.get_content(metadata_mode=MetadataMode.NONE)
        version = document_version(content_hash(text, doc.metadata), self.layout_key, self._fingerprints)
        keys = list(doc.metadata)
        return [
            TextNode(
                id_=point_id(doc.node_id, version, c.index),
                text=c.text,
                start_char_idx=c.start_char,
                end_char_idx=c.end_char,
                metadata=dict(doc.metadata) if self.include_metadata else {},
                excluded_embed_metadata_keys=keys,
                excluded_llm_metadata_keys=list(doc.excluded_llm_metadata_keys),
                relationships={NodeRelationship.SOURCE: doc.as_related_node_info()},
            )
            for c in chunk_text(text, config, self._spans_fn)
        ]
