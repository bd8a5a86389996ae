"""An extractive answer: the sentences of the injected passages that best match the question, each followed by
its ``[Source n]`` label. No language model: it never says anything the knowledge bases do not say, and says so
when nothing was injected or nothing matches.

Sentences are picked to cover the question's terms: each next sentence is the one adding the most of what the
picked ones do not cover yet (each term weighted by its IDF among the context's sentences, a sentence's BM25 score
breaking ties), so three sentences answer three parts of a question rather than repeat its most frequent word; a
sentence that adds none of the question's terms the answer lacks, and matches the question less than half as well as
the best, ends it (no padding off the question; "Saver fares are non-refundable." after the sentence on Saver fares'
refunds is still said).
Headings are not sentences (they name a section, they do not answer). Measured on claude-docs-qa
(``benchmarks/bench_answers.py``, benchmarks/README.md): the answer holds the expected fact 0.54 of the time at
three sentences, against 0.38 for the three best sentences by BM25 (and 0.47 for BM25 at the same length); fusing
in the local embedding model's rank (RRF) did not help."""

from __future__ import annotations

import math
import re
from typing import Any

from bm25s.stopwords import STOPWORDS_EN_PLUS
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from eddi_rag.common.quoting import unquoted
from eddi_rag.config import GROUNDING_INSTRUCTIONS
from eddi_rag.ingest import chunking
from eddi_rag.ingest.language import detect
from eddi_rag.stores.embedded.bm25 import Bm25Index, stop_words, terms
from eddi_rag.workflow.llm_task import RELEVANT_CONTEXT
from eddi_rag.workflow.llm_task import SEARCH_RESULTS_HEADER as SEARCH_RESULTS

NOTHING_FOUND = "I found nothing about this in the knowledge bases."
_LABEL = re.compile(r"^\[Source (\d+)(?::[^\]]*)?\]\s*$", re.MULTILINE)
_MARKUP = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+|>\s*|\|)")
_CELL = re.compile(r"^[^:\n]{1,60}: \S")  # a table row's line: ``header: value``
_TABLE_LEAD = re.compile(r"^(?:Table|Sheet): [^\n]+$")  # the line a row's chunk opens with


def passages(system: str) -> list[tuple[int, str]]:
    """(n, text) of each ``[Source n: …]`` passage under ``## Relevant Context:``."""
    if RELEVANT_CONTEXT not in system:
        return []
    context = system.split(RELEVANT_CONTEXT, 1)[1].replace(GROUNDING_INSTRUCTIONS, "")
    context = unquoted(context)  # (contextFraming: the quote's marks and the line saying what it is)
    marks = list(_LABEL.finditer(context))
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(context)
        text = re.sub(r"(?m)^### Source: .*$", "", context[m.end():end])  # the next KB's header
        text = re.split(r"\n\[\.\.\. (?:\d+ further retrieved passage\(s\) omitted|context truncated at)", text)[0]  # budget markers
        out.append((int(m.group(1)), text.strip()))
    return out


def search_results(system: str) -> str:
    """The text under ``## Search Results:`` (an httpCall's answer, httpCallRag), or ""."""
    if SEARCH_RESULTS not in system:
        return ""
    text = system.split(SEARCH_RESULTS, 1)[1].split(RELEVANT_CONTEXT, 1)[0].replace(GROUNDING_INSTRUCTIONS, "")
    return unquoted(text).strip()


