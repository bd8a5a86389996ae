"""RagContextProvider: choose the knowledge bases for a turn, search them, format the context."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from eddi_rag.config import LlmTaskRag
from eddi_rag.retrieval.retriever import Retriever
from eddi_rag.stores.base import SearchHit
from eddi_rag.workflow.traversal import DiscoveredKb

log = logging.getLogger(__name__)

MAX_PARALLEL = 8  # knowledge bases searched at once per turn


@dataclass
class KbSelection:
    kb: DiscoveredKb
    max_results: int
    min_score: float


@dataclass
class RagResult:
    context: str | None
    trace: list[dict[str, Any]] = field(default_factory=list)


def select_knowledge_bases(task: LlmTaskRag, discovered: list[DiscoveredKb]) -> list[KbSelection]:
    """Explicit ``knowledgeBases`` win; else every discovered KB when ``enableWorkflowRag``."""
    if task.knowledgeBases:
        by_name = {ref.name: ref for ref in task.knowledgeBases}  # case-sensitive, as EDDI
        chosen = []
        for kb in discovered:
            ref = by_name.get(kb.config.name)
            if ref is not None:
                chosen.append(KbSelection(
                    kb,
                    kb.config.maxResults if ref.maxResults is None else ref.maxResults,
                    kb.config.minScore if ref.minScore is None else ref.minScore,
                ))
        return chosen
    if task.enableWorkflowRag:
        d = task.ragDefaults
        # An absent ragDefaults field keeps the KB's own value (EDDI used 5 / 0.6 instead).
        return [
            KbSelection(
                kb,
                kb.config.maxResults if d is None or d.maxResults is None else d.maxResults,
                kb.config.minScore if d is None or d.minScore is None else d.minScore,
            )
            for kb in discovered
        ]
    return []


def _label(hit: SearchHit) -> str:
    source = str(hit.metadata.get("source") or "unknown source")
    where = hit.metadata.get("section") or hit.metadata.get("page")
    return f"{source}, {where}" if where else source


def format_context(results: list[tuple[str, list[SearchHit]]], max_chars: int | None) -> tuple[str, int]:
    """The ``## Relevant Context:`` body (DESIGN §3). Returns (text, number of passages omitted).

    A passage that would push the text past ``max_chars`` is skipped (later, shorter ones may
    still fit); a closing marker line says how many were omitted and why."""
    limit = max_chars if max_chars and max_chars > 0 else None
    text, omitted, n, current_kb = "", 0, 0, None
    for kb_name, hits in results:
        for hit in hits:
            # Each passage ends with a blank line, which also separates it from the next header.
            header = f"### Source: {kb_name}\n\n" if kb_name != current_kb else ""
            passage = f"[{n + 1}] {_label(hit)}\n{hit.text.strip()}\n\n"
            if limit is not None and len((text + header + passage).strip()) > limit:
                omitted += 1
                continue
            text += header + passage
            current_kb, n = kb_name, n + 1
    text = text.strip()
    if omitted:
        text += f"\n\n[{omitted} more passage(s) omitted: maxRagContextChars={max_chars} reached]"
    return text, omitted


class RagContextProvider:
    def __init__(self, retriever: Retriever, redact: Callable[[str], str] = lambda s: s):
        self.retriever, self.redact = retriever, redact

    def retrieve(self, task: LlmTaskRag, discovered: list[DiscoveredKb], query: str) -> RagResult:
        """Search the selected KBs in parallel (a slow store does not hold up the others); the
        trace and the context keep workflow order."""
        trace: list[dict[str, Any]] = []
        results: list[tuple[str, list[SearchHit]]] = []
        selections = select_knowledge_bases(task, discovered)
        if not selections:
            return RagResult(None, trace)
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(selections)), thread_name_prefix="eddi-rag-kb") as pool:
            futures = [pool.submit(self.retriever.search, s.kb.id, s.kb.config, query, s.max_results, s.min_score)
                       for s in selections]
        for sel, future in zip(selections, futures):
            cfg = sel.kb.config
            try:
                hits = future.result()
            except Exception as e:  # noqa: BLE001 - one failing KB never silences the others
                error = self.redact(f"{type(e).__name__}: {e}")
                log.warning("knowledge base %r failed: %s", cfg.name, error)
                trace.append({"kb": cfg.name, "error": error})
                continue
            trace.append({
                "kb": cfg.name,
                "kbId": sel.kb.id,
                "provider": cfg.embeddingProvider,
                "storeType": cfg.storeType,
                "searchMode": cfg.searchMode,
                "maxResults": sel.max_results,
                "minScore": sel.min_score,
                "retrievedCount": len(hits),
                "chunks": [
                    {"id": h.id, "score": round(h.score, 6), "source": h.metadata.get("source")} for h in hits
                ],
            })
            if hits:
                results.append((cfg.name, hits))
        if not results:
            return RagResult(None, trace)
        context, _ = format_context(results, task.maxRagContextChars)
        return RagResult(context, trace)
