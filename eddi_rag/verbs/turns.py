"""One turn of an agent's LLM task through the LlmTask hook, as an agent runtime runs it, and the
context the hook would inject for one knowledge base (what the model sees)."""

from __future__ import annotations

from typing import Any

from eddi_rag.answers.choice import is_extractive, later
from eddi_rag.common.principals import Reader
from eddi_rag.common.quoting import DOCUMENTS, quoted
from eddi_rag.config import GROUNDING_INSTRUCTIONS, KnowledgeBaseRef, LlmTaskRag
from eddi_rag.records.audit import ACTING, acting, unwritten
from eddi_rag.verbs.knowledge_bases import KnowledgeBases
from eddi_rag.workflow.llm_task import RELEVANT_CONTEXT, LlmTaskHook, TurnResult, choose_task, invoke_chat
from eddi_rag.workflow.memory import ConversationMemory
from eddi_rag.workflow.memory_kb import Remembering
from eddi_rag.workflow.traversal import DiscoveredKb, WorkflowTraversal


class Turns:
    def __init__(self, traversal: WorkflowTraversal, llm_task: LlmTaskHook, kbs: KnowledgeBases, remembering: Remembering):
        self.traversal, self.llm_task, self.kbs, self.remembering = traversal, llm_task, kbs, remembering
        self.record: Any = None  # the audit record's (tenant, action, subject, detail): the answer's citations

    def turn(self, agent_id: str, message: str, user_id: str | None = None, task: str | None = None,
             chat_model: Any = None, tenant: str | None = None, properties: dict[str, Any] | None = None,
             context: dict[str, Any] | None = None, reader: Reader | None = None) -> dict[str, Any]:
        """The whole system message, the messages, the memory entries written, and the answer when a
        chat model is given (None: everything up to the model call). ``tenant``: the caller's (another
        tenant's agent is not found); every reference is resolved in the agent's tenant. ``reader``: whose permissions
        its knowledge bases are read with (default: ``user_id``'s, groups from the group directory)."""
        memory = ConversationMemory(agent_id=agent_id, user_input=message, user_id=user_id, on_save=self.remembering.current,
                                    properties=properties or {}, context=context or {}, reader=reader)
        result = self.run(memory, task, chat_model, tenant)
        return {"agentId": agent_id, "taskId": result.task_id, "systemMessage": result.system_message,
                "messages": [{"role": m.type, "content": m.content} for m in result.messages],
                "knowledgeBases": [kb.config.name for kb in result.discovery.knowledge_bases],
                "knowledgeBaseIds": {kb.config.name: kb.id for kb in result.discovery.knowledge_bases},
                "skipped": result.discovery.skipped, "memory": memory.data, "answer": result.answer}

    def run(self, memory: ConversationMemory, task: str | None = None, chat_model: Any = None,
            tenant: str | None = None) -> TurnResult:
        """The LlmTask hook on ``memory``: the agent's workflows traversed (within the agent's tenant;
        ``tenant``: the caller's, which must be the agent's), its LLM task ``task`` (default: the first),
        the chat model called when given."""
        discovery = self.traversal.discover(memory.agent_id, memory.agent_version, tenant)
        chosen = choose_task(discovery, memory.agent_id, task)
        now = ACTING.get()  # the hook's retrievals: face hook, the caller kept, the agent and conversation they serve
        face = now.face if now.face == "langgraph" else "hook"
        about = {"agent": memory.agent_id, "conversation": memory.conversation_id,
                 "task": chosen.get("id") if isinstance(chosen, dict) else task}
        with acting(face, about, **now.who):
            result = self.llm_task.execute(memory, chosen, chat_model, discovery)
            if result.answer is not None:
                self._cited(memory, result, about)
            return result

    def _cited(self, memory: ConversationMemory, result: TurnResult, about: dict[str, Any]) -> None:
        """The audit record's entry of an answer given from retrieved passages: the retrievals' entries and the
        citations it used (each source's document and chunk; ``known: false``, one that was not injected)."""
        retrievals = [e["auditEntry"] for e in memory.get(f"rag:trace:{result.task_id}") or [] if e.get("auditEntry")]
        if self.record is None or not retrievals:
            return
        cited = [{"n": c["n"], "known": c["known"], **({"kb": c.get("kb"), "document": c.get("source"), "chunk": c.get("chunkId")}
                                                      if c["known"] else {})} for c in memory.get(f"rag:citations:{result.task_id}") or []]
        tenant = result.discovery.knowledge_bases[0].config.tenant if result.discovery.knowledge_bases else "default"
        try:
            self.record(tenant, "answer", memory.agent_id, {"retrievals": retrievals, "citations": cited,
                                                            "sources": len(result.sources), **about})
        except Exception as e:  # noqa: BLE001 - closed: the answer is not given; open: logged
            unwritten(f"the answer of agent {memory.agent_id!r}", e)

    def context(self, kb_id: str, query: str, user_id: str | None = None, max_results: int | None = None,
                min_score: float | None = None, expansion: str | None = None,
                max_chars: int | None = 20000, reader: Reader | None = None) -> dict[str, Any]:
        """What one LLM task referencing this KB alone would inject for ``query``: {section (None:
        nothing passed; its passages, which a turn quotes: contextFraming), sources, trace, withheld}; ``reader``: whose
        permissions (default: ``user_id``'s)."""
        version = self.kbs.version(kb_id)
        config = self.kbs.get(kb_id, version)
        task = LlmTaskRag.model_validate({"knowledgeBases": [KnowledgeBaseRef(name=config.name, maxResults=max_results, minScore=min_score)],
                                          "contextExpansion": expansion, "maxRagContextChars": max_chars})
        found = self.llm_task.provider.retrieve(task, [DiscoveredKb(kb_id, version, config)], query, user_id, reader=reader)
        return {"kbId": kb_id, "query": query, "section": RELEVANT_CONTEXT + found.context if found.context else None,
                "sources": found.sources, "trace": found.trace, **({"withheld": True} if found.withheld else {})}

    @staticmethod
    def answered(section: str | None, query: str, chat_model: Any = None) -> dict[str, Any]:
        """An answer to ``query`` from ``section`` (what ``context`` injects), as a turn's would be: by ``chat_model``,
        or with none the extractive answer (the context's sentences that cover the question, with their ``[Source n]``), saying
        which: {text, by: "model" | "extractive", model}."""
        from langchain_core.messages import HumanMessage, SystemMessage

        from eddi_rag.answers.extractive import NOTHING_FOUND, ExtractiveChatModel

        model = chat_model if chat_model is not None else ExtractiveChatModel()
        extractive = is_extractive(model)  # (also when made at its first use: answers.choice.Deferred)
        if not section:
            text = NOTHING_FOUND
        else:
            framed = RELEVANT_CONTEXT + quoted(section.removeprefix(RELEVANT_CONTEXT), DOCUMENTS)
            reply = invoke_chat(model, [SystemMessage(f"{framed}\n\n{GROUNDING_INSTRUCTIONS}"), HumanMessage(query)])
            text = str(reply.content)
        return {"text": text, "by": "extractive" if extractive else "model",
                "model": None if extractive else getattr(model, "model_name", None) or type(model).__name__}


def answering_model(llm: str | None, base_url: str | None, model: str | None, offline: bool = False) -> Any:
    """The chat model a server's turns and Try it answer with (``--llm``, ``--base-url``, ``--model``), made at its first
    use; None when none answers (``--llm none``)."""
    return later(llm, base_url, model, offline)


def answers_extractively(model: Any) -> bool:
    """Whether ``model`` is the extractive answer (no language model): Try it says so."""
    return is_extractive(model)

