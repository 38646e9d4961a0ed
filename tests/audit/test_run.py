"""Running an audit: a truncating target is blind to the end, a whole-node one is not; errors; the report."""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser

import pytest

from llamaindex_posfair.audit import AuditInputError, ProbeConfig, RetrieverTarget, build_probes, run_audit
from llamaindex_posfair.audit.run import read_documents
from llamaindex_posfair.audit.targets import AuditTarget, Retrieved

from .conftest import splitter_target


@pytest.fixture(scope="module")
def probes(documents):
    return build_probes(documents, ProbeConfig(per_group=8, kinds=("extractive", "planted"), seed=1))


@pytest.fixture(scope="module")
def report(documents, probes):
    targets = [splitter_target("truncated at 60 words", max_words=60), splitter_target("whole node")]
    return run_audit(documents, targets, probes, top_k=10, command="posfair audit docs")


def test_a_truncating_target_is_blind_to_the_end_and_a_whole_node_one_is_not(report):
    truncated, whole = (report.summary(r, "extractive") for r in report.results)
    assert truncated["ndcg@10"]["begin"] > 0.5 > truncated["ndcg@10"]["end"]
    assert truncated["psi"] > 0.5
    assert whole["psi"] < 0.2 and min(whole["ndcg@10"].values()) > 0.6
    assert report.summary(report.results[0])["psi"] > report.summary(report.results[1])["psi"]


def test_the_paired_comparison_puts_the_whole_node_target_ahead(report):
    (comp,) = report.comparisons()
    assert comp["a"] == "whole node" and comp["b"] == "truncated at 60 words"
    assert comp["ci95"][0] > 0 and comp["psi_diff"] < 0


def test_the_same_probes_give_the_same_figures(documents, probes, report):
    again = run_audit(documents, [splitter_target("truncated at 60 words", max_words=60)], probes, top_k=10)
    assert again.summary(again.results[0]) == {
        **report.summary(report.results[0]),
        "seconds": pytest.approx(0, abs=1e9),
    }
    assert again.results[0].ndcg() == report.results[0].ndcg()


def test_examples_show_the_query_the_evidence_and_what_came_instead(report):
    examples = report.examples(report.results[0])
    assert examples and all(ex["evidence"]["position"].endswith("(end third)") for ex in examples)
    assert all(ex["returned_first"]["doc"] != ex["evidence"]["doc"] or ex["evidence_rank"] for ex in examples)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows, self.images, self.command, self._in = 0, [], "", None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr":
            self.rows += 1
        if tag == "img":
            self.images.append(a["src"])
        if a.get("id") == "command":
            self._in = "command"

    def handle_data(self, data):
        if self._in == "command":
            self.command += data

    def handle_endtag(self, tag):
        self._in = None


def test_the_html_page_holds_the_table_the_plot_and_the_command(report):
    page = _Page()
    page.feed(report.to_html())
    assert page.command == "posfair audit docs"
    rows = 1 + 2 * (1 + len(report.probes.kinds()))  # header, then per target: all probes and each kind
    assert page.rows == rows
    (src,) = page.images
    assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_json_report_is_plain_json(report):
    data = json.loads(json.dumps(report.to_dict()))
    assert data["probes"]["kinds"]["planted"] == {"begin": 8, "middle": 8, "end": 8}
    assert [t["target"] for t in data["targets"] if t["kind"] == "all"] == ["truncated at 60 words", "whole node"]
    assert len(data["by_position"]["whole node"]) == 10
    ranks = data["ranks"]["whole node"]
    assert set(ranks) == {p.id for p in report.probes.probes}
    assert all(r is None or 1 <= r <= report.top_k for r in ranks.values())


# ------------------------------------------------------------------ bad input
class _Empty(AuditTarget):
    name = "empty"

    def retrieve(self, query: str, top_k: int) -> list[Retrieved]:
        return []


def test_an_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(AuditInputError, match="no readable document"):
        read_documents(tmp_path)


def test_a_target_that_returns_nothing_is_a_clear_error(documents):
    probes = build_probes(documents, ProbeConfig(per_group=3))
    with pytest.raises(AuditInputError, match="returned no node for the first 5 probes"):
        run_audit(documents, [_Empty()], probes)


def test_planted_probes_need_a_target_the_audit_indexes(documents, probes):
    index_target = RetrieverTarget("existing", _Empty())
    with pytest.raises(AuditInputError, match="planted probes change the documents"):
        run_audit(documents, [index_target], probes)


def test_top_k_below_ten_is_refused(documents, probes):
    with pytest.raises(ValueError, match="top_k must be an integer >= 10"):
        run_audit(documents, [splitter_target("x")], probes, top_k=5)
