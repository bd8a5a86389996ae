"""Conversation-aware RAG: which text a turn searches with, and the citations in the answer.

Query strategy: the first user message of a conversation is searched as it is (``raw``); a
follow-up is searched with the conversation's accumulated topic (``contextualised``) kept in
memory under ``rag:topic`` (the earlier topic, then this message, at most ``MAX_TOPIC_CHARS``
from the end), so "does it integrate with X?" keeps the subject. A component that writes a
better topic (an LLM rewriter, say) into ``rag:topic`` is used as is.

Citations: the context labels each passage ``[Source n: document, section]``; after the model
answers, ``[Source n...]`` and ``[n]`` are read from the answer and checked against what was
injected: a citation of a passage that was not injected (or naming another document) is logged
as a warning and stored with ``known: false``.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from eddi_rag.workflow.memory import ConversationMemory

log = logging.getLogger(__name__)

TOPIC_KEY = "rag:topic"
MAX_TOPIC_CHARS = 1000
_CITATION = re.compile(r"\[(?:Source\s+)?(\d+)(?::\s*([^\]]*))?\]", re.IGNORECASE)


def query_for_turn(memory: ConversationMemory) -> tuple[str, str]:
    """(the text to search with, the strategy: ``raw`` | ``contextualised``)."""
    current = (memory.user_input or "").strip()
    earlier = [text for role, text in memory.history if role == "user"]
    if not earlier:
        return current, "raw"
    topic = str(memory.get(TOPIC_KEY) or " ".join(earlier)).strip()
    return _tail(f"{topic} {current}", MAX_TOPIC_CHARS), "contextualised"


def remember_topic(memory: ConversationMemory, query: str) -> None:
    memory.set(TOPIC_KEY, query)


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    return cut.split(" ", 1)[1] if " " in cut else cut  # start at a word


def check_citations(answer: str, sources: list[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    """Each distinct citation in ``answer``: the injected source it names (``known: true``) or a
    flagged unknown one."""
    by_n = {s["n"]: s for s in sources}
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for m in _CITATION.finditer(answer or ""):
        cited = m.group(0)
        if cited in seen:
            continue
        seen.add(cited)
        n, named = int(m.group(1)), (m.group(2) or "").strip()
        source = by_n.get(n)
        expected = source["label"][len(f"[Source {n}:"):-1].strip() if source else None
        # the whole label, or the document alone or with a place of its own choosing ("handbook.pdf, p. 2": a model
        # cites the page it read), never another document
        document = str(source.get("source") or "").lower() if source else ""
        names = {(expected or "").lower(), document} if source else set()
        if source is not None and (not named or named.lower() in names or (document and named.lower().startswith(document + ","))):
            found.append({**source, "cited": cited, "known": True})
        else:
            log.warning("task %s: the answer cites %s, which is not among the %d injected passages", task_id, cited, len(sources))
            found.append({"n": n, "cited": cited, "known": False})
    return found
