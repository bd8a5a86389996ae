"""Languages as the keyword half analyses them (issue 57): which Snowball stemmer and stop-word list a language has,
which scripts are written without spaces, and each engine's name for a language's analysis (docs/languages.md).

A chunk is analysed in its document's language (``metadata.language``, set at ingestion by the knowledge base's
``language``: eddi_rag.ingest.language). Every text, whatever its language, is first ``spaced``: NFKC-normalised
(full-width Latin, Arabic presentation forms, ligatures) and its runs of Chinese, Japanese, Korean, Thai, Lao, Khmer
and Myanmar cut into overlapping pairs of characters, as Lucene's CJK analyzer does, so a sentence with no spaces is
words a query can match and no engine sees a 40-byte "word"."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# ISO 639-1 code -> the Snowball stemmer's name (the languages tantivy's stemmer knows; rust-stemmers).
SNOWBALL = {
    "ar": "arabic", "da": "danish", "nl": "dutch", "en": "english", "fi": "finnish", "fr": "french", "de": "german",
    "el": "greek", "hu": "hungarian", "it": "italian", "no": "norwegian", "nb": "norwegian", "nn": "norwegian",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish",
}
# The languages whose stop words tantivy knows (Snowball's lists). English keeps its stop words, as it did before
# (the English figures are the ones every other set is held to).
STOP_WORDS = frozenset({"da", "nl", "fi", "fr", "de", "hu", "it", "no", "nb", "nn", "pt", "ru", "es", "sv"})
# Written in Latin letters: accents folded after stemming (a query typed without them still matches).
LATIN = frozenset({"da", "nl", "en", "fi", "fr", "de", "hu", "it", "no", "nb", "nn", "pt", "ro", "es", "sv", "tr"})
# ISO 639-1 code -> PostgreSQL's text search configuration (PostgreSQL 16's built-in ones), for a table EDDI wrote
# and we read in place (an adopted table, searched by PostgreSQL's own full-text search).
POSTGRES = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "da": "danish", "nl": "dutch", "en": "english",
    "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian",
    "ga": "irish", "it": "italian", "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "nb": "norwegian",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "es": "spanish", "sv": "swedish",
    "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}
# ISO 639-1 code -> Elasticsearch's built-in language analyzer (its "Language analyzers" reference page).
ELASTICSEARCH = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "bn": "bengali", "bg": "bulgarian", "ca": "catalan",
    "zh": "cjk", "ja": "cjk", "ko": "cjk", "cs": "czech", "da": "danish", "nl": "dutch", "en": "english",
    "et": "estonian", "fi": "finnish", "fr": "french", "gl": "galician", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lv": "latvian", "lt": "lithuanian",
    "no": "norwegian", "nb": "norwegian", "fa": "persian", "pt": "portuguese", "ro": "romanian", "ru": "russian",
    "sr": "serbian", "es": "spanish", "sv": "swedish", "tr": "turkish", "th": "thai",
}
NEUTRAL = "any"  # the analysis of a chunk whose language has no stemmer here (or none was found)

# Scripts written without spaces between words: Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer, Myanmar.
UNSPACED = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff"
                      "\u0e00-\u0eff\u1780-\u17ff\u1000-\u109f\U00020000-\U0002fa1f]+")


UNSAID = "en"  # a chunk of no language (written before languages, or too short to tell): English, as every chunk was


def analysis(code: str | None) -> str:
    """The analysis a chunk in language ``code`` gets: its Snowball stemmer's name when it has one here, else
    ``NEUTRAL``; a chunk of no language, English's."""
    return SNOWBALL.get(UNSAID if code is None else code, NEUTRAL)


def postgres_configuration(language: str | list[str]) -> str:
    """The text search configuration of a knowledge base of ``language`` (its ``language`` setting): its language's
    when it names one PostgreSQL has; ``simple`` (words as written) for one it has not or several; English's for
    ``auto``, as before languages (a table's documents have no language of their own there)."""
    if isinstance(language, list):
        return POSTGRES[language[0]] if len(language) == 1 and language[0] in POSTGRES else "simple"
    return "english" if language == "auto" else POSTGRES.get(language, "simple")


def _one(language: str | list[str] | None) -> str | None:
    """The one language a ``language`` setting names (None: ``auto``, several, or none)."""
    codes = [language] if isinstance(language, str) else list(language or [])
    return codes[0] if len(codes) == 1 and codes[0] != "auto" else None


def typesense_locale(language: str | list[str] | None) -> str | None:
    """A Typesense text field's ``locale`` for a knowledge base of ``language``: its one language other than English
    (Typesense then tokenises Chinese, Japanese, Korean and Thai by words, and keeps other languages' diacritics), else
    none: Typesense's English default."""
    code = _one(language)
    return None if code in (None, "en") else code


def elasticsearch_analyzer(language: str | list[str] | None) -> str | None:
    """An Elasticsearch text field's analyzer for a knowledge base of ``language``: its one language's built-in
    analyzer (stemmer, stop words; ``cjk``'s character pairs), else none: Elasticsearch's ``standard``, as before
    (English's, too: a knowledge base saved before languages keeps the analysis it had)."""
    code = _one(language)
    return None if code in (None, "en") else ELASTICSEARCH.get(code)


def atlas_analyzer(language: str | list[str] | None) -> str:
    """An Atlas Search index's analyzer for a knowledge base of ``language``: its one language's Lucene analyzer
    (Chinese by smartcn, Japanese by kuromoji, Korean by nori, Polish by morfologik), else English's, as before."""
    code = _one(language)
    special = {"zh": "smartcn", "ja": "kuromoji", "ko": "nori", "pl": "polish", "uk": "ukrainian", "pt": "portuguese"}
    name = special.get(code or "") or ELASTICSEARCH.get(code or "")
    return f"lucene.{name}" if name and name != "cjk" else "lucene.english"


def qdrant_text_index(language: str | list[str] | None) -> dict[str, Any]:
    """What Qdrant's full-text index is told of a knowledge base of ``language`` (its TextIndexParams): its one
    language's Snowball stemmer and stop words, the multilingual tokenizer for Chinese, Japanese, Korean and Thai;
    nothing for ``auto``, several or English (lowercased words, as before)."""
    code = _one(language)
    if code in (None, "en"):
        return {}
    if code in ("zh", "ja", "ko", "th"):
        return {"tokenizer": "multilingual"}
    stemmer = SNOWBALL.get(code or "")
    return {**({"stemmer": {"type": "snowball", "language": stemmer}} if stemmer else {}),
            **({"stopwords": stemmer} if stemmer and code in STOP_WORDS else {})}


def _pairs(run: re.Match[str]) -> str:
    text = run.group()
    return text if len(text) == 1 else " ".join(text[i:i + 2] for i in range(len(text) - 1))


def spaced(text: str) -> str:
    """``text`` as every keyword analysis reads it: NFKC, and unspaced scripts as overlapping character pairs."""
    if text.isascii():
        return text
    return UNSPACED.sub(lambda run: f" {_pairs(run)} ", unicodedata.normalize("NFKC", text))
