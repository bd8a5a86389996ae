"""The LlmTask hook: what an agent runtime calls on each turn of an LLM task.

discover KBs → retrieve → build the system message (``## Search Results:`` then
``## Relevant Context:``) → call the chat model → write output and audit entries to memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from eddi_rag.common import metrics
from eddi_rag.common.quoting import DOCUMENTS, SEARCH_RESULTS
from eddi_rag.config import MISS_PHRASES, ConfigValidationError, LlmTaskRag, llm_task_errors
from eddi_rag.errors import EddiRagError
from eddi_rag.workflow.context import RagContextProvider
from eddi_rag.workflow.conversation import (
    check_citations,
    query_for_turn,
    remember_topic,
)
from eddi_rag.workflow.httpcall import call_for_context
from eddi_rag.workflow.memory import ConversationMemory
from eddi_rag.workflow.traversal import DiscoveredKb, Discovery, WorkflowTraversal

if TYPE_CHECKING:  # (langchain-core's chat models and messages: half a second to import, paid at a turn's first need)
    import httpx
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

log = logging.getLogger(__name__)

RELEVANT_CONTEXT = "## Relevant Context:\n"  # the header the passages are injected under
SEARCH_RESULTS_HEADER = "## Search Results:"  # (what an httpCall found, httpCallRag, comes first)
WITHHELD = ("## Retrieval Withheld:\nKnowledge base(s) {} could not be read for this conversation's user (it has no "
            "verified user, or that user may not read them). Do not guess what they hold; if the question needs them, say so.")


@dataclass
class TurnResult:
    system_message: str
    messages: list[BaseMessage]
    answer: str | None = None
    discovery: Discovery = field(default_factory=Discovery)
    sources: list[dict[str, Any]] = field(default_factory=list)  # the passages injected, by [Source n]
    task_id: str = "default"
    temperature: float | None = None  # the task's ragTemperature, on a turn with context
    miss_phrases: list[str] | None = None
    searched: bool = False  # knowledge bases were searched this turn
    missed: bool = False  # a RAG miss was recorded this turn


def says_nothing_found(answer: str, phrases: list[str] | None = None) -> str | None:
    """The phrase (case-insensitive) by which ``answer`` says nothing relevant was found, if any."""
    text = (answer or "").lower().replace("\u2019", "'")
    return next((p for p in (MISS_PHRASES if phrases is None else phrases) if p and p.lower() in text), None)


def record_miss(memory: ConversationMemory, tid: str, reason: str, query: str, **extra: Any) -> None:
    """A RAG miss: ``rag:miss:{taskId}`` in memory and the metric (the TypeSense spec wants under 20%)."""
    metrics.RAG_MISSES.labels(reason).inc()
    memory.set(f"rag:miss:{tid}", {"reason": reason, "query": query, **extra})


def task_id(task: dict[str, Any]) -> str:
    return str(task.get("id") or "default")


def system_prompt(task: dict[str, Any]) -> str:
    params = task.get("parameters") or {}
    return str(params.get("systemMessage") or task.get("systemMessage") or "")


class NoLlmTaskError(EddiRagError, ValueError):
    """The agent's workflows declare no LLM task (or not the one asked for)."""
    status = 400


def choose_task(discovery: Discovery, agent_id: str, wanted: str | None = None) -> dict[str, Any]:
    """The LLM task ``wanted`` (by id), or the first one of the agent's workflows."""
    tasks = discovery.llm_tasks
    if not tasks:
        raise NoLlmTaskError(f"agent {agent_id!r}: its workflows have no LLM step (eddi://ai.labs.llm) with tasks")
    if wanted is None:
        return tasks[0]
    for task in tasks:
        if task_id(task) == wanted:
            return task
    raise NoLlmTaskError(f"agent {agent_id!r} has no LLM task {wanted!r}; it has {', '.join(task_id(t) for t in tasks)}")


class ChatModelUnavailableError(EddiRagError):
    """The chat model did not answer (unreachable, refused, timed out, an error of its own): HTTP 502, naming the
    model and where it is reached, which is what a caller can act on."""
    status = 502


