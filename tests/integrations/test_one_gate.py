"""One gate: every reader and writer of a collection accepts and refuses the same encoders.

A collection is written through ``PosFairVectorStore`` by a tiny random BERT (plain, float32). Each case is
an encoder; each path is one way to read or write the collection; every path asks
:class:`~llamaindex_posfair.integrations.gate.Gate`. The test checks this table (A: accepted, A*: accepted with
one notice, R: refused with an error naming the collection and the fix, nothing written; -: not expressible):

=============================  ===========  =========  =========  ======  =============  =====================
case \\ path                    store query  store add  retriever  rerank  posfair query  posfair serve --coll.
=============================  ===========  =========  =========  ======  =============  =====================
same encoder                   A            A          A          A       A              A
other calibration              R            R          R          R       R              R
other precision (bfloat16)     A*           R          A*         A*      A*             A*
other weights (checkpoint)     R            R          R          R       R              R
LlamaIndex embedding, same     A            A          -          -       -              -
another model of the same dim  R            R          R          R       R              R
LlamaIndex embedding, other    R            R          -          -       -              -
=============================  ===========  =========  =========  ======  =============  =====================

"-": ``PosFairRetriever``, ``PosFairRerank.from_collection`` and the CLI take an ``EncoderSpec``, a loaded
posfair encoder or model flags, never a LlamaIndex embedding object; those combinations are not generated
(they are neither run nor skipped). The paths: ``store query`` builds the store with the embed model and
queries it; ``store add`` adds a node embedded by it (the points are counted before and after);
``retriever`` is ``PosFairRetriever(encoder=...)``; ``rerank`` is ``PosFairRerank.from_collection(encoder=...)``;
``posfair query`` runs the command with the model flags of the case; ``posfair serve`` settles the served spec
with ``llamaindex_posfair.cli.serve._encoder_spec`` (what ``posfair serve --collection`` runs; Ray is not started).

The store's check of the embeddings an index sends without an embed model runs on the shared fake encoder
(both embedded engines) at the end.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from typing import Any

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from llamaindex_posfair import CalibrationConfig, EncoderSpec, PosFairEmbedding, PosFairVectorStore
from qdrant_tools.spec import CollectionMismatchError
from qdrant_tools.store import open_store

TEXTS = ["Honeybees dance to share the direction of flowers.", "The moon raises two tidal bulges in the ocean."]
COLLECTION = "c"
PATHS = ("store query", "store add", "retriever", "rerank", "posfair query", "posfair serve")
A, N, R = "accept", "accept with a notice", "refuse"
#: case -> the answer of each path of :data:`PATHS` (``None``: not expressible on that path).
TABLE: dict[str, tuple[str | None, ...]] = {
    "same encoder": (A, A, A, A, A, A),
    "other calibration": (R, R, R, R, R, R),
    "other precision": (N, R, N, N, N, N),
    "other weights": (R, R, R, R, R, R),
    "LlamaIndex embedding, same model": (A, A, None, None, None, None),
    "another model of the same size": (R, R, R, R, R, R),
    "LlamaIndex embedding, other model": (R, R, None, None, None, None),
}


class Twin(BaseEmbedding):
    """A non-posfair LlamaIndex embedding computing ``encoder``'s vectors (or a rotated copy: another model)."""

    _encoder: Any = PrivateAttr()
    _rotate: bool = PrivateAttr()

    def __init__(self, encoder: Any, rotate: bool = False, model_name: str = "twin") -> None:
        super().__init__(model_name=model_name)
        self._encoder, self._rotate = encoder, rotate

    def _vec(self, texts: list[str], role: str) -> list[list[float]]:
        out = getattr(self._encoder, f"encode_{role}")(texts)
        return [[float(x) for x in (np.roll(v, 7) if self._rotate else v)] for v in out]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vec([query], "queries")[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vec([text], "documents")[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


@pytest.fixture(scope="session")
def other_checkpoint_path(tmp_path_factory, tiny_bert_path) -> str:
    """Another checkpoint of the tiny BERT: the same architecture and tokenizer, its weights moved."""
    import torch
    from sentence_transformers import SentenceTransformer

    folder = tmp_path_factory.mktemp("tiny_bert_other") / "st"
    shutil.copytree(tiny_bert_path, folder)
    model = SentenceTransformer(str(folder), device="cpu")
    torch.manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save(str(folder))
    return str(folder)


@pytest.fixture(scope="session")
def specs(tiny_bert_path, tiny_qwen3_path, other_checkpoint_path) -> dict[str, EncoderSpec]:
    same = EncoderSpec(model=tiny_bert_path, calibration=None, dtype="float32")
    return {
        "same encoder": same,
        "other calibration": same.with_calibration(CalibrationConfig(basket_size=16, strength=0.5)),
        "other precision": same.model_copy(update={"dtype": "bfloat16"}),
        "other weights": same.model_copy(update={"model": other_checkpoint_path}),
        "another model of the same size": same.model_copy(update={"model": tiny_qwen3_path}),
    }


@pytest.fixture(scope="session")
def load(specs):
    """The loaded encoder of a case (each loaded once per session)."""
    loaded: dict[str, Any] = {}

    def encoder(case: str) -> Any:
        if case not in loaded:
            loaded[case] = specs[case].load()
        return loaded[case]

    return encoder


def _embed_model(case: str, load) -> Any:
    """The case as a LlamaIndex embed model: a ``PosFairEmbedding`` of its encoder, or a non-posfair one."""
    if case == "LlamaIndex embedding, same model":
        return Twin(load("same encoder"))
    if case == "LlamaIndex embedding, other model":
        return Twin(load("another model of the same size"), model_name="qwen3")
    return PosFairEmbedding(encoder=load(case))


def _flags(spec: EncoderSpec) -> list[str]:
    """The model flags that describe ``spec``."""
    cal = spec.calibration
    cal_flags = ["--no-calibration"] if cal is None else ["--basket-size", str(cal.basket_size), "--strength", "0.5"]
    return ["--model", spec.model, "--dtype", spec.dtype, *cal_flags]


@pytest.fixture
def written(tmp_path, load) -> str:
    """An embedded store folder holding collection ``c``, written by the "same encoder" case; closed."""
    folder = str(tmp_path / "q")
    client = open_store(folder)
    try:
        embed = PosFairEmbedding(encoder=load("same encoder"))
        nodes = [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(TEXTS)]
        for n in nodes:
            n.embedding = embed.get_text_embedding(n.get_content(metadata_mode="embed"))
        PosFairVectorStore(COLLECTION, client=client, embed_model=embed).add(nodes)
    finally:
        client.close()
    return folder


def _count(folder: str) -> int:
    client = open_store(folder)
    try:
        return client.count(COLLECTION, exact=True).count
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------- the paths
def _store_query(folder: str, case: str, load, specs) -> None:
    client = open_store(folder)
    try:
        embed = _embed_model(case, load)
        store = PosFairVectorStore(COLLECTION, client=client, embed_model=embed)
        query = VectorStoreQuery(query_embedding=embed.get_query_embedding("tides"), query_str="tides")
        assert store.query(query).ids
    finally:
        client.close()


def _store_add(folder: str, case: str, load, specs) -> None:
    client = open_store(folder)
    try:
        embed = _embed_model(case, load)
        node = TextNode(text="Sourdough rises overnight in a warm kitchen.", id_="n9")
        node.embedding = embed.get_text_embedding(node.get_content(metadata_mode="embed"))
        PosFairVectorStore(COLLECTION, client=client, embed_model=embed).add([node])
    finally:
        client.close()


def _retriever(folder: str, case: str, load, specs) -> None:
    from llamaindex_posfair import PosFairRetriever

    client = open_store(folder)
    try:
        assert PosFairRetriever(client, COLLECTION, encoder=load(case), similarity_top_k=1).retrieve("tides")
    finally:
        client.close()


def _rerank(folder: str, case: str, load, specs) -> None:
    from llamaindex_posfair import PosFairRerank

    client = open_store(folder)
    try:
        rerank = PosFairRerank.from_collection(client, COLLECTION, top_n=1, encoder=load(case))
    finally:
        client.close()
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=0.0) for i, t in enumerate(TEXTS)]
    assert len(rerank.postprocess_nodes(nodes, query_str="tides")) == 1


