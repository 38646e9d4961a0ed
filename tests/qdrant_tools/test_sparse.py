"""Bm25Sparse: BM25 weights, stopwords and stemming as configured, stable settings, determinism, pickling.

The ranking tests run on both embedded engines (Qdrant Edge and
qdrant-client's local mode): vectors computed client-side must rank the same
wherever they are stored.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from contextlib import closing

import pytest
from qdrant_client import models

from qdrant_tools.sparse import SERVER_MODEL, Bm25Sparse, cjk_bigrams
from qdrant_tools.store import open_store

pytestmark = pytest.mark.filterwarnings("ignore:Local mode performs exact")

CORPUS = [
    "the cat sat on the mat",
    "a dog chased the cat around the garden",
    "dogs and cats living together in the garden",
    "an aardvark ate ants near the mat",
    "the garden mat was green",
]


def token_index(token: str) -> int:
    """The index Bm25Sparse gives an (already stemmed) token: abs(murmur3_32(token, seed 0))."""
    mmh3 = pytest.importorskip("mmh3")
    return abs(mmh3.hash(token))


@pytest.mark.parametrize("engine", ["edge", "local"])
def test_a_term_found_in_one_document_ranks_that_document_first(engine):
    bm25 = Bm25Sparse(avg_len=8)
    with closing(open_store(":memory:", engine=engine)) as store:
        store.create_collection(
            "t", sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)}
        )
        store.upsert("t", models.Batch(ids=list(range(len(CORPUS))), vectors={"bm25": bm25.embed_documents(CORPUS)}))
        hits = store.query_points("t", query=bm25.embed_query("garden aardvark"), using="bm25").points
    assert hits[0].id == 3  # "aardvark": one document; "garden": three
    assert sorted(p.id for p in hits) == [1, 2, 3, 4]


def test_document_weights_are_bm25_term_frequency_saturation():
    k, b, avg_len = 1.2, 0.75, 10.0
    doc = Bm25Sparse(k=k, b=b, avg_len=avg_len).embed_document("zebra zebra yak")
    weights = dict(zip(doc.indices, doc.values))

    def w(tf: int, length: int = 3) -> float:
        return tf * (k + 1) / (tf + k * (1 - b + b * length / avg_len))

    assert weights == pytest.approx({token_index("zebra"): w(2), token_index("yak"): w(1)}, rel=1e-6)


def test_stopwords_are_not_counted_in_the_document_length():
    bm25 = Bm25Sparse(avg_len=10)
    assert bm25.embed_document("the zebra and the yak") == bm25.embed_document("zebra yak")


def test_a_query_gives_weight_one_per_distinct_token():
    q = Bm25Sparse().embed_query("zebra zebra yak")
    assert sorted(q.indices) == sorted([token_index("zebra"), token_index("yak")]) and q.values == [1.0, 1.0]


def test_english_default_stems_and_drops_stopwords():
    bm25 = Bm25Sparse()
    assert bm25.embed_query("the running dogs") == bm25.embed_query("dog runs")
    assert bm25.embed_query("the").indices == []


def test_disabled_stemmer_keeps_word_forms_apart():
    bm25 = Bm25Sparse(stemmer=models.DisabledStemmerParams(type=models.NoStemmer.NONE))
    assert bm25.embed_query("running").indices == [token_index("running")]
    assert bm25.embed_query("running") != bm25.embed_query("runs")


def test_an_empty_stopword_set_keeps_the_stopwords():
    assert Bm25Sparse(stopwords=models.StopwordsSet()).embed_query("the").indices == [token_index("the")]


def test_custom_stopwords_are_dropped_next_to_the_language_ones():
    sw = models.StopwordsSet(languages=[models.Language.ENGLISH], custom=["zebra"])
    q = Bm25Sparse(stopwords=sw).embed_query("the zebra yak")
    assert q.indices == [token_index("yak")]


def test_language_french_drops_french_stopwords_and_keeps_english_ones():
    fr = Bm25Sparse(language="french", stemmer=models.DisabledStemmerParams(type=models.NoStemmer.NONE))
    assert fr.embed_query("le chat").indices == [token_index("chat")]
    assert token_index("the") in fr.embed_query("the chat").indices


def test_lowercase_setting_is_applied():
    assert Bm25Sparse().embed_query("ZEBRA") == Bm25Sparse().embed_query("zebra")
    assert Bm25Sparse(lowercase=False).embed_query("ZEBRA") != Bm25Sparse().embed_query("zebra")


def test_vectors_are_pinned_golden_values():
    """A change of tokenizer, stemmer, hash or weights in qdrant-edge shows here (re-embed every collection)."""
    doc = Bm25Sparse().embed_document("The quick brown foxes are jumping over the lazy dogs")
    assert doc.indices == [226376294, 741580288, 771291085, 1312749093, 1621867415, 1913189942]
    assert doc.values == pytest.approx([1.6652868] * 6, rel=1e-6)  # tf 1, 6 tokens, avg_len 256


def test_vectors_are_the_same_in_another_process_with_another_hash_seed():
    code = (
        "from qdrant_tools.sparse import Bm25Sparse;"
        "v = Bm25Sparse(language='english', avg_len=50).embed_document(" + repr(" ".join(CORPUS)) + ");"
        "print(v.model_dump_json())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    here = Bm25Sparse(avg_len=50).embed_document(" ".join(CORPUS))
    assert models.SparseVector.model_validate_json(out) == here and len(here.indices) > 5


def test_indices_come_sorted_and_unique():
    v = Bm25Sparse().embed_document(" ".join(CORPUS))
    assert v.indices == sorted(set(v.indices))


def test_settings_fill_defaults_so_equal_configs_are_equal():
    a, b = Bm25Sparse(), Bm25Sparse(models.Bm25Config(k=1.2, language="english"), lowercase=True)
    assert a.settings() == b.settings() and a.fingerprint() == b.fingerprint() and a == b
    assert a.settings() == {
        "model": "bm25",
        "k": 1.2,
        "b": 0.75,
        "avg_len": 256.0,
        "tokenizer": "word",
        "language": "english",
        "lowercase": True,
        "ascii_folding": False,
        "cjk_bigrams": True,
    }


def test_every_setting_changes_the_fingerprint():
    base = Bm25Sparse().fingerprint()
    variants = [
        {"k": 1.5},
        {"b": 0.5},
        {"avg_len": 100},
        {"language": "french"},
        {"stopwords": models.StopwordsSet()},
        {"stemmer": models.DisabledStemmerParams(type=models.NoStemmer.NONE)},
        {"min_token_len": 2},
    ]
    prints = {Bm25Sparse(**v).fingerprint() for v in variants}
    assert len(prints) == len(variants) and base not in prints


def test_custom_stopword_order_does_not_change_the_settings():
    a = Bm25Sparse(stopwords=models.StopwordsSet(custom=["b", "a"]))
    b = Bm25Sparse(stopwords=models.StopwordsSet(custom=["a", "b"]))
    assert a.settings() == b.settings() and a.settings()["stopwords"]["custom"] == ["a", "b"]


def test_pickles_as_its_settings_and_embeds_the_same():
    bm25 = Bm25Sparse(language="french", avg_len=40, stopwords=models.StopwordsSet(custom=["chat"]))
    clone = pickle.loads(pickle.dumps(bm25))
    assert clone == bm25 and clone is not bm25
    assert clone.embed_documents(CORPUS) == bm25.embed_documents(CORPUS)


def test_server_options_make_a_server_side_document_with_the_same_settings():
    bm25 = Bm25Sparse(avg_len=40)
    doc = models.Document(text="zebra", model=SERVER_MODEL, options=bm25.server_options())
    assert doc.options.avg_len == 40 and doc.options.model_dump(mode="json", exclude_none=True) == {
        k: v for k, v in bm25.settings().items() if k not in ("model", "cjk_bigrams")
    }


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"b": 2.0}, r"b must be finite and in \[0.0, 1.0\], got 2"),
        ({"k": -1.0}, "k1 must be finite and >= 0"),
        ({"avg_len": 0.0}, "avg_doc_len must be finite and > 0"),
        ({"language": "klingon"}, "unsupported language.*'english'"),
    ],
)
def test_invalid_settings_name_the_value_and_what_is_valid(setting, message):
    with pytest.raises(ValueError, match=message):
        Bm25Sparse(**setting)


def test_unknown_settings_are_refused_with_the_valid_names():
    with pytest.raises(ValueError, match=r"unknown settings \['k1'\]; valid: \['ascii_folding', 'avg_len', 'b'"):
        Bm25Sparse(k1=1.2)


# ---------------------------------------------------------------------- text without spaces (Chinese, Japanese)
LEGACY_SETTINGS = {  # what settings() recorded before the CJK flag existed
    "model": "bm25",
    "k": 1.2,
    "b": 0.75,
    "avg_len": 256.0,
    "tokenizer": "word",
    "language": "english",
    "lowercase": True,
    "ascii_folding": False,
}
CJK_CORPUS = ["北京是中国的首都。", "上海是最大的港口城市。", "東京の天気は晴れです。", "the cat sat on the mat"]


def test_cjk_runs_become_overlapping_character_bigrams():
    assert cjk_bigrams("東京の天気") == " 東京 京の の天 天気 "
    assert cjk_bigrams("猫 is a cat") == " 猫  is a cat"
    assert cjk_bigrams("plain Latin, café!") == "plain Latin, café!"


def test_latin_text_is_tokenised_exactly_as_without_the_flag():
    on, off = Bm25Sparse(), Bm25Sparse(cjk_bigrams=False)
    assert on.embed_documents(CORPUS) == off.embed_documents(CORPUS)
    assert on.embed_queries(CORPUS) == off.embed_queries(CORPUS)


def test_settings_recorded_before_the_flag_keep_their_vectors_and_fingerprint():
    old = Bm25Sparse(LEGACY_SETTINGS)
    assert old.settings() == LEGACY_SETTINGS
    assert old.embed_query("中国的首都") == Bm25Sparse(cjk_bigrams=False).embed_query("中国的首都")
    assert old.embed_query("中国的首都") != Bm25Sparse().embed_query("中国的首都")


def test_the_flag_is_recorded_and_round_trips_but_leaves_the_fingerprint():
    new = Bm25Sparse()
    assert new.settings()["cjk_bigrams"] is True and Bm25Sparse(new.settings()) == new
    assert new.fingerprint() == Bm25Sparse(LEGACY_SETTINGS).fingerprint()  # point ids of Latin text do not move
    assert pickle.loads(pickle.dumps(Bm25Sparse(LEGACY_SETTINGS))).settings() == LEGACY_SETTINGS


@pytest.mark.parametrize("engine", ["edge", "local"])
@pytest.mark.parametrize(("word", "doc"), [("首都", 0), ("港口", 1), ("天気", 2)])
def test_a_chinese_or_japanese_word_inside_a_sentence_finds_its_document(engine, word, doc):
    bm25 = Bm25Sparse(avg_len=8)
    with closing(open_store(":memory:", engine=engine)) as store:
        store.create_collection(
            "t", sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)}
        )
        ids = list(range(len(CJK_CORPUS)))
        store.upsert("t", models.Batch(ids=ids, vectors={"bm25": bm25.embed_documents(CJK_CORPUS)}))
        hits = store.query_points("t", query=bm25.embed_query(word), using="bm25").points
    assert [p.id for p in hits] == [doc]