def invoke_chat(model: Any, messages: list[Any], redact: Callable[[str], str] = lambda s: s) -> Any:
    """``model.invoke(messages)``; a failure of the model's own becomes ChatModelUnavailableError."""
    try:
        return model.invoke(messages)
    except EddiRagError:
        raise
    except Exception as e:  # noqa: BLE001 - every client raises its own kinds
        bound = getattr(model, "bound", model)  # (a model with call options bound)
        name = getattr(bound, "model_name", None) or getattr(bound, "model", None) or type(bound).__name__
        where = getattr(bound, "openai_api_base", None) or getattr(bound, "base_url", None)
        raise ChatModelUnavailableError(redact(f"the chat model {name!r}{f' at {where}' if where else ''} did not answer: "
                                               f"{type(e).__name__}: {e}")) from e


class LlmTaskHook:
    def __init__(self, traversal: WorkflowTraversal, provider: RagContextProvider,
                 http: httpx.Client | Callable[[], httpx.Client] | None = None,
                 extra_knowledge_bases: Callable[[str, str | None], list[DiscoveredKb]] | None = None,
                 resolve: Callable[[str, str], str] = lambda text, tenant: text):
        """``http``: the client of httpCallRag's calls, or what makes it at the first (httpx stays off a start's path);
        ``extra_knowledge_bases(agent_id, user_id)``: KBs a task may name besides its workflows' (the agent's memory
        KB); ``resolve(text, tenant)``: ``text`` with its secret references resolved in ``tenant`` (an httpCall's)."""
        self.traversal, self.provider, self._http = traversal, provider, http
        self.extra_knowledge_bases, self.resolve = extra_knowledge_bases, resolve

    @property
    def http(self) -> httpx.Client | None:
        if callable(self._http):
            self._http = self._http()
        return self._http

    def prepare(self, memory: ConversationMemory, task: dict[str, Any], discovery: Discovery | None = None) -> TurnResult:
        """Everything up to the model call: RAG, the system message, the message list. ``discovery``:
        the agent's workflows already traversed (default: traversed here when the task wants RAG)."""
        if problems := llm_task_errors({"tasks": [task]}):  # (a task saved before the save rule: a 400 naming it)
            raise ConfigValidationError([{**p, "path": p["path"].replace("$.tasks[0]", f"$.tasks[id={task_id(task)}]")}
                                         for p in problems])
        rag = LlmTaskRag.model_validate(task)
        tid = task_id(task)
        system = system_prompt(task)
        query = (memory.user_input or "").strip()
        sources: list[dict[str, Any]] = []
        searched = missed = False
        wants_rag = bool(rag.knowledgeBases) or rag.enableWorkflowRag or bool(rag.httpCallRag)
        if discovery is None and query and wants_rag:
            try:
                discovery = self.traversal.discover(memory.agent_id, memory.agent_version)
            except Exception as e:  # noqa: BLE001 - RAG never breaks the turn
                log.warning("workflow discovery failed for agent %s: %s", memory.agent_id, e)
        discovery = discovery or Discovery()
        if query and wants_rag and self.extra_knowledge_bases is not None:  # e.g. the agent's memory KB
            known = {kb.id for kb in discovery.knowledge_bases}
            extra = [kb for kb in self.extra_knowledge_bases(memory.agent_id, memory.user_id) if kb.id not in known]
            discovery = replace(discovery, knowledge_bases=[*discovery.knowledge_bases, *extra])
        if query and wants_rag:
            if rag.httpCallRag:
                try:
                    tenant = discovery.tenant
                    result = call_for_context(discovery.httpcalls, rag.httpCallRag, memory.template_data(query), self.http,
                                              rag.maxRagContextChars, lambda text: self.resolve(text, tenant))
                    if result.context:
                        system += f"\n\n{SEARCH_RESULTS_HEADER}\n" + rag.framed(result.context, SEARCH_RESULTS)
                        memory.set(f"rag:httpcall:trace:{tid}", {"httpCall": result.name, "contextLength": len(result.context)})
                except Exception as e:  # noqa: BLE001 - the turn goes on without the search results
                    error = self.provider.redact(str(e))
                    log.warning("httpCallRag %r failed: %s", rag.httpCallRag, error)
                    memory.set(f"rag:httpcall:trace:{tid}", {"httpCall": rag.httpCallRag, "error": error})
            try:
                search_text, strategy = (query, "raw") if rag.queryStrategy == "raw" else query_for_turn(memory)
                log.info("task %s searches with the %s query strategy", tid, strategy)
                memory.data.pop(f"rag:miss:{tid}", None)  # a miss of an earlier turn
                found = self.provider.retrieve(rag, discovery.knowledge_bases, search_text, memory.user_id, strategy,
                                              memory.agent_id, memory.reader)
                searched = found.searched
                if found.trace:
                    memory.set(f"rag:trace:{tid}", found.trace)
                    remember_topic(memory, search_text)
                if found.context:
                    system += "\n\n" + RELEVANT_CONTEXT + rag.framed(found.context, DOCUMENTS)
                    memory.set(f"rag:context:{tid}", found.context)
                    sources = found.sources
                    metrics.RAG_TURNS.labels("context").inc()
                    if rag.grounding():
                        system += "\n\n" + rag.grounding()
                elif found.searched:
                    metrics.RAG_TURNS.labels("miss").inc()
                    record_miss(memory, tid, "no-context", search_text)
                    missed = True
                    if rag.noRelevantContextMessage:
                        system += "\n\n" + RELEVANT_CONTEXT + rag.noRelevantContextMessage
                if found.withheld:  # the model knows it was not shown them, so it does not answer as if it had been
                    system += "\n\n" + WITHHELD.format(", ".join(repr(name) for name in found.withheld))
            except Exception as e:  # noqa: BLE001 - RAG never breaks the turn
                metrics.RAG_TURNS.labels("error").inc()
                log.warning("RAG failed for task %s: %s", tid, self.provider.redact(str(e)))
        if rag.maxSystemPromptChars and rag.maxSystemPromptChars > 0 and len(system) > rag.maxSystemPromptChars:
            limit = rag.maxSystemPromptChars  # EDDI's cap of the whole prompt, after RAG
            system = system[:limit] + f"\n[... system prompt truncated at {limit} characters ...]"
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        messages: list[BaseMessage] = [SystemMessage(system)] if system else []
        for role, text in memory.history:
            messages.append(HumanMessage(text) if role == "user" else AIMessage(text))
        if memory.user_input:
            messages.append(HumanMessage(memory.user_input))
        return TurnResult(system, messages, discovery=discovery, sources=sources, task_id=tid,
                          temperature=rag.ragTemperature if sources else None, miss_phrases=rag.missPhrases,
                          searched=searched, missed=missed)

    def execute(self, memory: ConversationMemory, task: dict[str, Any], chat_model: BaseChatModel | None,
                discovery: Discovery | None = None) -> TurnResult:
        turn = self.prepare(memory, task, discovery)
        if chat_model is None:
            return turn
        # ragTemperature on a turn with context: a call option every LangChain chat model passes on
        model = chat_model if turn.temperature is None else chat_model.bind(temperature=turn.temperature)
        reply = invoke_chat(model, turn.messages, self.provider.redact)
        turn.answer = reply.content if isinstance(reply.content, str) else str(reply.content)
        memory.set("output", turn.answer)
        phrase = says_nothing_found(turn.answer, turn.miss_phrases) if turn.searched and not turn.missed else None
        if phrase:
            turn.missed = True
            record_miss(memory, turn.task_id, "answer", memory.user_input or "", phrase=phrase)
        citations = check_citations(turn.answer, turn.sources, turn.task_id)
        if citations or turn.sources:
            memory.set(f"rag:citations:{turn.task_id}", citations)
        if memory.user_input:
            memory.save_turn("user", memory.user_input)
        memory.save_turn("assistant", turn.answer)
        return turn
