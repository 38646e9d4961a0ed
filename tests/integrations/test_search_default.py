"""The default search fuses with DBSF; a collection that records weighted RRF keeps it until switched."""

from __future__ import annotations

import json
import logging

import pytest

from llamaindex_posfair.cli import main
from llamaindex_posfair.integrations import recipe as R
from llamaindex_posfair.scoring import NODE_WEIGHT
from qdrant_tools.search import RRF_SEARCH, SearchSettings, search
from qdrant_tools.sparse import Bm25Sparse
from qdrant_tools.store import open_store

QUERIES = (
    "waggle dance of honeybees",
    "how far does the water level change in the Bay of Fundy",
    "lighthouse keeper lamp",
    "movable type printing press",
    "sourdough starter flour water",
    "bees tides light bread",
    "press",
    "the moon pulls the ocean",
)


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _ranking(capsys, store: str, collection: str, query: str) -> list[str]:
    rc, out, _ = run(capsys, "query", query, "--collection", collection, "--path", store, "--json", "--top-k", "5")
    assert rc == 0
    return [r["point_id"] for r in json.loads(out)["results"]]


def _direct(store: str, collection: str, encoder, query: str, settings) -> list[str]:
    with open_store(store) as client:
        recipe = R.read_recipe(client, collection, notice=False)
        hits = search(
            client,
            collection,
            encoder.encode_queries([query], calibration=None)[0],
            settings.overridden(limit=5, vector=recipe.node_vector()),
            sparse_query=Bm25Sparse(recipe.bm25).embed_query(query),
        )
    return [h.id for h in hits]


def _points(store: str, collection: str) -> list[tuple]:
    with open_store(store) as client:
        points, _ = client.scroll(collection, limit=1000, with_vectors=True, with_payload=True)
    return sorted((str(p.id), json.dumps(p.payload, sort_keys=True), json.dumps(_plain(p.vector))) for p in points)


def _plain(vector):
    """A point's vectors as sorted plain JSON values (named dense, multi and sparse vectors alike)."""
    if isinstance(vector, dict):
        return {k: _plain(v) for k, v in sorted(vector.items())}
    if hasattr(vector, "indices"):
        return [list(vector.indices), list(vector.values)]
    return vector


def test_the_default_search_is_dbsf_with_the_measured_candidates():
    s = SearchSettings()
    assert (s.fusion, s.sparse_weight, s.rrf_k, s.fusion_limit, s.node_weight) == ("dbsf", 1.0, None, 100, 0.5)
    assert (s.prefetch_limit, s.prefetch_max, s.exact_up_to) == (300, 2000, 5000) and s.node_weight == NODE_WEIGHT
    assert R.Recipe.default().search == s
    assert RRF_SEARCH.fusion == "rrf" and (RRF_SEARCH.sparse_weight, RRF_SEARCH.rrf_k) == (1.5, 60)
    assert R.search_changes(RRF_SEARCH, s) == [
        "fusion: 'rrf' -> 'dbsf'",
        "sparse_weight: 1.5 -> 1.0",
        "rrf_k: 60 -> None",
    ]


def test_an_rrf_collection_keeps_its_ranking_until_switched_and_switching_reembeds_nothing(
    tmp_path, capsys, fake_cli, example_data, caplog
):
    store = str(tmp_path / "q")
    for name in ("old", "new"):
        rc, _, _ = run(capsys, "ingest", str(example_data), "--collection", name, "--path", store, "--no-progress")
        assert rc == 0
    with open_store(store) as client:  # "old" as written before DBSF became the default: it records RRF
        recipe = R.read_recipe(client, "old", notice=False)
        assert recipe.search == SearchSettings()
        R.write_recipe(client, "old", recipe.model_copy(update={"search": RRF_SEARCH}))
    encoder = fake_cli.encoders[0]
    rrf = {q: _direct(store, "old", encoder, q, RRF_SEARCH) for q in QUERIES}
    dbsf = {q: _direct(store, "old", encoder, q, SearchSettings()) for q in QUERIES}
    assert rrf != dbsf  # the two fusions rank these queries differently, so the checks below can tell them apart

    R._FUSION_NOTICED.discard("old")
    with caplog.at_level(logging.WARNING, logger="llamaindex_posfair"):
        assert {q: _ranking(capsys, store, "old", q) for q in QUERIES} == rrf
    notices = [r.getMessage() for r in caplog.records if "set-search old --fusion dbsf" in r.getMessage()]
    assert len(notices) == 1 and "RRF fusion" in notices[0]
    assert {q: _ranking(capsys, store, "new", q) for q in QUERIES} == dbsf

    before, calls = _points(store, "old"), len(fake_cli.calls)
    rc, out, _ = run(capsys, "collection", "set-search", "old", "--fusion", "dbsf", "--path", store)
    assert rc == 0 and "fusion: 'rrf' -> 'dbsf'" in out and "no point re-embedded" in out
    assert _points(store, "old") == before and len(fake_cli.calls) == calls
    assert {q: _ranking(capsys, store, "old", q) for q in QUERIES} == dbsf
    with open_store(store) as client:
        assert R.read_recipe(client, "old").search == SearchSettings()

    rc, out, _ = run(capsys, "collection", "set-search", "old", "--fusion", "dbsf", "--path", store)
    assert rc == 0 and "nothing changed" in out


def test_set_search_refuses_what_it_cannot_record(tmp_path, capsys, fake_cli, example_data):
    store = str(tmp_path / "q")
    run(capsys, "ingest", str(example_data), "--collection", "demo", "--path", store, "--no-progress")
    rc, _, err = run(capsys, "collection", "set-search", "nope", "--fusion", "dbsf", "--path", store)
    assert rc != 0 and "'nope' not found" in err
    rc, _, err = run(
        capsys, "collection", "set-search", "demo", "--fusion", "dbsf", "--bm25-weight", "2", "--path", store
    )
    assert rc != 0 and "--bm25-weight" in err and "DBSF takes no weights" in err
    rc, out, _ = run(capsys, "collection", "set-search", "demo", "--fusion", "rrf", "--dry-run", "--path", store)
    assert rc == 0 and "would change" in out
    with open_store(store) as client:
        assert R.read_recipe(client, "demo").search == SearchSettings()


@pytest.mark.parametrize("fusion", ["rrf", "dbsf"])
def test_switched_search_keeps_every_other_field(fusion):
    base = SearchSettings().overridden(node_weight=0.3, vector="vanilla", prefetch_limit=123, prefetch_max=456)
    s = R.switched_search(base, fusion)
    assert (s.node_weight, s.vector, s.prefetch_limit, s.prefetch_max) == (0.3, "vanilla", 123, 456)
    assert s.fusion == fusion
    with pytest.raises(ValueError, match="not fusion settings"):
        R.switched_search(base, fusion, node_weight=0.4)