def _cli_query(folder: str, case: str, load, specs) -> None:
    from llamaindex_posfair.cli import main

    argv = ["query", "tides", "--collection", COLLECTION, "--path", folder, "--json", *_flags(specs[case])]
    if main(argv) != 0:
        raise _CliRefusal(argv)


def _serve_spec(folder: str, case: str, load, specs) -> None:
    from llamaindex_posfair.cli import build_parser
    from llamaindex_posfair.cli.options import CliError
    from llamaindex_posfair.cli.serve import _encoder_spec

    args = build_parser().parse_args(["serve", "--collection", COLLECTION, "--path", folder, *_flags(specs[case])])
    try:
        served = _encoder_spec(args)
    except CliError as exc:
        raise _CliRefusal(str(exc)) from None
    assert served.model == specs["same encoder"].model and served.calibration is None


class _CliRefusal(Exception):
    """A command refused (exit status 2; its message is on stderr)."""


RUN = dict(zip(PATHS, (_store_query, _store_add, _retriever, _rerank, _cli_query, _serve_spec), strict=True))
CELLS = [
    pytest.param(case, path, want, id=f"{case} / {path}")
    for case, answers in TABLE.items()
    for path, want in zip(PATHS, answers, strict=True)
    if want is not None
]


@pytest.mark.parametrize(("case", "path", "want"), CELLS)
def test_every_path_gives_the_tables_answer(case, path, want, written, load, specs, capsys, caplog, monkeypatch):
    from llamaindex_posfair.encoders import precision

    monkeypatch.setattr(precision, "_noticed", set())
    before = _count(written)
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        try:
            RUN[path](written, case, load, specs)
            got, message = (N if any("rankings agree" in r.getMessage() for r in caplog.records) else A), ""
        except (CollectionMismatchError, _CliRefusal) as exc:
            got, message = R, str(exc)
    err = capsys.readouterr().err
    assert got == want, message or err
    if got == R:
        shown = err if path == "posfair query" else message
        assert f"collection {COLLECTION!r}" in shown and "new collection" in shown, shown
    added = path == "store add" and got != R
    assert _count(written) == before + added  # a refused writer writes no point


