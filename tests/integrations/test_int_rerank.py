from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llamaindex_posfair import PosFairRerank


def nodes(texts, scores=None):
    scores = scores or [None] * len(texts)
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=s) for i, (t, s) in enumerate(zip(texts, scores))]


TEXTS = ["red apples and green pears", "the stock market fell today", "apples are red fruit", "bananas"]


def cosine_order(enc, query, texts):
    s = enc._vec(texts, enc.calibration) @ enc._vec([query], enc.calibration)[0]
    return [f"n{i}" for i in np.argsort(-s, kind="stable")]


def test_round_trips_through_to_dict(fake_encoder):
    rr = PosFairRerank(encoder=fake_encoder, top_n=3, blend_weight=0.25)
    data = rr.to_dict()
    assert data["class_name"] == PosFairRerank.__name__  # not BaseNodePostprocessor's
    again = PosFairRerank.from_dict(data, encoder=fake_encoder)
    assert again.to_dict() == data
    ranked = [n.node.node_id for n in again.postprocess_nodes(nodes(TEXTS, [0.4, 0.3, 0.2, 0.1]), query_str="apples")]
    assert ranked == [
        n.node.node_id for n in rr.postprocess_nodes(nodes(TEXTS, [0.4, 0.3, 0.2, 0.1]), query_str="apples")
    ]


def test_the_reranker_calibrates_by_default_unlike_the_embedding(monkeypatch, make_fake):
    from llamaindex_posfair import CalibrationConfig, EncoderSpec, PosFairEmbedding

    monkeypatch.setattr(EncoderSpec, "load", lambda spec, **_: make_fake(spec=spec))
    assert PosFairEmbedding().spec.calibration is None  # EncoderSpec(): the plain model of the sub-chunk layout
    assert PosFairRerank(top_n=3).spec.calibration == CalibrationConfig()  # node scoring: whole candidates
    assert PosFairRerank(top_n=3, model_name="m").spec.calibration == CalibrationConfig()
    assert PosFairRerank(top_n=3, calibration=None).spec.calibration is None
    assert PosFairRerank(top_n=3, spec=EncoderSpec()).spec.calibration is None  # a given spec is kept
    assert PosFairRerank.model_fields["spec"].default_factory().calibration == CalibrationConfig()


def test_reorders_by_encoder_cosine_and_keeps_top_n(fake_encoder):
    out = PosFairRerank(top_n=2, encoder=fake_encoder).postprocess_nodes(nodes(TEXTS), query_str="red apples")
    assert [n.node.node_id for n in out] == cosine_order(fake_encoder, "red apples", TEXTS)[:2]
    assert out[0].score >= out[1].score


def test_keep_retrieval_score_copies_first_stage_score(fake_encoder):
    out = PosFairRerank(top_n=4, encoder=fake_encoder, keep_retrieval_score=True).postprocess_nodes(
        nodes(TEXTS, [0.1, 0.2, 0.3, 0.4]), query_str="apples"
    )
    assert {n.node.node_id: n.node.metadata["retrieval_score"] for n in out} == {
        "n0": 0.1,
        "n1": 0.2,
        "n2": 0.3,
        "n3": 0.4,
    }


def test_full_blend_weight_keeps_first_stage_order(fake_encoder):
    bm25 = [3.0, 12.5, 7.1, 0.4]  # BM25-scale scores
    out = PosFairRerank(top_n=4, encoder=fake_encoder, blend_weight=1.0).postprocess_nodes(
        nodes(TEXTS, bm25), query_str="red apples"
    )
    assert [n.node.node_id for n in out] == ["n1", "n2", "n0", "n3"]
    assert out[0].score == pytest.approx(1.0) and out[-1].score == pytest.approx(0.0)


def test_partial_blend_mixes_normalised_scores(fake_encoder):
    bm25 = [3.0, 12.5, 7.1, 0.4]
    w = 0.25
    got = PosFairRerank(top_n=4, encoder=fake_encoder, blend_weight=w).postprocess_nodes(
        nodes(TEXTS, bm25), query_str="red apples"
    )
    cos = (
        fake_encoder._vec(TEXTS, fake_encoder.calibration)
        @ fake_encoder._vec(["red apples"], fake_encoder.calibration)[0]
    )
    mm = lambda x: (x - x.min()) / (x.max() - x.min())  # noqa: E731
    expected = (1 - w) * mm(cos) + w * mm(np.array(bm25))
    assert {n.node.node_id: round(n.score, 5) for n in got} == {
        f"n{i}": round(float(e), 5) for i, e in enumerate(expected)
    }


