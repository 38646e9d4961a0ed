"""EncoderWorker (no Ray): batched jobs give the in-process vectors and scores; passes stay in the token budget."""

from __future__ import annotations

import numpy as np
import pytest

from llamaindex_posfair.integrations.encoder_site import InProcessEncoder
from llamaindex_posfair.serve.worker import EmbedJob, EncoderWorker, RerankJob

WORDS = "the river carried silt past old mills and quiet towns toward the sea".split()
TEXTS = ["short", " ".join(WORDS * 3), " ".join(WORDS * 12), " ".join(WORDS), "what carried the silt?"]


class Recorder:
    """Forwards to an encoder and records the texts of every forward pass."""

    def __init__(self, encoder):
        self._encoder = encoder
        self.passes: list[list[str]] = []

    def __getattr__(self, name):
        return getattr(self._encoder, name)

    def encode_queries(self, texts, **kw):
        self.passes.append(list(texts))
        return self._encoder.encode_queries(texts, **kw)

    def encode_documents(self, texts, **kw):
        self.passes.append(list(texts))
        return self._encoder.encode_documents(texts, **kw)


def test_mixed_jobs_equal_in_process_vectors(tiny_encoder):
    worker = EncoderWorker(tiny_encoder.spec, token_budget=16384, encoder=tiny_encoder)
    jobs = [EmbedJob(tuple(TEXTS[:2]), "query"), EmbedJob(tuple(TEXTS), "document"), EmbedJob((TEXTS[4],), "query")]
    out = worker.embed_batch(jobs)
    np.testing.assert_allclose(out[0].vectors, tiny_encoder.encode_queries(TEXTS[:2]), atol=1e-5)
    np.testing.assert_allclose(out[1].vectors, tiny_encoder.encode_documents(TEXTS), atol=1e-5)
    np.testing.assert_allclose(out[2].vectors, tiny_encoder.encode_queries(TEXTS[4:]), atol=1e-5)


def test_forward_passes_stay_within_the_token_budget(tiny_encoder):
    rec = Recorder(tiny_encoder)
    budget = 200
    worker = EncoderWorker(tiny_encoder.spec, token_budget=budget, encoder=rec)
    [out] = worker.embed_batch([EmbedJob(tuple(TEXTS), "document")])
    assert len(rec.passes) > 1
    for texts in rec.passes:
        padded = len(texts) * max(tiny_encoder.count_tokens(texts))
        assert padded <= budget or len(texts) == 1
    np.testing.assert_allclose(out.vectors, tiny_encoder.encode_documents(TEXTS), atol=1e-5)


def test_truncated_texts_and_tokens_are_counted(tiny_encoder):
    spec = tiny_encoder.spec.model_copy(update={"max_length": 16})
    short = spec.load()
    [out] = EncoderWorker(spec, token_budget=4096, encoder=short).embed_batch([EmbedJob(tuple(TEXTS), "document")])
    counts = short.count_tokens(TEXTS)
    assert out.truncated == sum(n > 16 for n in counts) == 2
    assert out.tokens == sum(min(n, 16) for n in counts)


def test_rerank_batch_scores_as_the_in_process_reranker(tiny_encoder):
    worker = EncoderWorker(tiny_encoder.spec, token_budget=512, encoder=tiny_encoder)
    jobs = [RerankJob("silt", tuple(TEXTS)), RerankJob("towns", tuple(TEXTS[::-1]))]
    got = worker.rerank_batch(jobs)
    local = InProcessEncoder(tiny_encoder)
    for job, scores in zip(jobs, got):
        np.testing.assert_allclose(scores, local.scores(job.query, list(job.documents)), atol=1e-5)


@pytest.mark.parametrize("scoring", ["subchunks", "weighted"])
def test_rerank_batch_scores_subchunks_as_the_in_process_reranker(tiny_encoder, scoring):
    from llamaindex_posfair.integrations.node_scoring import ScoringSettings
    from qdrant_tools.subchunks import SubchunkConfig

    docs = [". ".join(" ".join(WORDS[i : i + 4]) for i in range(0, len(WORDS), 3)) + ".", "A mill. The sea."]
    settings = ScoringSettings(scoring, SubchunkConfig(8, 0), 0.4)
    worker = EncoderWorker(tiny_encoder.spec, token_budget=512, encoder=tiny_encoder)
    jobs = [RerankJob("silt", tuple(docs), settings), RerankJob("towns", tuple(TEXTS[::-1]))]
    got = worker.rerank_batch(jobs)
    local = InProcessEncoder(tiny_encoder)
    np.testing.assert_allclose(got[0], local.scores("silt", docs, settings), atol=1e-5)
    np.testing.assert_allclose(got[1], local.scores("towns", TEXTS[::-1]), atol=1e-5)
    from llamaindex_posfair.scoring import cosine_matrix
    from qdrant_tools.encoding import spans_for
    from qdrant_tools.subchunks import subchunk_text

    q = tiny_encoder.encode_queries(["silt"])[0]
    pieces = [[p.text for p in subchunk_text(d, settings.subchunks, spans_for(tiny_encoder)[0])] for d in docs]
    assert len(pieces[0]) > 1  # the first document really is cut
    best = np.array([cosine_matrix(q, tiny_encoder.encode_documents(p)).max() for p in pieces])
    node = cosine_matrix(q, tiny_encoder.encode_documents(docs))
    want = best if scoring == "subchunks" else 0.4 * node + 0.6 * best
    np.testing.assert_allclose(got[0], want, atol=1e-6)


def test_rerank_batch_derives_node_vectors_as_the_in_process_reranker(tiny_encoder):
    from llamaindex_posfair.integrations.node_scoring import ScoringSettings
    from qdrant_tools.subchunks import SubchunkConfig

    docs = [". ".join(" ".join(WORDS[i : i + 4]) for i in range(0, len(WORDS), 3)) + ".", "A mill. The sea."]
    derived = ScoringSettings("weighted", SubchunkConfig(8, 0), 0.4, node_source="subchunk-mean")
    worker = EncoderWorker(tiny_encoder.spec, token_budget=512, encoder=tiny_encoder)
    [got, encoded] = worker.rerank_batch(
        [
            RerankJob("silt", tuple(docs), derived),
            RerankJob("silt", tuple(docs), ScoringSettings("weighted", SubchunkConfig(8, 0), 0.4)),
        ]
    )
    np.testing.assert_allclose(got, InProcessEncoder(tiny_encoder).scores("silt", docs, derived), atol=1e-5)
    assert not np.allclose(got, encoded)  # the node vector really is another one


def test_card_names_the_pinned_spec(tiny_encoder):
    card = EncoderWorker(tiny_encoder.spec, token_budget=512, encoder=tiny_encoder).card()
    assert card.fingerprint == tiny_encoder.fingerprint()
    assert card.spec["weights"] == tiny_encoder.spec.weights and card.dimension == 32


def test_image_method_without_calibration_is_refused():
    from llamaindex_posfair.serve.config import ImageModelConfig
    from llamaindex_posfair.serve.worker import ImageJob, ImageWorker
    from research.multimodal.simulator import SimulatedMLLM

    worker = ImageWorker(ImageModelConfig(model="sim"), scorer=SimulatedMLLM())
    with pytest.raises(ValueError, match="method='ours' needs a calibration state, and this server has none"):
        worker.rerank(ImageJob("q", ("a", "b")))
