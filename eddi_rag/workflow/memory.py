"""Conversation memory as the LlmTask hook sees it: the current turn's input, earlier
messages, and a key/value area where audit entries (``rag:trace:{taskId}``...) are written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eddi_rag.common.principals import Reader
from eddi_rag.workflow.memory_kb import EmbedCallback, SavedItem


@dataclass
class ConversationMemory:
    agent_id: str
    agent_version: int = 0
    user_input: str | None = None
    user_id: str | None = None  # retrieval only returns this user's private chunks (and shared ones)
    reader: Reader | None = None  # whose permissions retrieval reads with; None: user_id's, groups from the directory
    history: list[tuple[str, str]] = field(default_factory=list)  # (role, text): "user" | "assistant"
    data: dict[str, Any] = field(default_factory=dict)
    conversation_id: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)  # EDDI's conversation properties (templates read them)
    context: dict[str, Any] = field(default_factory=dict)  # EDDI's context of the turn (templates read it)
    # Called with each turn saved (REQ-EMB-005), e.g. MemoryKnowledge; None: turns are not embedded.
    on_save: EmbedCallback | None = field(default=None, repr=False, compare=False)

    def save_turn(self, role: str, text: str) -> None:
        """Add a turn to the history, and hand it to the embed callback when there is one."""
        self.history.append((role, text))
        if self.on_save is not None:
            self.on_save(SavedItem("turn", self.agent_id, text, self.user_id, self.conversation_id, role))

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def template_data(self, user_input: str) -> dict[str, Any]:
        """What an httpCall's templates read, named as EDDI's template data names it."""
        return {"userInput": user_input, "memory": {"current": {"input": self.user_input}}, "properties": self.properties,
                "context": self.context, "userInfo": {"userId": self.user_id},
                "conversationInfo": {"conversationId": self.conversation_id, "agentId": self.agent_id}}
