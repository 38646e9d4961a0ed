"""`posfair ingest` of a mixed-format folder, `posfair query --filter`, `--prune` and `--dry-run` end to end
(fake encoder; the real MiniLM in the slow test)."""

from __future__ import annotations

import json

import pytest
from mixed_folder import PDF_PAGES, make_mixed_folder

from llamaindex_posfair.cli import main
from qdrant_tools.payload import posfair_fields
from qdrant_tools.store import open_store

FILES = ["bees.html", "bread.md", "code/knead.py", "tides.pdf"]


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def mixed(tmp_path):
    return make_mixed_folder(tmp_path / "mixed")


def ingest(capsys, store, path, *flags):
    rc, out, err = run(capsys, "ingest", str(path), "--collection", "mix", "--path", store, "--no-progress", "--json",
                       *flags)  # fmt: skip
    return rc, (json.loads(out) if rc == 0 else None), err


def query(capsys, store, text, *flags):
    rc, out, err = run(capsys, "query", text, "--collection", "mix", "--path", store, "--json", "--top-k", "10", *flags)
    assert rc == 0, err
    return json.loads(out)["results"]


def payloads(store):
    client = open_store(store)
    try:
        points, _ = client.scroll("mix", limit=1000, with_payload=True)
    finally:
        client.close()
    return [posfair_fields(p.payload) for p in points]


def test_a_mixed_folder_ingests_as_text_without_tags_or_binary_noise(tmp_path, capsys, fake_cli, mixed):
    store = str(tmp_path / "q")
    rc, rep, _ = ingest(capsys, store, mixed)
    assert rc == 0 and sorted(rep["new"]) == FILES
    assert [s["reason"] for s in rep["skipped"]] == ["binary file (NUL byte found)"]
    texts = [p["text"] for p in payloads(store)]
    assert {p["doc_id"] for p in payloads(store)} == set(FILES)
    for noise in ("<", "\x00", "scriptnoise", "color: red", "endobj", "Helvetica"):
        assert not any(noise in t for t in texts), noise


def test_pdf_hits_carry_the_label_of_the_page_they_start_on(tmp_path, capsys, fake_cli, mixed):
    store = str(tmp_path / "q")
    ingest(capsys, store, mixed, "--chunk-tokens", "8", "--overlap-tokens", "0")
    hits = query(capsys, store, "neap tides at the quarter moons", "--filter", "file_name=tides.pdf")
    assert len(hits) >= 3 and {h["doc_id"] for h in hits} == {"tides.pdf"}
    for h in hits:
        md = h["metadata"]
        page = " ".join(PDF_PAGES[md["page_number"] - 1])
        assert md["page_label"] == str(md["page_number"]) and h["text"].split()[0] in page.split()
        assert md["page_labels"][0] == md["page_label"]
    assert {h["metadata"]["page_label"] for h in hits} == {"1", "2", "3"}


def test_query_filter_returns_only_the_matching_files(tmp_path, capsys, fake_cli, mixed):
    store = str(tmp_path / "q")
    ingest(capsys, store, mixed)
    hits = query(capsys, store, "waggle dance of the forager", "--filter", "file_type=text/markdown")
    assert [h["doc_id"] for h in hits] == ["bread.md"]
    assert hits[0]["metadata"]["file_type"] == "text/markdown"
    code = query(capsys, store, "knead", "--filter", "file_name!=bread.md", "--filter", "file_type=text/x-python")
    assert [h["doc_id"] for h in code] == ["code/knead.py"]


def test_a_numeric_range_filter_on_user_metadata(tmp_path, capsys, fake_cli):
    store = str(tmp_path / "q")
    for year in (2019, 2021, 2023):
        folder = tmp_path / f"y{year}"
        folder.mkdir()
        (folder / f"report{year}.md").write_text(f"Annual tide report for {year}.")
        assert ingest(capsys, store, folder, "--metadata", f"year={year}", "--metadata", "team=harbour")[0] == 0
    hits = query(capsys, store, "annual tide report", "--filter", "year>=2020", "--filter", "team=harbour")
    assert sorted(h["doc_id"] for h in hits) == ["report2021.md", "report2023.md"]
    assert {h["metadata"]["year"] for h in hits} == {2021, 2023}
    assert [h["doc_id"] for h in query(capsys, store, "tide", "--filter", "year<2020")] == ["report2019.md"]


