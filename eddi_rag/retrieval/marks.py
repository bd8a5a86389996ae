"""Which sentences of a hit answer the question, so a reader is shown those and not the whole chunk: the hit's
sentences (headings and list markers aside) ranked by BM25 against the question (in the hit's language: its
sentence rules, stemmer and stop words; Chinese as pairs of characters), the best ones that share a term with it, as ``[start, end)`` offsets in the passage."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from eddi_rag.ingest import chunking

if TYPE_CHECKING:
    from eddi_rag.stores.embedded.bm25 import Bm25Index

MOST = 2  # sentences marked per hit
CACHED = 1024  # hits whose sentences are kept ranked (a hit's text, a few kB, and its small index)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The sentences of ``text`` (headings left out) as [start, end) offsets in it."""
    out: list[tuple[int, int]] = []
    at = 0
    for line in text.split("\n"):
        if line.strip() and not chunking.is_heading(line):
            cursor = 0
            for sentence in chunking.sentences(line):
                sentence = sentence.strip()
                found = line.find(sentence, cursor)
                if sentence and found >= 0:
                    out.append((at + found, at + found + len(sentence)))
                    cursor = found + len(sentence)
        at += len(line) + 1
    return out


def matching(text: str, start: int, end: int, question: str, most: int = MOST) -> list[list[int]]:
    """The ``most`` sentences of ``text[start:end]`` that match ``question`` best, in text order; none when no
    sentence shares a term with it."""
    if not question.strip():
        return []
    spans, index = _sentences_ranked(text[start:end])
    ranked = index.search(question, most) if index is not None else []
    return sorted([[spans[int(i)][0] + start, spans[int(i)][1] + start] for i, score in ranked if score > 0])


@lru_cache(maxsize=CACHED)
def _sentences_ranked(hit: str) -> tuple[list[tuple[int, int]], Bm25Index | None]:
    """A hit's sentences and their BM25 index, kept for the next question it answers: splitting them (pysbd) and
    indexing them took two thirds of a ``/query`` request's time."""
    from eddi_rag.ingest.language import detect
    from eddi_rag.stores.embedded.bm25 import Bm25Index  # (bm25s and scipy: at the first marked hit, not at start)

    language = detect(hit)  # (its sentences split and its words stemmed by its language's rules)
    with chunking.in_language(language):
        spans = sentence_spans(hit)
    return spans, Bm25Index([str(i) for i in range(len(spans))], [hit[s:e] for s, e in spans], language) if spans else None
