"""Store traits: every way posfair gets a store reports what it keeps and does, and behaviour follows the traits.

The three stores (Qdrant Edge, qdrant-client's local mode, a server) are told apart by
:func:`qdrant_tools.store.protocol.store_traits`, never by class names: these tests open each
store every way a caller can, check the traits against the store's observable behaviour,
and drive the writer with made-up stores whose declared traits contradict their class.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from unittest.mock import Mock

import pytest
from qdrant_client import QdrantClient, models

from qdrant_tools.retry import RetryingClient
from qdrant_tools.spec import CollectionSpec, PayloadIndex, VectorConfig, is_embedded, validate_collection
from qdrant_tools.store import EdgeStore, open_store
from qdrant_tools.store.protocol import EDGE, LOCAL, SERVER, Store, StoreTraits, client_traits, store_traits
from qdrant_tools.writer import QdrantWriter

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect")

OPENERS = {
    "open_store edge :memory:": (lambda tmp: open_store(":memory:", engine="edge"), EDGE),
    "open_store edge folder": (lambda tmp: open_store(tmp / "edge"), EDGE),
    "open_store local :memory:": (lambda tmp: open_store(":memory:", engine="local"), LOCAL),
    "open_store local folder": (lambda tmp: open_store(tmp / "local", engine="local"), LOCAL),
    "QdrantClient(':memory:')": (lambda tmp: QdrantClient(":memory:"), LOCAL),
    "QdrantClient(location=':memory:')": (lambda tmp: QdrantClient(location=":memory:"), LOCAL),
    "QdrantClient(path=...)": (lambda tmp: QdrantClient(path=str(tmp / "bare")), LOCAL),
}


def spec() -> CollectionSpec:
    return CollectionSpec(name="c", vectors=[VectorConfig(name="v", size=4)])


@pytest.fixture(params=sorted(OPENERS))
def opened(request, tmp_path):
    open_, expected = OPENERS[request.param]
    store = open_(tmp_path)
    yield store, expected
    store.close()


def test_every_way_of_opening_a_store_reports_its_traits(opened):
    store, expected = opened
    assert store_traits(store) == expected
    assert store_traits(RetryingClient(store)) == expected  # the retrying proxy forwards them
    assert is_embedded(store) == is_embedded(RetryingClient(store)) == (expected.kind == "local")


def test_the_traits_agree_with_what_the_store_does(opened):
    """keeps_payload_indexes: the index shows in payload_schema; builds_index_on_request: build_index exists."""
    store, traits = opened
    store.create_collection("c", vectors_config={"v": models.VectorParams(size=4, distance=models.Distance.DOT)})
    store.create_payload_index("c", "doc_id", models.PayloadSchemaType.KEYWORD, wait=True)
    kept = "doc_id" in (store.get_collection("c").payload_schema or {})
    assert kept == traits.keeps_payload_indexes
    assert callable(getattr(type(store), "build_index", None)) == traits.builds_index_on_request


@pytest.mark.parametrize(
    "make",
    [
        lambda: QdrantClient(url="http://127.0.0.1:9", check_compatibility=False),
        lambda: QdrantClient(location="http://127.0.0.1:9", check_compatibility=False),
        lambda: QdrantClient(host="127.0.0.1", port=9, check_compatibility=False),
    ],
    ids=["url", "location=url", "host"],
)
def test_a_server_client_reports_server_traits_without_a_request(make):
    client = make()
    try:
        assert store_traits(client) == store_traits(RetryingClient(client)) == SERVER
        assert client.http is not None  # qdrant-client's own answer: a REST client exists only for a server
    finally:
        client.close()


def test_the_client_rule_matches_qdrant_clients_own_mode(tmp_path):
    """``client_traits`` reads public ``init_options``; qdrant-client's public ``http`` says which mode it chose."""
    for client in (QdrantClient(":memory:"), QdrantClient(path=str(tmp_path / "q"))):
        with pytest.raises(NotImplementedError):
            _ = client.http  # local mode has no REST client
        assert client_traits(client.init_options) == LOCAL
        client.close()


def test_the_edge_store_satisfies_the_protocol_and_a_bare_client_does_not():
    with open_store(":memory:") as store:
        assert isinstance(store, Store) and isinstance(store, EdgeStore)
    client = QdrantClient(":memory:")
    assert not isinstance(client, Store)  # qdrant-client's class declares no traits: store_traits answers for it
    client.close()


def test_an_object_declaring_nothing_is_taken_for_a_server_and_a_malformed_trait_is_refused():
    with open_store(":memory:") as store:
        assert store_traits(Mock(wraps=store)) == SERVER  # a Mock invents attributes; none is a declared trait
    bad = SimpleNamespace(kind="edge", keeps_payload_indexes="yes", builds_index_on_request=True)
    with pytest.raises(TypeError, match="keeps_payload_indexes must be a bool, got 'yes'"):
        store_traits(bad)
    with pytest.raises(ValueError, match="kind must be one of"):
        StoreTraits("cloud", keeps_payload_indexes=True, builds_index_on_request=False)  # type: ignore[arg-type]


class Declared:
    """A local-mode client dressed with declared traits: behaviour must follow these, not its class."""

    def __init__(self, traits: StoreTraits) -> None:
        self._inner = QdrantClient(":memory:")
        self.kind = traits.kind
        self.keeps_payload_indexes = traits.keeps_payload_indexes
        self.builds_index_on_request = traits.builds_index_on_request
        self.unverified_settings = traits.unverified_settings
        self.built: list[str] = []

    def build_index(self, collection_name: str, *, show_progress: bool = False) -> float:
        self.built.append(collection_name)
        return 1.5

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


@pytest.mark.parametrize("traits", [EDGE, LOCAL, SERVER], ids=lambda t: t.kind)
def test_the_writer_builds_the_index_and_logs_payload_indexes_as_the_traits_say(traits, caplog):
    store = Declared(traits)
    writer = QdrantWriter(store, spec())
    with caplog.at_level(logging.INFO, logger="qdrant_tools.spec"):
        writer.ensure()
    recorded_only = any("keeps no payload indexes" in r.getMessage() for r in caplog.records)
    assert recorded_only == (not traits.keeps_payload_indexes)
    seconds = writer.build_index()
    assert (store.built, seconds) == ((["c"], 1.5) if traits.builds_index_on_request else ([], 0.0))
    store.close()


@pytest.mark.parametrize("traits", [EDGE, LOCAL, SERVER], ids=lambda t: t.kind)
def test_validation_leaves_unverified_exactly_what_the_traits_name(traits):
    store = Declared(traits)
    full = CollectionSpec(
        name="c",
        vectors=[VectorConfig(name="v", size=4)],
        shard_number=2,
        on_disk_payload=True,
        payload_indexes=[PayloadIndex(field="doc_id")],
    )
    store.create_collection("c", vectors_config={"v": models.VectorParams(size=4, distance=models.Distance.COSINE)})
    report = validate_collection(store, full)
    set_in_spec = ("shard_number", "on_disk_payload", "payload_indexes")
    assert report.unverified == [k for k in traits.unverified_settings if k in set_in_spec]
    compared = {d.setting.split(".")[0] for d in report.differences}
    assert compared == {k for k in set_in_spec if k not in traits.unverified_settings}  # local mode keeps none
    store.close()
