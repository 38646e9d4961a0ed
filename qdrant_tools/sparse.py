"""BM25 sparse vectors computed client-side, so that every Qdrant store stores and scores the same vectors.

:class:`Bm25Sparse` turns texts into ``models.SparseVector`` s with Qdrant
Edge's BM25 model (``qdrant_edge.Bm25``): a document gets one entry per
distinct token (after lowercasing, stopword removal and stemming), an index
that is the token's 32-bit murmur3 hash (``abs(mmh3.hash(token))``, seed 0,
the convention of fastembed's ``Qdrant/bm25``) and the BM25 term-frequency
weight ``tf * (k + 1) / (tf + k * (1 - b + b * len / avg_len))``; a query
gets weight 1.0 per distinct token. The IDF half of BM25 is the collection's
job: create the sparse vector with ``models.SparseVectorParams(modifier=
models.Modifier.IDF)`` and Qdrant multiplies each query term by
``ln(1 + (N - n + 0.5) / (n + 0.5))`` over the points that hold the vector.

Chinese and Japanese runs (no spaces between words) are split into character bigrams first, as Lucene's
CJK analyzer does (:func:`cjk_bigrams`; on by default, off for settings recorded before the flag).

The vectors are computed here rather than sent as ``models.Document(text, model="qdrant/bm25")``, which
Qdrant itself embeds: the embedded Qdrant Edge store has no inference, while plain vectors score the same in
the Edge store, local mode and a server, and are a pure function of the text and :meth:`Bm25Sparse.settings`.
A server may embed instead with ``options=bm25.server_options()`` (not compared here), except for Chinese or
Japanese text, which it does not split into bigrams.

Example:
    >>> from qdrant_tools.sparse import Bm25Sparse
    >>> Bm25Sparse().embed_query("Running dogs") == Bm25Sparse().embed_query("the dog runs")  # stemmed, stopwords out
    True
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import qdrant_edge as E
from qdrant_client import models

from qdrant_tools.store.enums import to_edge

#: The name of the BM25 sparse vector of a node's text in posfair collections.
SPARSE_VECTOR = "bm25"
#: Qdrant's BM25 inference model name (what a server would embed ``models.Document`` with).
SERVER_MODEL = "qdrant/bm25"
#: The settings key recording that runs of Chinese / Japanese characters are split into bigrams.
CJK_BIGRAMS = "cjk_bigrams"
#: A run of Han (CJK unified ideographs and their extensions, compatibility ideographs), Hiragana or Katakana.
_CJK_RUN = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]+"
)
#: Defaults filled into the settings, so that "unset" and "set to the default" describe the same vectors.
_DEFAULTS: dict[str, Any] = {
    "k": 1.2,
    "b": 0.75,
    "avg_len": 256.0,
    "tokenizer": models.TokenizerType.WORD,
    "language": "english",
    "lowercase": True,
    "ascii_folding": False,
}


def _stopwords(s: Any) -> Any:
    if s is None:
        return None
    if isinstance(s, models.StopwordsSet):
        langs = {to_edge(E.Language, lang) for lang in s.languages or []}
        return E.StopwordsSet(languages=langs, custom=set(s.custom or []))
    return to_edge(E.Language, s)


def _stemmer(s: Any) -> Any:
    if s is None:
        return None
    if isinstance(s, models.DisabledStemmerParams):
        return E.DisabledStemmer()
    return E.SnowballParams(to_edge(E.SnowballLanguage, s.language))


def _edge_config(c: models.Bm25Config) -> E.Bm25Config:
    return E.Bm25Config(
        k=c.k,
        b=c.b,
        avg_len=c.avg_len,
        tokenizer=to_edge(E.TokenizerType, c.tokenizer),
        language=c.language,
        lowercase=c.lowercase,
        ascii_folding=c.ascii_folding,
        stopwords=_stopwords(c.stopwords),
        stemmer=_stemmer(c.stemmer),
        min_token_len=c.min_token_len,
        max_token_len=c.max_token_len,
    )


def cjk_bigrams(text: str) -> str:
    """``text`` with each run of Chinese / Japanese characters replaced by its overlapping character bigrams,
    space-separated (a one-character run stays itself); other text is returned unchanged.

    Example:
        >>> cjk_bigrams("Tokyo 東京の天気 today")
        'Tokyo  東京 京の の天 天気  today'
    """

    def split(run: re.Match[str]) -> str:
        chars = run.group()
        pairs = [chars[i : i + 2] for i in range(len(chars) - 1)] or [chars]
        return f" {' '.join(pairs)} "

    return _CJK_RUN.sub(split, text)


def _normalised(config: models.Bm25Config | Mapping[str, Any] | None, fields: Mapping[str, Any]) -> models.Bm25Config:
    given = config.model_dump(exclude_none=True) if isinstance(config, models.Bm25Config) else dict(config or {})
    given.update({k: v for k, v in fields.items() if v is not None})
    if given.get("model", "bm25") == "bm25":
        given.pop("model", None)  # what settings() records beside the Bm25Config fields: settings round-trip
    unknown = sorted(set(given) - set(models.Bm25Config.model_fields))
    if unknown:
        raise ValueError(
            f"Bm25Sparse got unknown settings {unknown}; valid: {sorted(models.Bm25Config.model_fields)} "
            "(the fields of qdrant_client.models.Bm25Config)"
        )
    config = models.Bm25Config(**{**_DEFAULTS, **given})
    if isinstance(config.stopwords, models.StopwordsSet):  # sets: sorted, so equal settings dump equally
        langs = sorted(config.stopwords.languages or [], key=lambda x: x.value)
        custom = sorted(config.stopwords.custom or [])
        config.stopwords = models.StopwordsSet(languages=langs, custom=custom)
    return config


class Bm25Sparse:
    """BM25 sparse vectors of documents and queries, the same on every Qdrant store (see the module docstring).

    Args:
        config: the settings, as ``qdrant_client.models.Bm25Config`` (or its dict, or what :meth:`settings`
            returned); None = standard BM25 for English (k=1.2, b=0.75, avg_len=256, word tokenizer,
            lowercase, English stopwords and Snowball stemmer).
        cjk_bigrams: split runs of Chinese / Japanese characters into character bigrams before tokenising
            (:func:`cjk_bigrams`). Default: on, except for a settings mapping without the
            :data:`CJK_BIGRAMS` key (settings recorded before the flag existed: off, the vectors they wrote).
        **fields: single ``Bm25Config`` fields overriding ``config``, e.g. ``language="french"``,
            ``stopwords=models.StopwordsSet()`` (none), ``stemmer=models.DisabledStemmerParams(type="none")``,
            ``avg_len=120`` (set it near the corpus' mean document length in tokens).

    Raises:
        ValueError: an unknown setting, or one Qdrant Edge refuses (k < 0, b outside [0, 1], avg_len <= 0,
            an unsupported language).

    The collection's sparse vector should have ``modifier=models.Modifier.IDF``. Record
    :meth:`settings` (or :meth:`fingerprint`) with the collection: queries must be embedded with the
    settings the documents were. Instances pickle as their settings (Ray workers rebuild the model).
    For dense embeddings use the posfair encoders (:mod:`llamaindex_posfair.encoders`) instead.

    Example:
        >>> from qdrant_tools.sparse import Bm25Sparse
        >>> bm25 = Bm25Sparse(avg_len=100)
        >>> doc = bm25.embed_document("The cats sat on the mat with other cats")
        >>> len(doc.indices), max(doc.values) > min(doc.values)  # cat (twice: weighs more), sat, mat
        (3, True)
    """

    def __init__(
        self,
        config: models.Bm25Config | Mapping[str, Any] | None = None,
        *,
        cjk_bigrams: bool | None = None,
        **fields: Any,
    ) -> None:
        if isinstance(config, Mapping):
            config = dict(config)
            recorded = bool(config.pop(CJK_BIGRAMS, False))
        else:
            recorded = True
        self._cjk = recorded if cjk_bigrams is None else bool(cjk_bigrams)
        self._config = _normalised(config, fields)
        try:
            self._model = E.Bm25(_edge_config(self._config))
        except ValueError as e:
            raise ValueError(
                f"Bm25Sparse settings {self.settings()} are refused by Qdrant Edge: {e}; valid: k >= 0, "
                f"0 <= b <= 1, avg_len > 0, language one of {[x.value for x in models.Language]}"
            ) from None

    # ------------------------------------------------------------------ identity
    @property
    def config(self) -> models.Bm25Config:
        """The settings as ``models.Bm25Config``, defaults filled in (a copy: the model is built once)."""
        return self._config.model_copy(deep=True)

    def settings(self) -> dict[str, Any]:
        """Every setting that shapes the vectors, JSON-ready, defaults filled in (equal settings, equal dicts).
        :data:`CJK_BIGRAMS` is recorded when on (its absence means off, as in settings recorded before it)."""
        flags = {CJK_BIGRAMS: True} if self._cjk else {}
        return {"model": "bm25", **self._config.model_dump(mode="json", exclude_none=True), **flags}

    def fingerprint(self) -> str:
        """Stable 16-hex-digit hash of :meth:`settings` without :data:`CJK_BIGRAMS`: the flag changes the vectors
        of Chinese and Japanese text only, so the document versions (and point ids) ingestion derives from this
        hash stay those of before the flag for every text; a collection's recipe records the flag itself."""
        model = {k: v for k, v in self.settings().items() if k != CJK_BIGRAMS}
        blob = json.dumps(model, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """Short description for logs and errors."""
        c = self._config
        return f"bm25(k={c.k}, b={c.b}, avg_len={c.avg_len}, language={c.language}, fingerprint {self.fingerprint()})"

    def server_options(self) -> models.Bm25Config:
        """The settings as a server's ``models.Document(model="qdrant/bm25", options=...)`` takes them (a server
        does not split CJK runs into bigrams: its vectors of Chinese or Japanese text differ)."""
        return self.config

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.settings(),))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Bm25Sparse) and self.settings() == other.settings()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def __repr__(self) -> str:
        return f"Bm25Sparse({self.settings()})"

    # ------------------------------------------------------------------ vectors
    def embed_document(self, text: str) -> models.SparseVector:
        """The BM25 term-frequency weights of a document (empty if no token survives)."""
        return _client(self._model.embed_document(self._pretokenised(text)))

    def embed_documents(self, texts: Iterable[str]) -> list[models.SparseVector]:
        """:meth:`embed_document` of each text."""
        return [self.embed_document(t) for t in texts]

    def embed_query(self, text: str) -> models.SparseVector:
        """A query: weight 1.0 per distinct token (the collection's IDF modifier weighs the terms)."""
        return _client(self._model.embed_query(self._pretokenised(text)))

    def embed_queries(self, texts: Iterable[str]) -> list[models.SparseVector]:
        """:meth:`embed_query` of each text."""
        return [self.embed_query(t) for t in texts]

    def _pretokenised(self, text: str) -> str:
        return cjk_bigrams(text) if self._cjk else text


def _client(v: E.SparseVector) -> models.SparseVector:
    """Edge's sparse vector as qdrant-client's, indices ascending (the order Qdrant stores)."""
    pairs = sorted(zip(v.indices, v.values))
    return models.SparseVector(indices=[int(i) for i, _ in pairs], values=[float(x) for _, x in pairs])
