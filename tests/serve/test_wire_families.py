"""Cohere's and TEI's wire formats, the one input-type table, and the model check (no server)."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from pydantic import ValidationError

from llamaindex_posfair.serve import cohere, tei
from llamaindex_posfair.serve.cohere import CohereEmbedRequest
from llamaindex_posfair.serve.schemas import INPUT_TYPE_ROLES, ModelCard, RerankRequest, role_for
from llamaindex_posfair.serve.tei import TeiEmbedRequest, TeiRerankRequest


@pytest.mark.parametrize(
    ("name", "role"),
    [("search_query", "query"), ("classification", "query"), ("clustering", "query"), ("QUERY", "query"),
     ("search_document", "document"), ("passage", "document"), (None, "document")],
)  # fmt: skip
def test_every_client_name_maps_to_one_encoder_side(name, role):
    assert role_for(name, "input_type") == role


def test_an_unknown_input_type_names_the_field_and_the_valid_values():
    with pytest.raises(ValueError, match="prompt_name 'summary' is not supported; send one of 'query'"):
        role_for("summary", "prompt_name")
    assert set(INPUT_TYPE_ROLES.values()) == {"query", "document"}


def test_cohere_embed_request_reads_texts_v2_inputs_and_input_types():
    v1 = CohereEmbedRequest.model_validate({"texts": ["a", "b"], "input_type": "search_query"})
    assert v1.text_list() == ["a", "b"] and v1.role() == "query"
    content = [{"content": [{"type": "text", "text": "x"}]}, {"content": [{"type": "text", "text": "y"}]}]
    v2 = CohereEmbedRequest.model_validate({"inputs": content, "truncate": "end", "priority": 3})
    assert v2.text_list() == ["x", "y"] and v2.role() == "document" and v2.truncate == "END"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"texts": ["a"], "inputs": [{"content": [{"type": "text", "text": "b"}]}]}, "exactly one of them"),
        ({"texts": ["a"], "input_type": "image"}, "input_type 'image' is not supported"),
        ({"texts": ["a"], "images": ["data:image/png;base64,AA=="]}, "images are not supported"),
        ({"texts": ["a"], "truncate": "START"}, "truncate 'START' is not supported"),
        ({"texts": ["a"], "embedding_types": ["float16"]}, "embedding_types.0"),
        ({"inputs": [{"content": [{"type": "image_url"}]}]}, "only content of type 'text'"),
        ({"texts": []}, "texts must not be empty"),
    ],
)
def test_cohere_embed_request_errors_name_the_field(body, message):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(".", r"\.")):
        CohereEmbedRequest.model_validate(body)


def test_embeddings_by_type_quantise_one_float_vector():
    v = np.array([[0.5, -0.5, 0.0, 1.0, -1.0, 0.25, -0.1, 0.9, 0.3]], dtype=np.float32)
    out = cohere.embeddings_by_type(v, ["float", "int8", "uint8", "binary", "ubinary", "base64", "int8"])
    assert list(out) == ["float", "int8", "uint8", "binary", "ubinary", "base64"]  # each type once
    assert out["int8"] == [[64, -64, 0, 127, -127, 32, -13, 114, 38]]
    assert out["uint8"] == [[x + 128 for x in out["int8"][0]]]
    assert out["ubinary"] == [[0b10010101, 0b10000000]]  # sign bits, 8 per byte, zero-padded
    assert out["binary"] == [[b - 128 for b in out["ubinary"][0]]]
    np.testing.assert_array_equal(np.frombuffer(base64.b64decode(out["base64"][0]), "<f4"), v[0])


def test_cohere_v1_answers_a_float_list_unless_types_are_asked():
    vectors = np.eye(2, dtype=np.float32)
    plain = cohere.embed_response(CohereEmbedRequest(texts=["a", "b"]), vectors, 7, "1")
    assert plain["response_type"] == "embeddings_floats" and plain["embeddings"] == [[1.0, 0.0], [0.0, 1.0]]
    assert plain["meta"] == {"api_version": {"version": "1"}, "billed_units": {"input_tokens": 7}}
    v2 = cohere.embed_response(CohereEmbedRequest(texts=["a", "b"]), vectors, 7, "2")
    assert v2["response_type"] == "embeddings_by_type" and v2["embeddings"] == {"float": [[1.0, 0.0], [0.0, 1.0]]}
    assert plain["id"] != v2["id"] and v2["texts"] == ["a", "b"]


def test_tei_requests_take_one_string_and_refuse_left_truncation():
    assert TeiEmbedRequest.model_validate({"inputs": "one"}).inputs == ["one"]
    assert TeiEmbedRequest.model_validate({"inputs": "q", "prompt_name": "search_query"}).role() == "query"
    with pytest.raises(ValidationError, match="truncation_direction 'left' is not supported"):
        TeiEmbedRequest.model_validate({"inputs": "a", "truncation_direction": "Left"})
    with pytest.raises(ValidationError, match="texts must be a list of strings, got str"):
        TeiRerankRequest.model_validate({"query": "q", "texts": "a"})


def test_tei_ranks_are_best_first_with_ties_in_input_order():
    assert tei.ranks([0.2, 0.9, 0.2]) == [{"index": 1, "score": 0.9}, {"index": 0, "score": 0.2},
                                          {"index": 2, "score": 0.2}]  # fmt: skip


def test_tei_normalize_scales_rows_to_unit_length_and_keeps_zero_rows():
    from llamaindex_posfair.scoring import unit_rows  # what /embed applies for normalize=true

    out = unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])


def test_tei_info_reads_the_card():
    card = ModelCard(id="m", kind="embedding", fingerprint="f" * 16, spec={"weights": "w1", "dtype": None},
                     max_length=256)  # fmt: skip
    info = tei.info(card, token_budget=4096, max_batch_size=8, max_inputs=64, max_ongoing=100)
    assert (info.model_id, info.model_sha, info.model_dtype, info.sha) == ("m", "w1", "float32", "f" * 16)
    assert (info.max_input_length, info.max_batch_tokens, info.max_client_batch_size) == (256, 4096, 64)


def test_rerank_request_takes_tei_texts_for_documents():
    assert RerankRequest.model_validate({"query": "q", "texts": ["a", "b"]}).documents == ["a", "b"]


def test_model_check_accepts_other_names_only_when_asked():
    pytest.importorskip("ray.serve")
    from llamaindex_posfair.serve.ingress import ApiError, check_model

    card = ModelCard(id="served", kind="embedding", fingerprint="abc")
    assert check_model(None, card) is False and check_model("abc", card) is False
    with pytest.raises(ApiError, match="model 'text-embedding-3-small' is not served here.*--accept-any-model"):
        check_model("text-embedding-3-small", card)
    assert check_model("text-embedding-3-small", card, accept_any=True) is True


def test_error_bodies_follow_the_route_family():
    pytest.importorskip("ray.serve")
    import json

    from llamaindex_posfair.serve.ingress import error_response, invalid_status

    def body(path):
        return json.loads(error_response(422, "bad", path=path).body)

    assert body("/embed") == {"error": "bad", "error_type": "Validation"}
    assert body("/v2/embed")["message"] == "bad" and body("/v2/embed")["id"]
    assert body("/v1/embeddings") == {"error": {"message": "bad", "type": "invalid_request_error", "param": None}}
    assert [invalid_status(p) for p in ("/v1/embeddings", "/v1/rerank", "/v2/rerank", "/rerank")] == [
        400,
        400,
        422,
        422,
    ]