def test_scores_every_candidate_in_one_encoder_call(make_fake):
    enc = make_fake()  # the encoder batches its forward passes by spec.batch_size
    PosFairRerank(top_n=2, encoder=enc).postprocess_nodes(nodes(TEXTS), query_str="apples")
    assert [c[:2] for c in enc.calls] == [("query", 1), ("document", 4)]


def test_invalid_blend_weight_rejected(fake_encoder):
    with pytest.raises(ValueError, match="blend_weight"):
        PosFairRerank(encoder=fake_encoder, blend_weight=1.5)


def test_missing_query_raises(fake_encoder):
    with pytest.raises(ValueError, match="needs the query"):
        PosFairRerank(encoder=fake_encoder).postprocess_nodes(nodes(TEXTS))


def test_empty_candidates_return_empty(fake_encoder):
    assert PosFairRerank(encoder=fake_encoder).postprocess_nodes([], query_str="q") == []


def test_rerank_events_are_emitted(fake_encoder):
    class Collector(BaseEventHandler):
        seen: ClassVar[list] = []

        @classmethod
        def class_name(cls):
            return "Collector"

        def handle(self, event, **kwargs):
            self.seen.append(type(event).__name__)

    h = Collector(seen=[])
    get_dispatcher().add_event_handler(h)
    try:
        PosFairRerank(top_n=1, encoder=fake_encoder).postprocess_nodes(nodes(TEXTS), query_str="apples")
    finally:
        get_dispatcher().event_handlers.remove(h)
    assert h.seen.count("ReRankStartEvent") == 1 and h.seen.count("ReRankEndEvent") == 1


async def test_async_rerank_equals_sync(fake_encoder):
    r = PosFairRerank(top_n=3, encoder=fake_encoder)
    a = await r.apostprocess_nodes(nodes(TEXTS), query_bundle=QueryBundle("red apples"))
    s = r.postprocess_nodes(nodes(TEXTS), query_str="red apples")
    assert [(n.node.node_id, n.score) for n in a] == [(n.node.node_id, n.score) for n in s]


# ---------------------------------------------------------------- real MiniLM
def _late_evidence_case():
    data = Path(__file__).resolve().parents[2] / "examples" / "data"
    filler = (data / "sourdough.txt").read_text().split()[:110]
    bees = (data / "honeybees.txt").read_text().split()
    needle = (
        "The last resident keeper of the Gull Rock lighthouse was Ada Pennock, who kept the light for nineteen years."
    )
    texts = {
        "early": needle + " " + " ".join(filler),
        "late": " ".join(filler) + " " + needle,
        "distractor1": "Gull Rock lighthouse stands on a granite island off the northern coast. "
        + " ".join(bees[:110]),
        "distractor2": "Lighthouse keepers once trimmed wicks and wound clockwork every night. "
        + " ".join(bees[20:130]),
    }
    cands = [NodeWithScore(node=TextNode(text=t, id_=k), score=None) for k, t in texts.items()]
    return "Who was the last keeper of the Gull Rock lighthouse?", cands


def _ranks(rerank, query, cands):
    out = rerank.postprocess_nodes([c.model_copy() for c in cands], query_str=query)
    return [n.node.node_id for n in out]


@pytest.mark.slow
def test_calibrated_rerank_lifts_late_evidence_above_early(minilm):
    from llamaindex_posfair.integrations import CalibrationView

    query, cands = _late_evidence_case()
    plain = _ranks(PosFairRerank(top_n=4, encoder=CalibrationView(minilm, None)), query, cands)
    fair = _ranks(PosFairRerank(top_n=4, encoder=minilm), query, cands)
    assert plain.index("late") > plain.index("early")  # the plain model prefers evidence at the start
    assert fair.index("late") < fair.index("early")  # position-fair reranking lifts the late passage
    assert fair.index("late") < plain.index("late")