def test_a_refusal_names_the_collections_encoder_and_the_refused_one(written, load, tiny_bert_path, tiny_qwen3_path):
    with pytest.raises(CollectionMismatchError) as info:
        _retriever(written, "another model of the same size", load, None)
    message = str(info.value)
    assert tiny_bert_path in message and tiny_qwen3_path in message and "model:" in message


# ---------------------------------------------------------------- embeddings an index sends (no embed model)
@pytest.fixture
def fake(make_fake):
    return make_fake(dimension=64, max_length=64, calibration=None)


@pytest.fixture
def collection(client, fake, monkeypatch):
    """A collection written through a PosFairEmbedding of the fake encoder; the fake loads for its spec."""
    monkeypatch.setattr("llamaindex_posfair.encoders.spec.EncoderSpec.load", lambda self, *a, **k: fake)
    embed = PosFairEmbedding(encoder=fake)
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    nodes = [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(TEXTS)]
    for n in nodes:
        n.embedding = embed.get_text_embedding(n.get_content(metadata_mode="embed"))
    store.add(nodes)
    return embed


def _points(client) -> int:
    return client.count("docs", exact=True).count


def test_a_non_posfair_embedding_of_another_model_is_refused_naming_both(client, collection):
    with pytest.raises(
        CollectionMismatchError,
        match=r"MockEmbedding\('unknown'\) is not the encoder of collection 'docs' \(fake-model\)",
    ):
        PosFairVectorStore("docs", client=client, embed_model=MockEmbedding(embed_dim=64))
    with pytest.raises(CollectionMismatchError, match=r"gives 384-dimensional vectors.*64-dimensional"):
        PosFairVectorStore("docs", client=client, embed_model=MockEmbedding(embed_dim=384))
    assert _points(client) == 2