def sentences(text: str) -> list[str]:
    """Sentences of a passage: each line (list items; not headings) cut at sentence ends (pysbd); a table's row,
    written as ``header: value`` lines (ingest.loaders.rows), is one sentence of its cells (``Product: Anvil; Price:
    99.5``), and the line that names the table (``Table: prices.csv``) none."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if len(lines) > 1 and all(_CELL.match(line) for line in lines):
            out.append("; ".join(lines) + ".")
            continue
        for line in lines:
            if chunking.is_heading(line) or _TABLE_LEAD.match(line):
                continue
            line = _MARKUP.sub("", line).strip(" |")
            if len(line) < 3 or line.startswith("```"):
                continue
            out += [s for s in chunking.sentences(line) if len(s) > 2]
    return out


TIE = 0.1  # a sentence's BM25 score, weighed against the IDF of the terms it adds
EXACT = 0.5  # each word or number of the question a sentence adds as written (a table row's "5" of "Widget 5")
QUESTION_STOPWORDS = sorted(STOPWORDS_EN_PLUS)  # (with "what", "how", "does": a question's words that ask, not name)


PAD = 0.5  # a sentence adding no term the answer lacks is still said when its BM25 score is at least this share of the best


def extractive_answer(system: str, question: str, max_sentences: int = 3, earlier: str = "") -> str:
    """Up to ``max_sentences`` sentences that together cover ``question``'s terms best (see the module doc), in
    the order picked, each with its label; or NOTHING_FOUND. ``earlier``: the question before a follow-up ("and
    how heavy?"), whose subject only breaks ties (it is in the BM25 query, not among the terms to cover)."""
    found = [(f"Source {n}", s) for n, text in passages(system) for s in sentences(text)]
    found += [("Search Results", s) for s in sentences(search_results(system))]
    said: dict[str, tuple[str, str]] = {}  # a sentence said once, under the first label (a page as text and as a scan)
    for label, sentence in found:
        said.setdefault(" ".join(sentence.lower().split()), (label, sentence))
    unique = list(said.values())
    if not unique or not question.strip():
        return NOTHING_FOUND
    language = detect(question) or detect(" ".join(s for _, s in unique[:20]))  # (stemmed and stopped in its rules)
    stopwords = QUESTION_STOPWORDS if language in (None, "en") else stop_words(language)
    scores = dict(Bm25Index([str(i) for i in range(len(unique))], [s for _, s in unique], language).search(
        f"{earlier} {question}", len(unique)))
    if not scores:
        return NOTHING_FOUND
    (asked,), has = terms([question], stopwords, language), terms([s for _, s in unique], stopwords, language)
    idf = {t: math.log(1 + len(unique) / (1 + sum(t in h for h in has))) for t in asked}
    picked: list[int] = []
    covered: set[str] = set()
    candidates = [int(i) for i in scores]  # (every sentence with a question term)
    top = max(scores.values())
    named = _tokens(question) - set(stopwords)  # as written: "Widget 5"'s 5, which BM25's terms leave out
    written = [_tokens(sentence) for _, sentence in unique]
    while candidates and len(picked) < max_sentences:
        best = max(candidates, key=lambda i: sum(idf[t] for t in has[i] & asked - covered) + TIE * scores[str(i)]
                   + EXACT * len(named & written[i]))
        if picked and not (has[best] & asked - covered or named & written[best]) and scores[str(best)] < PAD * top:
            break  # it adds nothing the question asks that the answer lacks, and matches it far less: padding
        named -= written[best]  # (a word once said adds nothing to the next pick)
        picked.append(best)
        covered |= has[best] & asked
        candidates.remove(best)
    return " ".join(f"{unique[i][1]} [{unique[i][0]}]" for i in picked)


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _questions(messages: list[BaseMessage]) -> tuple[str, str]:
    """The last human message, and the one before it: a follow-up ("and how heavy?") keeps its subject."""
    asked = [str(m.content) for m in messages if isinstance(m, HumanMessage)] or [""]
    return asked[-1], " ".join(asked[-2:-1])


def _system(messages: list[BaseMessage]) -> str:
    return "\n\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))


class ExtractiveChatModel(BaseChatModel):
    """A LangChain chat model that answers with sentences of the injected context (see module doc)."""

    max_sentences: int = 3

    @property
    def _llm_type(self) -> str:
        return "eddi-rag-extractive"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        question, earlier = _questions(messages)
        text = extractive_answer(_system(messages), question, self.max_sentences, earlier)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
