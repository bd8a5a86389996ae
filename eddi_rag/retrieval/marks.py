"""Which sentences of a hit answer the question, so a reader is shown those and not the whole chunk: the hit's
sentences (headings and list markers aside) ranked by BM25 against the question (the keyword index's own
tokenizer and stemmer), the best ones that share a term with it, as ``[start, end)`` offsets in the passage."""

from __future__ import annotations

from eddi_rag.ingest import chunking
from eddi_rag.stores.embedded.bm25 import Bm25Index

MOST = 2  # sentences marked per hit


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` (headings left out) as [start, end) offsets in ``text``."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    at = start
    for line in text[start:end].split("\n"):
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
    spans = sentence_spans(text, start, end)
    if not spans or not question.strip():
        return []
    ranked = Bm25Index([str(i) for i in range(len(spans))], [text[s:e] for s, e in spans]).search(question, most)
    return sorted([list(spans[int(i)]) for i, score in ranked if score > 0])