def test_an_unknown_filter_operator_is_refused(tmp_path, capsys, fake_cli, mixed):
    store = str(tmp_path / "q")
    ingest(capsys, store, mixed)
    rc, _, err = run(capsys, "query", "tides", "--collection", "mix", "--path", store, "--filter", "year=>2020")
    assert rc == 2 and "posfair query: error: --filter 'year=>2020': unknown operator '=>'" in err


def test_a_rerun_writes_nothing(tmp_path, capsys, fake_cli, mixed):
    store = str(tmp_path / "q")
    first = ingest(capsys, store, mixed, "--metadata", "team=docs")[1]
    again = ingest(capsys, store, mixed, "--metadata", "team=docs")[1]
    assert first["chunks_written"] > 0
    assert again["chunks_written"] == again["chunks_deleted"] == 0 and sorted(again["unchanged"]) == FILES


def test_prune_on_a_single_file_is_refused_and_writes_nothing(tmp_path, capsys, fake_cli, mixed):
    store = str(tmp_path / "q")
    ingest(capsys, store, mixed)
    before = payloads(store)
    rc, _, err = ingest(capsys, store, mixed / "bread.md", "--prune")
    assert rc == 2 and "--prune with the single file" in err and "nothing was written" in err
    assert payloads(store) == before


def test_prune_of_a_subfolder_keeps_the_rest(tmp_path, capsys, fake_cli, mixed):
    store = str(tmp_path / "q")
    (mixed / "code" / "rise.py").write_text("def rise(dough):\n    return dough + 1\n")
    ingest(capsys, store, mixed)
    (mixed / "code" / "rise.py").unlink()
    rc, rep, _ = ingest(capsys, store, mixed / "code", "--prune")
    assert rc == 0 and rep["pruned"] == ["code/rise.py"] and rep["unchanged"] == ["code/knead.py"]
    assert {p["doc_id"] for p in payloads(store)} == set(FILES)


def test_dry_run_prints_the_plan_and_creates_nothing(tmp_path, capsys, fake_cli, mixed):
    store = tmp_path / "q"
    rc, out, _ = run(capsys, "ingest", str(mixed), "--collection", "mix", "--path", str(store), "--dry-run")
    assert rc == 0 and not store.exists()
    assert "would add 4: bees.html, bread.md, code/knead.py, tides.pdf" in out and "nothing written" in out


def test_dry_run_lists_what_would_be_replaced_and_removed_and_writes_nothing(tmp_path, capsys, fake_cli, mixed):
    store = str(tmp_path / "q")
    ingest(capsys, store, mixed)
    before = payloads(store)
    (mixed / "bread.md").write_text("# Sourdough\n\nFeed the starter twice a day.\n")
    (mixed / "bees.html").unlink()
    rc, out, _ = run(capsys, "ingest", str(mixed), "--collection", "mix", "--path", store, "--prune", "--dry-run",
                     "--json")  # fmt: skip
    plan = json.loads(out)
    assert rc == 0 and plan["dry_run"] is True
    assert (plan["add"], plan["replace"], plan["remove"]) == ([], ["bread.md"], ["bees.html"])
    assert sorted(plan["unchanged"]) == ["code/knead.py", "tides.pdf"]
    assert payloads(store) == before


@pytest.mark.slow
def test_mixed_folder_on_real_minilm_finds_the_pdf_page_and_reruns_idempotently(tmp_path, capsys, mixed):
    store = str(tmp_path / "q")
    rc, first, err = ingest(capsys, store, mixed, "--chunk-tokens", "24", "--overlap-tokens", "0")
    assert rc == 0 and sorted(first["new"]) == FILES, err
    hits = query(capsys, store, "Which tides come at the quarter moons?", "--filter", "file_type=application/pdf")
    assert hits[0]["doc_id"] == "tides.pdf" and hits[0]["metadata"]["page_label"] == "2"
    assert "quarter moons" in hits[0]["text"]
    again = ingest(capsys, store, mixed, "--chunk-tokens", "24", "--overlap-tokens", "0")[1]
    assert again["chunks_written"] == 0 and sorted(again["unchanged"]) == FILES
