"""One mixed folder through both paths into posfair: a LlamaIndex app's
``VectorStoreIndex.from_documents(SimpleDirectoryReader(folder, recursive=True).load_data(), ...)`` over
:class:`PosFairVectorStore`, and ``posfair ingest FOLDER --collection C``; they store the same files and answer
each question with the same file first.

The folder (``tests/mixed_folder.py``, :func:`make_package_folder`): a two-page PDF, a Word document (``.docx``,
read by LlamaIndex's ``DocxReader`` through docx2txt, in the ``readers`` extra), an HTML page, Markdown, a Python
package (an empty ``__init__.py`` and a module) and a JSON file. No ``.pptx``: LlamaIndex's ``PptxReader`` loads an
image-captioning model from the Hugging Face hub, which cannot be reached here.

Where the two paths legitimately differ, they are compared at the level that must agree (the files stored, the
page labels of PDF hits, the file of each question's first hit):

- LlamaIndex's reader gives one ``Document`` per PDF page, with its ``page_label``; ``posfair ingest`` reads the
  PDF as one document whose chunks carry the page they start on (``page_label``) and the pages they span
  (``page_labels``).
- ``SimpleDirectoryReader`` reads HTML as its raw text (tags and script included); ``posfair ingest`` reads the
  text of its ``<body>``.
- The empty ``__init__.py`` is an empty ``Document`` for LlamaIndex, which the store skips (counted in
  ``empty_nodes_skipped``); ``posfair ingest`` skips the file as having no text.

Storage and filters run on a fake encoder against Qdrant Edge and qdrant-client's local mode; the rankings on
the real bundled MiniLM (marked slow).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
from llama_index.core.readers.file.base import default_file_metadata_func
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
from mixed_folder import make_package_folder

from llamaindex_posfair import PosFairEmbedding, PosFairVectorStore
from llamaindex_posfair.cli import main
from llamaindex_posfair.encoders.view import CalibrationView
from llamaindex_posfair.integrations.retriever import PosFairRetriever
from qdrant_tools.chunking import STORE_FOLDER_REASON
from qdrant_tools.payload import posfair_fields
from qdrant_tools.store import open_store

#: The files with text, by path relative to the folder (the empty ``kitchen/__init__.py`` is not stored).
STORED = ["bees.html", "bread.md", "garden.docx", "kitchen/knead.py", "lighthouse.json", "tides.pdf"]
#: When each file was last modified (set as ``modified`` metadata through ``file_metadata=``).
MODIFIED = {
    "garden.docx": dt.datetime(2024, 1, 2, 9, 0),
    "tides.pdf": dt.datetime(2024, 1, 15, 8, 0),
    "bees.html": dt.datetime(2024, 2, 20, 12, 30),
    "bread.md": dt.datetime(2024, 3, 5),
    "__init__.py": dt.datetime(2024, 3, 6),
    "knead.py": dt.datetime(2024, 4, 1, 23, 59),
    "lighthouse.json": dt.datetime(2024, 5, 9),
}
#: A question per distinctive fact, with the file (and PDF page) that states it.
QUESTIONS = [
    ("Which tides come at the quarter moons?", "tides.pdf", "2"),
    ("When do spring tides rise highest?", "tides.pdf", "1"),
    ("Which dance does a honeybee forager perform to point at nectar?", "bees.html", None),
    ("What flour is the sourdough starter fed with every morning?", "bread.md", None),
    ("How many times is the dough folded when it is kneaded?", "knead.py", None),
    ("How often does the Fastnet lighthouse lamp flash?", "lighthouse.json", None),
    ("How many days are tomato seedlings hardened off before planting?", "garden.docx", None),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_package_folder(tmp_path_factory.mktemp("one-path") / "folder")


def _with_modified(path: str) -> dict:
    return {**default_file_metadata_func(path), "modified": MODIFIED[Path(path).name]}


def _load(folder: Path) -> list:
    return SimpleDirectoryReader(str(folder), recursive=True, file_metadata=_with_modified).load_data()


def _index(folder: Path, store: PosFairVectorStore, embed) -> VectorStoreIndex:
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(_load(folder), storage_context=storage, embed_model=embed)


def _relative(folder: Path, node) -> str:
    return Path(node.metadata["file_path"]).relative_to(folder).as_posix()


@pytest.fixture
def embed(make_fake):
    return PosFairEmbedding(encoder=make_fake(dimension=64, max_length=64, calibration=None))


@pytest.fixture
def indexed(client, embed, folder):
    """The folder indexed by LlamaIndex into a PosFairVectorStore on each embedded engine (fake encoder)."""
    store = PosFairVectorStore("docs", client=client, embed_model=embed)
    return store, _index(folder, store, embed)


def test_every_file_with_text_is_stored_and_the_empty_init_file_is_skipped(indexed, folder):
    store, _ = indexed
    nodes = store.get_nodes()
    assert sorted({_relative(folder, n) for n in nodes}) == STORED
    assert store.empty_nodes_skipped == 1
    pdf = [n for n in nodes if n.metadata["file_name"] == "tides.pdf"]
    assert sorted(n.metadata["page_label"] for n in pdf) == ["1", "2"]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (
            [("modified", FilterOperator.GTE, "2024-02-20T12:30:00"), ("modified", FilterOperator.LT, "2024-04-02")],
            {"bees.html", "bread.md", "knead.py"},
        ),
        ([("modified", FilterOperator.GT, "2024-04-01T23:59:00")], {"lighthouse.json"}),
        ([("modified", FilterOperator.LTE, "2024-01-15T08:00:00")], {"garden.docx", "tides.pdf"}),
    ],
)
def test_a_datetime_range_filter_returns_exactly_the_nodes_in_range(indexed, filters, expected):
    store, index = indexed
    flt = MetadataFilters(filters=[MetadataFilter(key=k, operator=op, value=v) for k, op, v in filters])
    everything = store.get_nodes()
    in_range = {n.node_id for n in everything if n.metadata["file_name"] in expected}
    assert len(in_range) == len(expected) + ("tides.pdf" in expected)  # the PDF: a node per page
    assert {n.node_id for n in store.get_nodes(filters=flt)} == in_range
    hits = index.as_retriever(similarity_top_k=len(everything), filters=flt).retrieve("tides bees bread dough lamp")
    assert {h.node.node_id for h in hits} == in_range


# ----------------------------------------------------------------------------------------------- real MiniLM
@pytest.fixture(scope="module")
def minilm_index(minilm, folder, tmp_path_factory):
    """The folder indexed by LlamaIndex into a PosFairVectorStore on disk (Qdrant Edge), on the real MiniLM."""
    embed = PosFairEmbedding(encoder=minilm)
    store = PosFairVectorStore("docs", path=str(tmp_path_factory.mktemp("li") / "q"), embed_model=embed)
    yield store, _index(folder, store, embed)
    store.close()


def _first_files(retriever) -> list[str]:
    return [retriever.retrieve(q)[0].node.metadata["file_name"] for q, _, _ in QUESTIONS]


@pytest.mark.slow
def test_the_second_pages_fact_is_found_on_page_2(minilm_index):
    _, index = minilm_index
    question, file_name, page = QUESTIONS[0]
    hit = index.as_retriever(similarity_top_k=3).retrieve(question)[0]
    assert hit.node.metadata["file_name"] == file_name and hit.node.metadata["page_label"] == page == "2"
    assert "quarter moons" in hit.node.get_content()


def _cli(capsys, *argv) -> dict:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def _ingest(capsys, folder: Path, path: str) -> dict:
    return _cli(capsys, "ingest", str(folder), "--collection", "C", "--path", path, "--no-progress", "--json")


def test_posfair_ingest_stores_the_same_files_with_their_page_labels(indexed, folder, fake_cli, tmp_path, capsys):
    store, _ = indexed
    path = str(tmp_path / "q")
    report = _ingest(capsys, folder, path)
    assert sorted(report["new"]) == STORED
    assert [s["source"] for s in report["skipped"]] == [str(folder / "kitchen" / "__init__.py")]
    client = open_store(path)
    try:
        payloads = [p.payload for p in client.scroll("C", limit=1000, with_payload=True)[0]]
    finally:
        client.close()
    assert sorted({posfair_fields(p)["doc_id"] for p in payloads}) == STORED
    assert {p["file_name"] for p in payloads} == {n.metadata["file_name"] for n in store.get_nodes()}
    pdf = [posfair_fields(p) for p in payloads if p["file_name"] == "tides.pdf"]
    assert {f["page_label"] for f in pdf} <= {"1", "2"} and {x for f in pdf for x in f["page_labels"]} == {"1", "2"}


@pytest.mark.slow
def test_both_paths_answer_each_question_with_the_same_first_file(minilm_index, minilm, folder, tmp_path, capsys):
    _, index = minilm_index
    path = str(tmp_path / "q")
    assert sorted(_ingest(capsys, folder, path)["new"]) == STORED
    plain = CalibrationView(minilm, None)  # posfair ingest writes plain sub-chunk vectors: the same model, uncalibrated
    retriever = PosFairRetriever.from_path(path, "C", encoder=plain, similarity_top_k=3)
    try:
        ingested = _first_files(retriever)
    finally:
        retriever.close()
    expected = [file_name for _, file_name, _ in QUESTIONS]
    assert _first_files(index.as_retriever(similarity_top_k=3)) == ingested == expected

    question, _, page = QUESTIONS[0]
    (hit, *_) = _cli(capsys, "query", question, "--collection", "C", "--path", path, "--json", "--top-k", "3")[
        "results"
    ]
    assert hit["doc_id"] == "tides.pdf" and page in hit["metadata"]["page_labels"]


def test_a_store_inside_the_ingested_folder_is_not_read_as_documents(fake_cli, tmp_path, capsys):
    inside = tmp_path / "folder"
    make_package_folder(inside)
    path = str(inside / "q")
    assert sorted(_ingest(capsys, inside, path)["new"]) == STORED
    again = _ingest(capsys, inside, path)  # the store's own JSON files are there now
    assert again["new"] == [] and sorted(again["unchanged"]) == STORED
    assert {"source": path, "reason": STORE_FOLDER_REASON} in again["skipped"]
