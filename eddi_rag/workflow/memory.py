"""Conversation memory as the LlmTask hook sees it: the current turn's input, earlier
messages, and a key/value area where audit entries (``rag:trace:{taskId}``...) are written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ConversationMemory:
    agent_id: str
    agent_version: int = 0
    user_input: str | None = None
    user_id: str | None = None  # retrieval only returns this user's private chunks (and shared ones)
    history: list[tuple[str, str]] = field(default_factory=list)  # (role, text): "user" | "assistant"
    data: dict[str, Any] = field(default_factory=dict)

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)
