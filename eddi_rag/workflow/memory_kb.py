"""Conversation memory and notes as knowledge (embedding-rag.md REQ-EMB-005).

The runtime's stores (the conversation memory the LlmTask hook saves turns to, the ``NotesStore``)
take an optional embed callback on save; none means no embedding, as before. ``MemoryKnowledge``
is that callback: each saved turn or note is queued (the turn is never held up), then written by a
background thread into the agent's memory knowledge base (``conversation-memory`` unless named
otherwise; one per agent, or one per user) through the ingestion pipeline and its embedding buffer.
Every item is kept private to the user it belongs to, so another user's search never sees it.

The LlmTask hook finds that KB like any other once a task names it (``knowledgeBases: [{"name":
"conversation-memory"}]``); ``enableWorkflowRag`` alone does not search it. Its embedding backend is
the runtime's embedding settings: ``providerId`` (the providers map), else ``provider`` by name;
neither leaves embedding disabled (REQ-EMB-011): saving goes on, nothing is embedded, and the KB's
health says why.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddi_rag import state
from eddi_rag.config import slug
from eddi_rag.resource_types import DEFAULT_TENANT, ResourceNotFoundError
from eddi_rag.resources import ResourceStore
from eddi_rag.state.sqlite import StateDatabase

log = logging.getLogger(__name__)

MEMORY_KB = "conversation-memory"
_STOP = object()


@dataclass(frozen=True)
class SavedItem:
    """What a store hands its embed callback when it saves a turn or a note."""

    kind: str  # "turn" | "note"
    agent_id: str
    text: str
    user_id: str | None = None
    conversation_id: str | None = None
    role: str | None = None  # a turn's: "user" | "assistant"
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    saved_at: float = field(default_factory=time.time)


EmbedCallback = Callable[[SavedItem], None]


@dataclass(frozen=True)
class EmbeddingSettings:
    """The runtime's embedding settings (REQ-EMB-008): a providers map entry, or a provider by name."""

    providerId: str | None = None
    provider: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    def rag_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"embeddingParameters": dict(self.parameters)}
        if self.providerId:
            out["embeddingProviderId"] = self.providerId
        if self.provider:
            out["embeddingProvider"] = self.provider
        return out


class NotesStore:
    """A knowledge/notes store of the runtime: notes an agent keeps (per user, or shared), in SQLite."""

    def __init__(self, db: StateDatabase, on_save: EmbedCallback | None = None):
        self.db, self.on_save = db, on_save
        state.migrate(db)

    def save(self, agent_id: str, text: str, user_id: str | None = None) -> str:
        if not text.strip():
            raise ValueError("a note needs text")
        item = SavedItem("note", agent_id, text, user_id)
        self.db.execute("INSERT INTO notes VALUES (?,?,?,?,?)", (item.id, agent_id, user_id, text, item.saved_at))
        if self.on_save is not None:
            self.on_save(item)
        return item.id

    def list(self, agent_id: str, user_id: str | None = None) -> list[dict[str, Any]]:
        rows = self.db.query("SELECT * FROM notes WHERE agent_id=? AND (user_id = ? OR user_id IS NULL) ORDER BY saved_at",
                             (agent_id, user_id))
        return [dict(r) for r in rows]


