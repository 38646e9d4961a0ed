"""Loaders on tiny files in each published format."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from research.eval.benchmarks.loaders import (
    SplitError,
    load_beir,
    load_benchmark,
    load_fineweb_posq,
    load_posir,
    load_shipped,
    load_squad_posq,
    read_rows,
    shipped_path,
)


def test_beir_folder_with_groups_from_query_fields(fixtures):
    b = load_beir(fixtures / "beir", "test")
    assert b.doc_ids == ("d1", "d2", "d3")
    assert b.corpus["d1"] == "Owls Owls hunt at night and sleep by day."
    assert b.corpus["d2"] == "Bees make honey from the nectar of flowers."
    assert set(b.queries) == {"q1", "q2", "q3"}  # q4 is unjudged
    assert b.qrels["q2"] == {"d2": 2.0}
    assert b.qrels["q3"] == {"d3": 1.0}  # d9 is not in the corpus
    assert b.groups == {"q1": "begin", "q2": "end"}
    assert b.group_order == ("begin", "end")


def test_beir_groups_file_wins_and_missing_split_is_explained(fixtures, tmp_path):
    folder = tmp_path / "beir"
    shutil.copytree(fixtures / "beir", folder)
    (folder / "groups.tsv").write_text("q1\tmiddle\nq3\tend\n")
    b = load_beir(folder, "test", group_order=("middle", "end"))
    assert b.groups == {"q1": "middle", "q3": "end"}
    with pytest.raises(FileNotFoundError, match=r"available splits: \['dev', 'test'\]"):
        load_beir(folder, "train")


def test_fineweb_posq_groups_and_multi_class_policy(fixtures):
    b = load_fineweb_posq(fixtures / "fineweb_posq.jsonl")
    assert len(b.corpus) == 2  # one Mars content, one penguin content
    assert [b.groups[q] for q in b.query_ids] == ["middle", "begin", "end", "begin"]
    assert b.group_order == ("begin", "middle", "end")
    mars = b.qrels["q0"]
    assert list(mars) == list(b.qrels["q2"])  # same passage
    first = load_fineweb_posq(fixtures / "fineweb_posq.jsonl", multi_class="first")
    assert first.groups["q3"] == "begin" and len(first.queries) == 5
    with pytest.raises(ValueError, match="multi_class"):
        load_fineweb_posq(fixtures / "fineweb_posq.jsonl", multi_class="all")


def test_fineweb_posq_rejects_unknown_class(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"question": "q", "content": "c", "span_class": ["start"]}) + "\n")
    with pytest.raises(ValueError, match="'start' is not one of"):
        load_fineweb_posq(p)


def test_squad_nested_buckets_by_answer_start(fixtures):
    b = load_squad_posq(fixtures / "squad.json")
    assert set(b.queries) == {"s1", "s2", "s4"}  # s3 is unanswerable
    assert b.groups == {"s1": "0-100", "s2": "200-300", "s4": "100-200"}
    assert b.group_order == ("0-100", "100-200", "200-300")
    assert len(b.corpus) == 2


def test_squad_flat_rows_and_open_last_bucket(fixtures):
    b = load_squad_posq(fixtures / "squad_flat.jsonl")
    assert b.groups == {"f1": "0-100", "f2": "500+"}
    assert len(b.corpus) == 1
    with pytest.raises(ValueError, match="edges must be increasing"):
        load_squad_posq(fixtures / "squad_flat.jsonl", edges=(200, 100))


def test_posir_bins_and_length_buckets(fixtures):
    b = load_posir(fixtures / "posir", count_tokens=lambda texts: [len(t.split()) for t in texts])
    # short doc: 100 tokens; long: 600 tokens
    assert b.position_bins == {"a": "00", "b": "10", "c": "19"}
    assert b.length_buckets == {"a": "0-512", "b": "0-512", "c": "512-1024"}
    assert b.groups == b.position_bins and "d" not in b.groups
    thirds = load_posir(fixtures / "posir", group_by="thirds")
    assert thirds.groups == {"a": "begin", "b": "middle", "c": "end"}
    assert thirds.meta["length_unit"] == "words"


def test_read_rows_gzip_and_errors(tmp_path):
    p = tmp_path / "rows.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        fh.write('{"a": 1}\n\n{"a": 2}\n')
    assert [r["a"] for r in read_rows(p)] == [1, 2]
    with pytest.raises(FileNotFoundError, match="download the benchmark"):
        list(read_rows(tmp_path / "missing.jsonl"))
    bad = tmp_path / "x.csv"
    bad.write_text("a")
    with pytest.raises(ValueError, match="unsupported file type"):
        list(read_rows(bad))


def test_shipped_needle_benchmark_splits_are_disjoint_and_balanced():
    dev, test = load_shipped("needle-prose", "dev"), load_shipped("needle-prose", "test")
    for b in (dev, test):
        assert b.group_order == ("begin", "middle", "end")
        counts = b.group_counts()
        assert len(set(counts.values())) == 1 and counts["begin"] >= 30
        assert len(b.corpus) == len(b.queries)
    assert not set(dev.corpus.values()) & set(test.corpus.values())
    assert not set(dev.queries.values()) & set(test.queries.values())


def test_shipped_manuals_benchmark_has_distractors_and_twins_in_its_own_split():
    dev, test = load_shipped("needle-manuals", "dev"), load_shipped("needle-manuals", "test")
    assert not set(dev.corpus.values()) & set(test.corpus.values())
    for b, split in ((dev, "dev"), (test, "test")):
        assert b.group_counts() == {"begin": 75, "middle": 75, "end": 75}
        assert len(b.corpus) == 225 + 60
        rows = list(read_rows(shipped_path("needle-manuals") / split / "queries.jsonl.gz"))
        twins = [d for r in rows for d in r["hard_negatives"]]
        assert len(twins) == 34 * 4 and all(d in b.corpus and d.startswith(f"{split}-d") for d in twins)


def _natural_rows(split):
    from research.eval.benchmarks.loaders import shipped_path

    return list(read_rows(shipped_path("natural-docs") / split / "queries.jsonl.gz"))


@pytest.mark.parametrize("split", ["dev", "test"])
def test_shipped_natural_docs_counts_groups_and_one_relevant_passage(split):
    b = load_shipped("natural-docs", split)
    assert b.name == f"natural-docs/{split}"
    assert b.group_order == ("begin", "middle", "end")
    assert b.group_counts() == {"begin": 40, "middle": 40, "end": 40}
    assert len(b.queries) == 120 and len(b.corpus) == 901  # every split is scored against the whole corpus
    for qid in b.query_ids:
        (relevant,) = b.qrels[qid].items()
        assert relevant[0] in b.corpus and relevant[1] == 1.0
    for row in _natural_rows(split):  # the answer is where the group says, in the relevant passage
        assert b.corpus[row["doc_id"]][row["answer_start"] : row["answer_end"]] == row["answer"]
        third = {"begin": 0, "middle": 1, "end": 2}[row["group"]]
        assert third / 3 <= row["rel_position"] < (third + 1) / 3


def test_shipped_natural_docs_splits_share_no_query_target_or_document():
    dev, test = load_shipped("natural-docs", "dev"), load_shipped("natural-docs", "test")
    assert not set(dev.queries) & set(test.queries)
    assert not set(dev.queries.values()) & set(test.queries.values())
    targets = {b.name: {d for docs in b.qrels.values() for d in docs} for b in (dev, test)}
    assert len(targets[dev.name]) == 120 and len(targets[test.name]) == 120  # one question per passage
    assert not targets[dev.name] & targets[test.name]
    documents = {s: {r["source"] for r in _natural_rows(s)} for s in ("dev", "test")}
    assert (len(documents["dev"]), len(documents["test"])) == (50, 49)
    assert not documents["dev"] & documents["test"]
    assert dict(dev.corpus) == dict(test.corpus)


def test_load_benchmark_dispatch_errors():
    with pytest.raises(ValueError, match="needs --data PATH"):
        load_benchmark("beir", None)
    with pytest.raises(ValueError, match="valid formats"):
        load_benchmark("msmarco", "x")


def test_shipped_needles_name_a_person_found_in_one_passage_only():
    from research.eval.benchmarks.loaders import read_rows, shipped_path

    for split in ("dev", "test"):
        corpus = list(read_rows(shipped_path() / split / "corpus.jsonl.gz"))
        for q in read_rows(shipped_path() / split / "queries.jsonl.gz"):
            assert q["entity"] in q["text"]
            owners = [d["_id"] for d in corpus if q["entity"] in d["text"]]
            assert owners == [q["doc_id"]]
        assert max(d["n_tokens"] for d in corpus) <= 510


# ------------------------------------------------------------------ splits (issue 11)
def _fineweb_split_folder(fixtures, tmp_path):
    """dev.jsonl holds the first two fixture rows, test.jsonl the rest."""
    rows = (fixtures / "fineweb_posq.jsonl").read_text().splitlines()
    folder = tmp_path / "fineweb"
    folder.mkdir()
    (folder / "dev.jsonl").write_text("\n".join(rows[:2]) + "\n")
    (folder / "test.jsonl").write_text("\n".join(rows[2:]) + "\n")
    return folder, rows


def test_fineweb_posq_reads_only_the_split_asked_for(fixtures, tmp_path):
    folder, rows = _fineweb_split_folder(fixtures, tmp_path)
    dev = load_benchmark("fineweb-posq", folder, split="dev")
    test = load_benchmark("fineweb-posq", folder, split="test")
    assert sorted(dev.queries.values()) == sorted(json.loads(r)["question"] for r in rows[:2])
    assert not set(dev.queries.values()) & set(test.queries.values())
    assert (dev.name, dev.meta["split"], test.name) == ("fineweb-posq/dev", "dev", "fineweb-posq/test")


def test_fineweb_posq_single_file_rejects_a_named_split(fixtures):
    with pytest.raises(SplitError) as err:
        load_benchmark("fineweb-posq", fixtures / "fineweb_posq.jsonl", split="dev")
    msg = str(err.value)
    assert msg.startswith("load_fineweb_posq: split='dev'")
    assert "single file" in msg and "split=None" in msg and "dev.jsonl and test.jsonl" in msg
    whole = load_benchmark("fineweb-posq", fixtures / "fineweb_posq.jsonl", split=None)
    assert len(whole.queries) == 4 and whole.name == "fineweb-posq"


def test_fineweb_posq_missing_split_lists_the_available_ones(fixtures, tmp_path):
    folder, _ = _fineweb_split_folder(fixtures, tmp_path)
    with pytest.raises(SplitError, match=r"load_fineweb_posq: no split 'validation' .* \['dev', 'test'\]"):
        load_fineweb_posq(folder, split="validation")


def test_squad_posq_reads_the_split_file_of_a_folder(fixtures, tmp_path):
    folder = tmp_path / "squad"
    folder.mkdir()
    shutil.copy(fixtures / "squad.json", folder / "dev-v1.1.json")
    shutil.copy(fixtures / "squad_flat.jsonl", folder / "train-v1.1.jsonl")
    dev = load_benchmark("squad-posq", folder, split="dev")
    train = load_squad_posq(folder, split="train")
    assert set(dev.queries) == {"s1", "s2", "s4"} and set(train.queries) == {"f1", "f2"}
    with pytest.raises(SplitError, match=r"no split 'test' .* available splits: \['dev', 'train'\]"):
        load_squad_posq(folder, split="test")


def test_split_error_is_both_a_missing_file_and_a_bad_value(fixtures):
    with pytest.raises(FileNotFoundError):
        load_squad_posq(fixtures / "squad.json", split="dev")
    with pytest.raises(ValueError):
        load_squad_posq(fixtures / "squad.json", split="dev")


def test_split_none_is_rejected_where_the_data_is_stored_by_split(fixtures):
    with pytest.raises(SplitError, match=r"load_needle: split=None, .* available splits: \['dev', 'test'\]"):
        load_benchmark("needle", None, split=None)
    with pytest.raises(SplitError, match=r"load_beir: split=None"):
        load_beir(fixtures / "beir", None)
