"""BM25 keyword search with bm25s over a few texts (a hit's sentences, an answer's candidates): in a language's
Snowball stemming (PyStemmer) and stop words, English's by default; every text ``spaced`` first (languages.spaced:
Chinese and the other unspaced scripts as pairs of characters)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache

import bm25s
import bm25s.stopwords
import Stemmer

from eddi_rag.stores.languages import SNOWBALL, spaced

logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on its logger: every index build was printed

# ISO 639-1 code -> bm25s's stop words of that language (English's: "en").
STOP_WORDS = {"en": "en", "da": bm25s.stopwords.STOPWORDS_DANISH, "nl": bm25s.stopwords.STOPWORDS_DUTCH,
              "fr": bm25s.stopwords.STOPWORDS_FRENCH, "de": bm25s.stopwords.STOPWORDS_GERMAN,
              "it": bm25s.stopwords.STOPWORDS_ITALIAN, "no": bm25s.stopwords.STOPWORDS_NORWEGIAN,
              "pt": bm25s.stopwords.STOPWORDS_PORTUGUESE, "ru": bm25s.stopwords.STOPWORDS_RUSSIAN,
              "es": bm25s.stopwords.STOPWORDS_SPANISH, "sv": bm25s.stopwords.STOPWORDS_SWEDISH,
              "tr": bm25s.stopwords.STOPWORDS_TURKISH}


@cache
def _stemmer(language: str | None) -> Stemmer.Stemmer | None:
    name = SNOWBALL.get(language or "en")
    return Stemmer.Stemmer(name) if name in Stemmer.algorithms() else None


def stop_words(language: str | None) -> str | Sequence[str]:
    """The stop words of ``language`` (None: English's), none for a language without a list here."""
    return STOP_WORDS.get(language or "en", [])


def terms(texts: Sequence[str], stopwords: str | Sequence[str] = "en", language: str | None = None) -> list[set[str]]:
    """Each text's terms as BM25 sees them: lower-cased, ``stopwords`` left out, stemmed in ``language``."""
    if not texts:
        return []
    tokens = bm25s.tokenize([spaced(t) for t in texts], stopwords=stopwords, stemmer=_stemmer(language), return_ids=False,
                            show_progress=False)
    return [set(t) for t in tokens]


class Bm25Index:
    def __init__(self, ids: Sequence[str], texts: Sequence[str], language: str | None = None):
        """``language``: the texts' (ISO 639-1; None: English), whose stemmer and stop words analyse them and a query."""
        self.ids = list(ids)
        self.retriever = bm25s.BM25()
        self.stemmer, self.stopwords = _stemmer(language), stop_words(language)
        corpus = bm25s.tokenize([spaced(t) for t in texts], stopwords=self.stopwords, stemmer=self.stemmer,
                                show_progress=False) if self.ids else None
        if corpus is None or not corpus.vocab:  # nothing to find: only stop words, digits alone, punctuation
            self.ids = []
            return
        self.retriever.index(corpus, show_progress=False)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """(id, BM25 score) of the best ``k`` documents with a score above zero."""
        if not self.ids or not query.strip():
            return []
        tokens = bm25s.tokenize([spaced(query)], stopwords=self.stopwords, stemmer=self.stemmer, show_progress=False)
        if not tokens.ids or not tokens.ids[0]:
            return []
        docs, scores = self.retriever.retrieve(tokens, k=min(k, len(self.ids)), show_progress=False)
        return [(self.ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]

    def scores(self, query: str, ids: Sequence[str]) -> dict[str, float]:
        """The score ``search`` gives each of ``ids`` above zero."""
        if not self.ids or not query.strip():
            return {}
        tokens = bm25s.tokenize([spaced(query)], stopwords=self.stopwords, stemmer=self.stemmer, return_ids=False,
                                show_progress=False)
        if not tokens or not tokens[0]:
            return {}
        wanted = set(ids)
        return {i: float(s) for i, s in zip(self.ids, self.retriever.get_scores(tokens[0])) if i in wanted and s > 0}