class MemoryKnowledge:
    """The embed callback that makes saved turns and notes searchable (see the module doc)."""

    def __init__(self, resources: ResourceStore, config_of: Callable[[str, int], Any], create: Callable[..., Any],
                 ingest: Callable[[list[Any], str], Any], embedding: EmbeddingSettings, name: str = MEMORY_KB,
                 per: str = "agent", store_type: str = "sqlite", max_pending: int = 10_000):
        """``config_of(kb_id, version)``, ``create(kind, data, tenant=, id=)`` and ``ingest(documents, kb_id)``:
        the verbs (``KnowledgeBases.get``, ``Saving.create``, ``Ingesting.batch``)."""
        if per not in ("agent", "user"):
            raise ValueError(f"per must be 'agent' or 'user', got {per!r}")
        self.resources, self.config_of, self.create, self.ingest = resources, config_of, create, ingest
        self.embedding, self.name, self.per, self.store_type = embedding, name, per, store_type
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="memory-knowledge", daemon=True)
        self._thread.start()
        self.errors: list[str] = []  # the last failures, for health and tests

    def kb_id(self, agent_id: str, user_id: str | None = None) -> str:
        owner = agent_id if self.per == "agent" or not user_id else f"{agent_id}-{user_id}"
        return f"memory-{slug(owner)}"[:120]

    def __call__(self, item: SavedItem) -> None:
        if item.text.strip():
            self._queue.put(item)  # waits only when max_pending items are already queued

    def flush(self, timeout: float = 60) -> None:
        """Wait until everything saved so far is searchable (tests, shutdown)."""
        done = threading.Event()
        self._queue.put(done)
        if not done.wait(timeout):
            raise TimeoutError(f"memory knowledge: items still queued after {timeout} s")

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout=60)

    def knowledge_bases(self, agent_id: str, user_id: str | None = None) -> list[Any]:
        """The memory KB of this agent (and user), as the hook discovers KBs; none before the first save."""
        from eddi_rag.workflow.traversal import DiscoveredKb

        id = self.kb_id(agent_id, user_id)
        try:  # the agent's tenant's (a KB of that id in another tenant is not its memory)
            version = self.resources.current_version("rags", id, tenant=self._tenant(agent_id))
        except ResourceNotFoundError:
            return []
        return [DiscoveredKb(id, version, self.config_of(id, version), workflow=False)]

    def _tenant(self, agent_id: str) -> str:
        """The agent's tenant (an agent not stored here: the default one)."""
        try:
            return self.resources.tenant_of("agents", agent_id)
        except ResourceNotFoundError:
            return DEFAULT_TENANT

    def _ensure(self, kb_id: str, agent_id: str) -> None:
        with self._lock:
            if not self.resources.exists("rags", kb_id):
                config = {"name": self.name, "storeType": self.store_type, "chunkStrategy": "recursive",
                          "contextExpansion": "none", "minScore": 0.55, **self.embedding.rag_fields()}
                self.create("rags", config, tenant=self._tenant(agent_id), id=kb_id,
                            description="Saved conversation turns and notes, searchable (REQ-EMB-005)")  # (the descriptor's)

    def _document(self, item: SavedItem) -> Any:
        from eddi_rag.ingest.pipeline import Document

        text = f"{item.role}: {item.text}" if item.role else item.text
        source = f"conversation {item.conversation_id}" if item.kind == "turn" and item.conversation_id else item.kind
        metadata = {"kind": item.kind, "agentId": item.agent_id, "savedAt": item.saved_at,
                    **({"role": item.role} if item.role else {}), **({"conversationId": item.conversation_id} if item.conversation_id else {})}
        return Document(f"{item.kind}:{item.id}", text, metadata, source=source, user_id=item.user_id)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while not self._queue.empty() and len(batch) < 64:  # what queued meanwhile goes in the same batch
                batch.append(self._queue.get())
            items = [i for i in batch if isinstance(i, SavedItem)]
            by_kb: dict[str, list[SavedItem]] = {}
            for item in items:
                by_kb.setdefault(self.kb_id(item.agent_id, item.user_id), []).append(item)
            for kb_id, group in by_kb.items():
                try:
                    self._ensure(kb_id, group[0].agent_id)
                    result = self.ingest([self._document(i) for i in group], kb_id)
                    failed = [f"{e['document_id']}: {e['error']}" for e in result.errors]
                except Exception as e:  # noqa: BLE001 - saving never breaks a turn; the failure is kept and logged
                    failed = [f"{type(e).__name__}: {e}"]
                if failed:
                    self.errors = (self.errors + failed)[-20:]
                    log.warning("memory knowledge %s: %d item(s) not embedded: %s", kb_id, len(failed), failed[0])
            for marker in batch:
                if isinstance(marker, threading.Event):
                    marker.set()
            if any(marker is _STOP for marker in batch):
                return


class Remembering:
    """Where saved turns and notes go: the ``MemoryKnowledge`` that ``Runtime.remember_conversations``
    turned on, or nowhere."""

    def __init__(self) -> None:
        self.current: MemoryKnowledge | None = None

    def knowledge_bases(self, agent_id: str, user_id: str | None) -> list[Any]:
        return [] if self.current is None else self.current.knowledge_bases(agent_id, user_id)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
