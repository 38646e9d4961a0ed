"""Adopt a collection written by LlamaIndex's ``QdrantVectorStore``: its nodes, re-stored in posfair's layout.

:func:`adopt_llamaindex_collection` reads each node's record (``_node_content``) back and writes it through
:class:`~llamaindex_posfair.PosFairVectorStore` into a new collection, keeping node ids, metadata and relationships;
the source is only read and a rerun completes an interrupted copy (docs/vector-store.md, "Adopting").

Example:
    >>> from qdrant_tools.store import open_store
    >>> client = open_store("./.posfair/qdrant")                                   # doctest: +SKIP
    >>> adopt_llamaindex_collection(client, "llama_docs", "docs_posfair")          # doctest: +SKIP
    1243
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from tqdm.auto import tqdm

from llamaindex_posfair.integrations.nodes import NODE_CONTENT
from llamaindex_posfair.integrations.vector_store import PosFairVectorStore
from qdrant_tools.scroll import scroll_pages

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

__all__ = ["NotALlamaIndexCollectionError", "adopt_llamaindex_collection", "check_llamaindex_source"]


class NotALlamaIndexCollectionError(ValueError):
    """The source collection does not hold LlamaIndex node records."""


def _node(payload: dict[str, Any]) -> BaseNode:
    node = metadata_dict_to_node(payload, text=payload.get("text"))
    node.embedding = None  # the source's vectors may come from another model: the store embeds the text
    return node


def check_llamaindex_source(client: StoreLike, source: str, target: str) -> None:
    """Refuse a source that is missing, is the target, or holds no LlamaIndex node records.

    Raises:
        LookupError / NotALlamaIndexCollectionError / ValueError: the message names the fix.
    """
    if source == target:
        raise ValueError(f"--to must name a new collection, not the source {source!r}")
    if not client.collection_exists(source):
        raise LookupError(f"collection {source!r} does not exist")
    points, _ = client.scroll(source, limit=1, with_payload=True, with_vectors=False)
    if points and NODE_CONTENT not in (points[0].payload or {}):
        raise NotALlamaIndexCollectionError(
            f"collection {source!r} was not written by LlamaIndex's QdrantVectorStore (its points have no "
            f"{NODE_CONTENT!r} node record); ingest its files with `posfair ingest` instead"
        )


def adopt_llamaindex_collection(
    client: StoreLike,
    source: str,
    target: str,
    *,
    embed_model: Any = None,
    batch_size: int = 256,
    show_progress: bool = False,
) -> int:
    """Copy the nodes of the LlamaIndex collection ``source`` into ``target`` in posfair's layout.

    Args:
        client: the store holding both collections.
        source: a collection written by ``QdrantVectorStore`` (read only).
        target: the new collection (created with the shipped layout for ``embed_model``'s encoder; an existing
            posfair collection with the same layout is completed, as after an interrupted run).
        embed_model: a ``PosFairEmbedding`` (default: the bundled model, uncalibrated).
        batch_size: nodes read and written per page.
        show_progress: a progress bar over the nodes.

    Returns:
        The number of nodes copied.

    Raises:
        LookupError: ``source`` does not exist.
        NotALlamaIndexCollectionError: ``source`` holds no LlamaIndex node records (nothing is written).
        CollectionMismatchError / ValueError: ``target`` exists with another encoder, or is not posfair's.
    """
    check_llamaindex_source(client, source, target)
    store = PosFairVectorStore(target, client=client, embed_model=embed_model, batch_size=batch_size)
    total = client.count(source, exact=True).count
    copied = 0
    with tqdm(total=total, unit="node", desc=f"adopt {source} -> {target}", disable=not show_progress) as bar:
        for points in scroll_pages(client, source, page=batch_size):
            nodes = [_node(p.payload or {}) for p in points]
            store.add(nodes)
            copied += len(nodes)
            bar.update(len(nodes))
    return copied
