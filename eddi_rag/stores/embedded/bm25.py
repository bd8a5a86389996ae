"""BM25 keyword search with bm25s (English stop words, Snowball stemming via PyStemmer)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import bm25s
import Stemmer

logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on its logger: every index build was printed

_STEMMER = Stemmer.Stemmer("english")


def terms(texts: Sequence[str], stopwords: str | Sequence[str] = "en") -> list[set[str]]:
    """Each text's terms as BM25 sees them: lower-cased, ``stopwords`` left out, stemmed."""
    if not texts:
        return []
    tokens = bm25s.tokenize(list(texts), stopwords=stopwords, stemmer=_STEMMER, return_ids=False, show_progress=False)
    return [set(t) for t in tokens]


class Bm25Index:
    def __init__(self, ids: Sequence[str], texts: Sequence[str]):
        self.ids = list(ids)
        self.retriever = bm25s.BM25()
        corpus = bm25s.tokenize(list(texts), stopwords="en", stemmer=_STEMMER, show_progress=False) if self.ids else None
        if corpus is None or not corpus.vocab:  # nothing to find: only stop words, digits alone, punctuation
            self.ids = []
            return
        self.retriever.index(corpus, show_progress=False)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """(id, BM25 score) of the best ``k`` documents with a score above zero."""
        if not self.ids or not query.strip():
            return []
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=_STEMMER, show_progress=False)
        if not tokens.ids or not tokens.ids[0]:
            return []
        docs, scores = self.retriever.retrieve(tokens, k=min(k, len(self.ids)), show_progress=False)
        return [(self.ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]

    def scores(self, query: str, ids: Sequence[str]) -> dict[str, float]:
        """The score ``search`` gives each of ``ids`` above zero."""
        if not self.ids or not query.strip():
            return {}
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False)
        if not tokens or not tokens[0]:
            return {}
        wanted = set(ids)
        return {i: float(s) for i, s in zip(self.ids, self.retriever.get_scores(tokens[0])) if i in wanted and s > 0}
