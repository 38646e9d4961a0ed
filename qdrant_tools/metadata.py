"""Collection metadata: what a collection records about how it was written, read and compared.

Qdrant keeps a free-form JSON ``metadata`` object per collection
(``create_collection(metadata=...)``, ``update_collection(metadata=...)``,
``get_collection(...).config.metadata``); the embedded Qdrant Edge store keeps
it in its ``collection.json``. posfair ingestion stores its *recipe* there
under one key (:data:`RECIPE_KEY`), so every reader of the collection uses the
settings it was written with. This module only moves and compares JSON; what
the recipe means is :mod:`llamaindex_posfair.integrations.recipe`'s business.

Example:
    >>> from qdrant_client import QdrantClient, models
    >>> client = QdrantClient(":memory:")
    >>> client.create_collection("d", vectors_config={"v": models.VectorParams(size=2, distance="Cosine")},
    ...                          metadata={RECIPE_KEY: {"layout": {"chunk_tokens": 254}}})
    True
    >>> read_metadata(client, "d")[RECIPE_KEY]["layout"]["chunk_tokens"]
    254
    >>> metadata_conflicts({"a": {"b": 1}}, {"a": {"b": 2}})
    ['a.b: stored 1, given 2']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

__all__ = ["FUSED_WEIGHT_KEY", "RECIPE_KEY", "metadata_conflicts", "read_metadata", "recorded_fused_weight"]

#: The metadata key of the recipe posfair ingestion writes.
RECIPE_KEY = "posfair_recipe"
#: The metadata key of the fused multivector's node weight in a collection that records no recipe (written
#: through :mod:`qdrant_tools` alone, or copied by ``posfair storage migrate`` from such a collection). A recipe
#: records the weight in its layout (``fused_weight``) instead; earlier versions wrote this key beside it.
FUSED_WEIGHT_KEY = "posfair_fused_node_weight"


def read_metadata(client: StoreLike, collection: str) -> dict[str, Any]:
    """The collection's metadata (``{}`` if it has none or the store keeps none).

    Raises:
        LookupError: the collection does not exist.
    """
    if not client.collection_exists(collection):
        raise LookupError(f"collection {collection!r} not found")
    config = client.get_collection(collection).config
    return dict(getattr(config, "metadata", None) or {})


def recorded_fused_weight(metadata: Mapping[str, Any]) -> float | None:
    """The node weight of the collection's fused multivector as its ``metadata`` records it (``None``: no fused rows).

    The recipe's layout records it (``fused_weight``; in the earliest recipes, their ``chunking``); a collection
    without a recipe, or whose recipe does not say, records it under :data:`FUSED_WEIGHT_KEY`.

    Example:
        >>> recorded_fused_weight({RECIPE_KEY: {"layout": {"fused_weight": 0.5}}})
        0.5
        >>> recorded_fused_weight({FUSED_WEIGHT_KEY: 0.4}), recorded_fused_weight({})
        (0.4, None)
    """
    record = metadata.get(RECIPE_KEY)
    if isinstance(record, Mapping):
        layout = record.get("layout", record.get("chunking"))
        if isinstance(layout, Mapping) and "fused_weight" in layout:
            return layout["fused_weight"]
    return metadata.get(FUSED_WEIGHT_KEY)


def metadata_conflicts(stored: Mapping[str, Any], given: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Where ``given`` disagrees with ``stored``: ``"path: stored X, given Y"`` for every differing leaf.

    Keys only one side has are not conflicts (a newer writer may record more);
    nested mappings are compared key by key.
    """
    out = []
    for key in sorted(set(stored) & set(given)):
        a, b, path = stored[key], given[key], f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out.extend(metadata_conflicts(a, b, path + "."))
        elif a != b:
            out.append(f"{path}: stored {a!r}, given {b!r}")
    return out
