"""RagContextProvider: choose the knowledge bases for a turn, search them, format the context."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from eddi_rag.backends.factories import embedding_key
from eddi_rag.common import citations
from eddi_rag.config import LlmTaskRag, RagConfiguration
from eddi_rag.retrieval import expansion
from eddi_rag.retrieval.access import EVERYONE, Access, Reader, WithheldError
from eddi_rag.retrieval.retriever import Retriever
from eddi_rag.stores.base import Chunk, SearchHit
from eddi_rag.workflow.traversal import DiscoveredKb

log = logging.getLogger(__name__)

MAX_PARALLEL = 8  # knowledge bases searched at once per turn
LABEL_ROOM = 120  # characters kept per passage for its [Source n: ...] label and ### Source header


@dataclass
class KbSelection:
    kb: DiscoveredKb
    max_results: int
    min_score: float


@dataclass
class RagResult:
    context: str | None
    trace: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)  # what each [Source n] label stands for
    searched: bool = False  # at least one knowledge base answered
    withheld: list[str] = field(default_factory=list)  # knowledge bases whose audience withheld them from this reader


def select_knowledge_bases(task: LlmTaskRag, discovered: list[DiscoveredKb]) -> list[KbSelection]:
    """Explicit ``knowledgeBases`` win; else every KB of the agent's workflows when ``enableWorkflowRag``."""
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
            for kb in discovered if kb.workflow
        ]
    return []


def source_label(hit: SearchHit) -> str:
    """What a citation names: the document, and where in it when known (section, page, sheet!cell...)."""
    return citations.source_label(hit.metadata)


@dataclass
class Passage:
    kb: str
    hit: SearchHit  # the best hit of the passage
    expanded: expansion.Passage | None = None  # the document's hits and the span around them (contextExpansion)

    @property
    def text(self) -> str:
        return self.expanded.text if self.expanded is not None else self.hit.text.strip()

    @property
    def label(self) -> str:
        """What the passage covers (``handbook.pdf, pages 1–3``); a bare hit: where the hit is."""
        return self.expanded.label if self.expanded is not None else source_label(self.hit)


def merge(results: list[tuple[str, list[SearchHit]]], limit: int | None) -> list[Passage]:
    """Every KB's hits in one list, cut to ``limit``: each KB keeps its own order (a fused or
    reranked order is not a score order), and across KBs the next hit with the best score comes
    first (ties: workflow order, then id). For score-ordered lists this is a sort by score."""
    heads = [0] * len(results)
    out: list[Passage] = []
    while limit is None or len(out) < limit:
        waiting = [(-hits[heads[i]].score, i, hits[heads[i]].id) for i, (_, hits) in enumerate(results) if heads[i] < len(hits)]
        if not waiting:
            break
        _, i, _ = min(waiting)
        out.append(Passage(results[i][0], results[i][1][heads[i]]))
        heads[i] += 1
    return out


def format_context(passages: list[Passage], max_chars: int | None, labels: bool = True
                   ) -> tuple[str, list[dict[str, Any]], int]:
    """The ``## Relevant Context:`` body (docs/architecture.md §3): a ``### Source: <kb>`` header whenever the KB
    changes, then ``[Source n: <document>, <what the passage covers>]`` (unless not ``labels``: EDDI's) and the passage.
    Returns (text, the sources injected as {n, label, chunkId, kb, source, section, location; page and boxes for a
    chunk of a PDF or image (where on the page, ``common.citations.place``); for an expanded passage
    also hits, span, covers and hitOffsets: each hit's [start, end) in the passage and its own citation}, number of
    passages omitted). A passage whose text was injected already (the same file uploaded twice) is not injected again:
    the first's source lists it under ``alsoIn``.

    A passage that would push the text past ``max_chars`` is skipped (later, shorter ones may
    still fit); a closing marker line says how many were omitted and why, in EDDI's words, and the
    block is cut at ``max_chars`` again (``cap``)."""
    limit = max_chars if max_chars and max_chars > 0 else None
    text, omitted, current_kb = "", 0, None
    sources: list[dict[str, Any]] = []
    seen: dict[str, dict[str, Any]] = {}  # a passage's text (spaces aside) -> the source it was injected as
    for p in passages:
        same = seen.get(" ".join(p.text.split()))
        if same is not None:  # the same text again (a file uploaded twice, a page as text and as a scan): said once
            same.setdefault("alsoIn", []).append({"kb": p.kb, "source": p.hit.metadata.get("source"), "chunkId": p.hit.id})
            continue
        n = len(sources) + 1
        label = f"[Source {n}: {p.label}]"
        # Each passage ends with a blank line, which also separates it from the next header.
        header = f"### Source: {p.kb}\n\n" if p.kb != current_kb else ""
        passage = f"{label}\n{p.text}\n\n" if labels else f"{p.text}\n\n"
        if limit is not None and len((text + header + passage).strip()) > limit:
            omitted += 1
            continue
        text += header + passage
        current_kb = p.kb
        sources.append({"n": n, "label": label, "chunkId": p.hit.id, "kb": p.kb,
                        "source": p.hit.metadata.get("source"), "section": p.hit.metadata.get("section"),
                        "location": citations.location(p.hit.metadata), **citations.place(p.hit.metadata)})
        seen[" ".join(p.text.split())] = sources[-1]
        if p.expanded is not None:  # what the passage covers, and where each hit stands in it
            sources[-1].update(hits=[h.id for h in p.expanded.hits], span=p.expanded.span, covers=p.expanded.covers,
                               hitOffsets=p.expanded.hit_offsets())
    text = text.strip()
    if omitted:
        text += f"\n[... {omitted} further retrieved passage(s) omitted: RAG context limit ({max_chars} chars) reached ...]"
    return cap(text, limit), sources, omitted


