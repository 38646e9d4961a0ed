"""Wire formats: shape errors name the field; vectors survive both encodings exactly."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from llamaindex_posfair.serve.schemas import (
    EmbeddingRequest,
    ImageRerankRequest,
    RerankRequest,
    RerankResponse,
    RerankResult,
    decode_vector,
    encode_vector,
)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"input": []}, "input must not be empty"),
        ({"input": [1, 2]}, "input[0] must be a string, got int (token-id arrays are not accepted"),
        ({"input": ["ok", "  "]}, "input[1] is empty"),
        ({"input": {"a": 1}}, "input must be a string or a list of strings, got dict"),
    ],
)
def test_embedding_request_errors_name_the_input(body, message):
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("(", r"\(")):
        EmbeddingRequest.model_validate(body)


def test_embedding_request_takes_one_string_and_defaults_to_documents():
    req = EmbeddingRequest.model_validate({"input": "one text", "user": "ignored"})
    assert req.texts() == ["one text"] and req.input_type == "document"


def test_rerank_request_accepts_cohere_document_objects():
    req = RerankRequest.model_validate({"query": "q", "documents": ["a", {"text": "b"}]})
    assert req.documents == ["a", "b"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": " ", "documents": ["a"]}, "query is empty"),
        ({"query": "q", "documents": "a"}, "documents must be a list of strings, got str"),
        ({"query": "q", "documents": ["a", 3]}, r"documents\[1\] must be a string, got int"),
        ({"query": "q", "documents": ["a"], "top_n": 0}, "greater than 0"),
    ],
)
def test_rerank_request_errors_name_the_field(body, message):
    with pytest.raises(ValidationError, match=message):
        RerankRequest.model_validate(body)


def test_rerank_request_node_source_is_the_layouts_one_spelling():
    from qdrant_tools.subchunks import NODE_SOURCES

    for source in NODE_SOURCES:
        req = RerankRequest.model_validate({"query": "q", "documents": ["a"], "node_source": source})
        assert req.scoring_settings().node_source == source
    with pytest.raises(ValidationError, match="node_source") as err:
        RerankRequest.model_validate({"query": "q", "documents": ["a"], "node_source": "mean"})
    assert "'encoded' or 'subchunk-mean'" in str(err.value) and "'mean'" in str(err.value)


def test_image_request_needs_two_images():
    with pytest.raises(ValidationError, match="images must hold at least 2 images to rank, got 1"):
        ImageRerankRequest.model_validate({"query": "q", "images": ["aGk="]})


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_vectors_survive_both_encodings_bit_exactly(encoding):
    v = np.random.default_rng(0).standard_normal(384).astype(np.float32)
    np.testing.assert_array_equal(decode_vector(encode_vector(v, encoding)), v)


def test_rerank_scores_come_back_in_input_order_and_require_all():
    resp = RerankResponse(
        results=[RerankResult(index=1, relevance_score=0.9), RerankResult(index=0, relevance_score=0.2)], model="m"
    )
    np.testing.assert_allclose(resp.scores(2), [0.2, 0.9])
    with pytest.raises(ValueError, match="returned 2 scores for 3 documents"):
        resp.scores(3)
