"""The LlmTask hook where LangChain and LangGraph agents live.

``rag_runnable(runtime.turns, agent_id)``: a LangChain ``Runnable`` taking ``{"messages": [...], "user_id":
...}`` and giving ``{"messages": the augmented messages (the task's system message with
## Relevant Context:, the history, the question), "system_message", "sources", "traces": the
rag:* memory entries}`` — pipe its ``messages`` into any chat model.

``rag_node(runtime.turns, agent_id, chat_model)``: a ready LangGraph node over ``RagState`` (LangGraph's
``MessagesState`` plus ``user_id`` and ``rag``, the turn's memory entries carried between turns so
follow-ups keep the conversation's topic): it answers the last human message through the hook
(context, ragTemperature, citations, misses) and appends the answer.

The agent's workflows are traversed each turn (a changed configuration counts at the next turn); the
LLM task is the agent's first, or ``task`` by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_messages
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph import MessagesState

from eddi_rag.verbs.audit import acting
from eddi_rag.verbs.turns import Turns
from eddi_rag.workflow.memory import ConversationMemory


class RagState(MessagesState):
    """LangGraph state of an agent turned by ``rag_node``."""

    user_id: str | None
    rag: dict[str, Any]  # memory entries of the last turn (rag:trace:*, rag:context:*, rag:topic...)


def _memory(agent_id: str, messages: Sequence[BaseMessage], user_id: str | None, data: dict[str, Any] | None,
            on_save: Any = None) -> ConversationMemory:
    """The hook's memory from a message list: the last human message is the turn's input, the
    human/AI messages before it the history (system messages are the task's own)."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
    if last is None:
        raise ValueError("messages: there is no human message to answer")
    history = [("user" if isinstance(m, HumanMessage) else "assistant", str(m.content))
               for m in messages[:last] if isinstance(m, (HumanMessage, AIMessage))]
    return ConversationMemory(agent_id=agent_id, user_input=str(messages[last].content), user_id=user_id,
                              history=history, data=dict(data or {}), on_save=on_save)


def _rag_entries(memory: ConversationMemory) -> dict[str, Any]:
    """The turn's memory entries the hook wrote (rag:trace:*, rag:context:*, rag:topic...)."""
    return {k: v for k, v in memory.data.items() if k.startswith("rag:")}


def rag_runnable(turns: Turns, agent_id: str, task: str | None = None) -> Runnable[dict[str, Any], dict[str, Any]]:
    """The hook up to the model call, as a Runnable (see the module doc)."""

    def augment(inputs: dict[str, Any]) -> dict[str, Any]:
        messages = convert_to_messages(inputs.get("messages") or [])
        memory = _memory(agent_id, messages, inputs.get("user_id"), inputs.get("rag"))
        with acting("langgraph"):
            turn = turns.run(memory, task)
        return {"messages": turn.messages, "system_message": turn.system_message, "sources": turn.sources,
                "traces": _rag_entries(memory)}

    return RunnableLambda(augment, name="eddi_rag_llm_task")


def rag_node(turns: Turns, agent_id: str, chat_model: BaseChatModel, task: str | None = None):
    """A LangGraph node over RagState that answers the last human message (see the module doc)."""

    def node(state: RagState) -> dict[str, Any]:
        memory = _memory(agent_id, list(state["messages"]), state.get("user_id"), state.get("rag"), turns.remembering.current)
        with acting("langgraph"):
            turn = turns.run(memory, task, chat_model)
        answer: BaseMessage = AIMessage(turn.answer or "")
        return {"messages": [answer], "rag": _rag_entries(memory)}

    node.__name__ = "eddi_rag"
    return node


__all__ = ["RagState", "rag_node", "rag_runnable"]