def cap(text: str, limit: int | None) -> str:
    """``text`` cut at ``limit`` characters with EDDI's marker (``LlmTask.capRagContext``); None or ≤ 0: whole."""
    if limit is None or limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"\n[... context truncated at {limit} characters ...]"


# search(kb_id, config, query, vector, k, min_score, user_id, reader) -> hits: the search verb's ``in_turn``
TurnSearch = Callable[[str, RagConfiguration, str, list[float], int, float, "str | None", "Reader | None"], list[SearchHit]]


class RagContextProvider:
    def __init__(self, retriever: Retriever, search: TurnSearch, redact: Callable[[str], str] = lambda s: s,
                 ungranted: Callable[[str, RagConfiguration], list[str]] = lambda agent_id, config: []):
        """``search``: how a KB is searched (the search verb's, as for every face); ``retriever``: its embedding
        models and passages; ``ungranted(agent_id, config)``: the vault secrets the KB's configuration names that
        the agent is not granted (``allowedAgents``): such a KB is not searched in that agent's turn."""
        self.retriever, self.search, self.redact, self.ungranted = retriever, search, redact, ungranted

    def _embed_once_per_model(self, selections: list[KbSelection], query: str) -> dict[str, Any]:
        """One query embedding per embedding model (provider + parameters) for the whole turn; a
        model that fails maps to its exception."""
        vectors: dict[str, Any] = {}
        for sel in selections:
            key = embedding_key(sel.kb.config)
            if key not in vectors:
                try:
                    vectors[key] = self.retriever.embeddings.for_config(sel.kb.config).embed_query(query)
                except Exception as e:  # noqa: BLE001 - reported on every KB using this model
                    vectors[key] = e
        return vectors

    def _search(self, sel: KbSelection, query: str, vector: Any, user_id: str | None, reader: Reader | None) -> list[SearchHit]:
        if isinstance(vector, Exception):
            raise vector
        return self.search(sel.kb.id, sel.kb.config, query, vector, sel.max_results, sel.min_score, user_id, reader)

    def retrieve(self, task: LlmTaskRag, discovered: list[DiscoveredKb], query: str,
                 user_id: str | None = None, strategy: str = "raw", agent_id: str | None = None,
                 reader: Reader | None = None) -> RagResult:
        """Search the selected KBs in parallel (a slow store does not hold up the others), then
        merge their hits by score and keep the best ``max(maxResults)``; the trace keeps workflow
        order and marks which chunks were injected. A KB naming a vault secret ``agent_id`` is not granted is
        left out (a trace error naming the secret). ``reader``: whose permissions the KBs are read with (default:
        ``user_id``'s, groups from the directory); a KB whose audience withholds it from the reader gives nothing and
        traces ``{kb, kbId, withheld}`` (retrieval.access)."""
        trace: list[dict[str, Any]] = []
        results: list[tuple[str, list[SearchHit]]] = []
        selections = select_knowledge_bases(task, discovered)
        if agent_id is not None:
            allowed = []
            for sel in selections:
                if refused := self.ungranted(agent_id, sel.kb.config):
                    trace.append({"kb": sel.kb.config.name, "error": f"agent {agent_id!r} is not granted vault secret(s) "
                                  f"{', '.join(refused)} (allowedAgents): widen the grant (PUT /secretstore/secrets/"
                                  "{tenantId}/{keyName}/grant) or remove the reference"})
                else:
                    allowed.append(sel)
            selections = allowed
        if not selections:
            return RagResult(None, trace)
        vectors = self._embed_once_per_model(selections, query)
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(selections)), thread_name_prefix="eddi-rag-kb") as pool:
            futures = [pool.submit(contextvars.copy_context().run, self._search, s, query, vectors[embedding_key(s.kb.config)],
                                   user_id, reader)  # (each in the turn's context: its audit entry is the hook's)
                       for s in selections]
        answered, withheld, readable = [], [], {}
        for sel, future in zip(selections, futures):
            cfg = sel.kb.config
            try:
                hits = future.result()
            except WithheldError as e:  # nothing of it reaches the model, and the trace says why (never what exists)
                trace.append({"kb": cfg.name, "kbId": sel.kb.id, "withheld": str(e)})
                withheld.append(cfg.name)
                continue
            except Exception as e:  # noqa: BLE001 - one failing KB never silences the others
                error = self.redact(f"{type(e).__name__}: {e}")
                log.warning("knowledge base %r failed: %s", cfg.name, error)
                trace.append({"kb": cfg.name, "error": error})
                continue
            answered.append(sel)
            readable[cfg.name] = getattr(hits, "access", EVERYONE)
            trace.append({
                "kb": cfg.name,
                "kbId": sel.kb.id,
                "provider": cfg.embeddingProvider,
                **({"providerId": cfg.embeddingProviderId} if cfg.embeddingProviderId else {}),
                "storeType": cfg.storeType,
                "searchMode": cfg.searchMode,
                "queryStrategy": strategy,
                "maxResults": sel.max_results,
                "minScore": sel.min_score,
                "retrievedCount": len(hits),
                "chunks": [
                    {"id": h.id, "score": round(h.score, 6), "source": h.metadata.get("source")} for h in hits
                ],
                **({"rerank": rerank} if (rerank := getattr(hits, "rerank", None)) else {}),
                **({"wouldWithhold": would} if (would := getattr(hits, "would_withhold", None)) else {}),
                **({"auditEntry": entry} if (entry := getattr(hits, "audit", None)) else {}),  # (its entry in the audit record)
            })
            results.append((cfg.name, hits))
        if task.contextMerge == "workflow":  # EDDI's: each KB's own hits, KB after KB in workflow order
            passages = [Passage(kb, hit) for kb, hits in results for hit in hits]
        else:
            passages = merge(results, max((s.max_results for s in answered), default=0))
        if not passages:
            return RagResult(None, trace, searched=bool(answered), withheld=withheld)
        passages = self._expand(passages, answered, task.contextExpansion, user_id, trace, task.maxRagContextChars, readable)
        context, sources, _ = format_context(passages, task.maxRagContextChars, task.sourceLabels)
        injected = {hit for s in sources for hit in s.get("hits", [s["chunkId"]])}
        for entry in trace:
            for chunk in entry.get("chunks", []):
                chunk["injected"] = chunk["id"] in injected
            entry_sources = [s for s in sources if s["kb"] == entry["kb"] and "span" in s]
            if entry_sources:  # what was injected around the hits: replayable by chunk position
                entry["passages"] = [{"n": s["n"], "hits": s["hits"], "span": s["span"]} for s in entry_sources]
        return RagResult(context, trace, sources, searched=True, withheld=withheld)

    def _expand(self, passages: list[Passage], answered: list[KbSelection], mode: str | None, user_id: str | None,
                trace: list[dict[str, Any]], max_chars: int | None, readable: dict[str, Access]) -> list[Passage]:
        """Each KB's merged hits become passages (contextExpansion of the task, else of the KB): one
        per document, at the rank of its best hit; then they grow, best first, within the context
        budget (``maxRagContextChars``, less room for the labels) so that no hit is crowded out.
        A KB whose expansion fails keeps its bare hits."""
        rank = {(p.kb, p.hit.id): i for i, p in enumerate(passages)}
        out: list[tuple[int, Passage]] = []
        for sel in answered:
            cfg = sel.kb.config
            hits = [p.hit for p in passages if p.kb == cfg.name]
            if not hits:
                continue
            if (mode or cfg.contextExpansion) == "none":
                out += [(rank[(cfg.name, h.id)], Passage(cfg.name, h)) for h in hits]
                continue
            try:
                gathered = self.retriever.gather(sel.kb.id, cfg, hits, mode, user_id, readable[cfg.name])
            except Exception as e:  # noqa: BLE001 - the search answered; the bare hits still help
                error = self.redact(f"{type(e).__name__}: {e}")
                log.warning("knowledge base %r: context expansion failed: %s", cfg.name, error)
                # EDDI's third kind of trace entry: {kb, warning}
                trace.append({"kb": cfg.name, "warning": f"context expansion failed, its hits are used alone: {error}"})
                out += [(rank[(cfg.name, h.id)], Passage(cfg.name, h)) for h in hits]
                continue
            out += [(rank[(cfg.name, x.best.id)], Passage(cfg.name, x.best, x)) for x in gathered]
        ordered = [p for _, p in sorted(out, key=lambda pair: pair[0])]
        budget = max_chars - LABEL_ROOM * len(ordered) if max_chars and max_chars > 0 else None
        # every passage takes its room in the budget; a bare hit is a passage that cannot grow
        expansion.fill([p.expanded or expansion.Passage([p.hit], [Chunk(p.hit.id, p.hit.text, p.hit.metadata)])
                        for p in ordered], budget)
        return ordered