def test_an_index_with_another_model_never_writes_a_point(client, collection, fake):
    store = PosFairVectorStore("docs", client=client)
    other = Twin(fake, rotate=True)  # the same size, other vectors
    nodes = [TextNode(text="Sourdough rises overnight.", id_="n9"), TextNode(text="Bread needs flour.", id_="n8")]
    for n in nodes:
        n.embedding = other.get_text_embedding(n.get_content(metadata_mode="embed"))
    with pytest.raises(CollectionMismatchError, match=r"node 'n9'.*nothing was written"):
        store.add(nodes)
    assert _points(client) == 2
    query = VectorStoreQuery(query_embedding=other.get_query_embedding("tides"), query_str="tides", similarity_top_k=2)
    with pytest.raises(CollectionMismatchError, match="the query"):
        store.query(query)


def test_an_index_with_the_collections_encoder_writes_and_queries(client, collection):
    store = PosFairVectorStore("docs", client=client)
    node = TextNode(text="Sourdough rises overnight.", id_="n9")
    node.embedding = collection.get_text_embedding(node.get_content(metadata_mode="embed"))
    store.add([node])
    query = VectorStoreQuery(
        query_embedding=collection.get_query_embedding("moon tides"), query_str="moon tides", similarity_top_k=2
    )
    assert store.query(query).nodes[0].node_id == "n1"
    assert _points(client) == 3


def test_the_gate_is_one_rule_for_specs_and_loaded_encoders(specs, load):
    from llamaindex_posfair.integrations.gate import FingerprintMismatchError, Gate

    same = load("same encoder").spec
    gate = Gate(COLLECTION, "vanilla", same, same.fingerprint())
    for case, spec in specs.items():
        answers = []
        for candidate in (spec, load(case)):
            try:
                gate.check_reader(candidate)
                answers.append(A)
            except FingerprintMismatchError:
                answers.append(R)
        assert answers[0] == answers[1] == (A if TABLE[case][2] in (A, N) else R), case
    with pytest.raises(FingerprintMismatchError, match="was written in float32, but .* computes bfloat16"):
        gate.check_writer(specs["other precision"])
    unhashed = dataclasses.replace(gate, stored=None)  # no fingerprint recorded yet: the recorded fields decide
    assert unhashed.check_writer(load("same encoder")) is None
    with pytest.raises(FingerprintMismatchError, match="it differs in model"):
        unhashed.check_reader(load("another model of the same size"))


def test_run_time_settings_of_the_embed_model_do_not_stop_a_write(written, specs):
    """Device and batch size are the app's own: a ``PosFairEmbedding`` that names them adds nodes."""
    spec = specs["same encoder"].model_copy(update={"device": "cpu", "batch_size": 3})
    embed = PosFairEmbedding(encoder=spec.load())
    client = open_store(written)
    try:
        node = TextNode(text="Sourdough rises overnight in a warm kitchen.", id_="n9")
        node.embedding = embed.get_text_embedding(node.get_content(metadata_mode="embed"))
        PosFairVectorStore(COLLECTION, client=client, embed_model=embed).add([node])
        assert client.count(COLLECTION, exact=True).count == len(TEXTS) + 1
    finally:
        client.close()
