"""An extractive answer: the sentences of the injected passages that best match the question, each followed by
its ``[Source n]`` label. No language model: it never says anything the knowledge bases do not say, and says so
when nothing was injected or nothing matches.

Sentences are ranked by BM25 against the question; headings are not sentences (they name a section, they do not
answer). Measured on claude-docs-qa (``benchmarks/bench_answers.py``): fusing in the local embedding model's rank
(RRF) gave 0.37 against BM25's 0.38 at the default three sentences, so BM25 alone it is."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from eddi_rag.config import GROUNDING_INSTRUCTIONS
from eddi_rag.ingest import chunking
from eddi_rag.stores.embedded.bm25 import Bm25Index
from eddi_rag.workflow.llm_task import RELEVANT_CONTEXT

NOTHING_FOUND = "I found nothing about this in the knowledge bases."
_LABEL = re.compile(r"^\[Source (\d+)(?::[^\]]*)?\]\s*$", re.MULTILINE)
_MARKUP = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+|>\s*|\|)")


def passages(system: str) -> list[tuple[int, str]]:
    """(n, text) of each ``[Source n: …]`` passage under ``## Relevant Context:``."""
    if RELEVANT_CONTEXT not in system:
        return []
    context = system.split(RELEVANT_CONTEXT, 1)[1].replace(GROUNDING_INSTRUCTIONS, "")
    marks = list(_LABEL.finditer(context))
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(context)
        text = re.sub(r"(?m)^### Source: .*$", "", context[m.end():end])  # the next KB's header
        text = re.split(r"\n\[\.\.\. (?:\d+ further retrieved passage\(s\) omitted|context truncated at)", text)[0]  # budget markers
        out.append((int(m.group(1)), text.strip()))
    return out


def sentences(text: str) -> list[str]:
    """Sentences of a passage: each line (list items, table rows; not headings) cut at sentence ends (pysbd)."""
    out = []
    for line in text.splitlines():
        if chunking.is_heading(line):
            continue
        line = _MARKUP.sub("", line).strip(" |")
        if len(line) < 3 or line.startswith("```"):
            continue
        out += [s for s in chunking.sentences(line) if len(s) > 2]
    return out


def extractive_answer(system: str, question: str, max_sentences: int = 3) -> str:
    """The best ``max_sentences`` sentences for ``question``, best first, each with its label; or
    NOTHING_FOUND."""
    found = [(n, s) for n, text in passages(system) for s in sentences(text)]
    unique = list(dict.fromkeys(found))
    if not unique or not question.strip():
        return NOTHING_FOUND
    ranked = Bm25Index([str(i) for i in range(len(unique))], [s for _, s in unique]).search(question, max_sentences)
    if not ranked:
        return NOTHING_FOUND
    picked = [unique[int(i)] for i, _ in ranked]
    return " ".join(f"{s} [Source {n}]" for n, s in picked)


def _question(messages: list[BaseMessage]) -> str:
    """The last human message, with the one before it: a follow-up ("and how heavy?") keeps its subject."""
    asked = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
    return " ".join(asked[-2:])


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
        text = extractive_answer(_system(messages), _question(messages), self.max_sentences)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
