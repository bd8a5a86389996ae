"""Wires the components into one object the API, the CLI and the demo share."""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eddi_rag import paths, registry
from eddi_rag.auth.keys import KeyStore
from eddi_rag.collections import Collections
from eddi_rag.config import (
    ConfigValidationError,
    RagConfiguration,
    validate_rag_configuration,
)
from eddi_rag.db import Database
from eddi_rag.embeddings import references
from eddi_rag.embeddings.cache import open_cache
from eddi_rag.factories import EmbeddingModelFactory, EmbeddingStoreFactory, RerankerFactory
from eddi_rag.feedback import FeedbackLog
from eddi_rag.ingest.jobs import IngestionQueue, Progress
from eddi_rag.ingest.loaders import detect
from eddi_rag.ingest.pipeline import Ingestor
from eddi_rag.outbound import OutboundPolicy
from eddi_rag.pipeline import KbGenerations, RagPipeline
from eddi_rag.resources import ResourceNotFoundError, SqliteResourceStore
from eddi_rag.retrieval.retriever import Retriever, visible_to
from eddi_rag.secrets import SecretResolver
from eddi_rag.sources.schedule import SourceScheduler
from eddi_rag.sources.sync import SourceSync
from eddi_rag.stores.base import KEYWORD_SEARCH, StoreContext
from eddi_rag.workflow.context import RagContextProvider
from eddi_rag.workflow.llm_task import LlmTaskHook, TurnResult, choose_task
from eddi_rag.workflow.memory import ConversationMemory
from eddi_rag.workflow.memory_kb import EmbeddingSettings, MemoryKnowledge, NotesStore
from eddi_rag.workflow.traversal import WorkflowTraversal

log = logging.getLogger(__name__)

DB_FILE = "eddi-rag.db"
DOCUMENT_SCAN = 20_000  # chunks read to list a KB's documents


def _has_keyword_search(store_type: str) -> bool | None:
    """Whether the store type declares keyword search; None when its extra is not installed."""
    try:
        return KEYWORD_SEARCH in registry.load(registry.STORES, store_type).capabilities
    except registry.ProviderUnavailableError:
        return None


def embedding_status(config: RagConfiguration) -> dict[str, Any]:
    """How a KB embeds: {status: ok, provider, providerId?} or {status: disabled, reason}."""
    via = {"providerId": config.embeddingProviderId} if config.embeddingProviderId else {}
    if config.embedding_disabled:
        return {"status": "disabled", "reason": config.embedding_disabled, **via}
    return {"status": "ok", "provider": config.embeddingProvider, **via}


class Runtime:
    def __init__(self, data_dir: str | Path | None = None, resolver: SecretResolver | None = None,
                 embedding_cache: str | None = None, outbound: OutboundPolicy | None = None):
        """``data_dir=None`` keeps everything in memory (tests, throwaway demos).
        ``embedding_cache``: ``sqlite`` (default), a ``redis://`` URL or ``none`` (env EDDI_RAG_EMBEDDING_CACHE).
        ``outbound``: which addresses web sources and httpCall RAG may reach (default: EDDI_RAG_OUTBOUND_ALLOW)."""
        self.outbound = outbound or OutboundPolicy.from_env()
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.db = Database(self.data_dir / DB_FILE if self.data_dir else ":memory:")
        self.resolver = resolver or SecretResolver()
        self.resources = SqliteResourceStore(self.db)
        cache = embedding_cache or os.environ.get("EDDI_RAG_EMBEDDING_CACHE")
        self.embeddings = EmbeddingModelFactory(open_cache(cache, self.db), self.resolver)
        self.stores = EmbeddingStoreFactory(StoreContext(self.db, self.data_dir), self.resolver)
        self.generations = KbGenerations(self.db)
        self.ingestor = Ingestor(self.embeddings, self.stores, on_change=self.generations.bump)
        self.retriever = Retriever(self.embeddings, self.stores, RerankerFactory(self.resolver))
        self.traversal = WorkflowTraversal(self.resources, self.resolve_embedding)
        self.llm_task = LlmTaskHook(self.traversal, RagContextProvider(self.retriever, self.resolver.redact),
                                    self.outbound.client(timeout=10), self._memory_knowledge_bases)
        self.memory_knowledge: MemoryKnowledge | None = None  # remember_conversations() turns it on
        self.notes = NotesStore(self.db)
        self.jobs = IngestionQueue(self.db, self._run_job, self.resolver.redact)
        self.pipeline = RagPipeline(self)
        self.sources = SourceSync(self)
        self.collections = Collections(self.db, self.stores)
        self.keys = KeyStore(self.db)
        self.feedback = FeedbackLog(self.db)
        self.scheduler = SourceScheduler(self)

    def validate_rag(self, data: Any) -> RagConfiguration:
        """Schema validation plus: the named provider and store type are registered."""
        config = validate_rag_configuration(data)
        errors = []
        checks = [(registry.STORES, "$.storeType", config.storeType, config.storeParameters)]
        if config.embeddingProvider:  # (embeddingProviderId is resolved when used: its entry may come later)
            params = {} if config.embeddingProviderId else config.embeddingParameters  # checked against the entry's type then
            checks.insert(0, (registry.EMBEDDINGS, "$.embeddingProvider", config.embeddingProvider, params))
        for group, path, value, params in checks:
            known = registry.names(group)
            if value not in known:
                errors.append({"path": path, "message": f"{value!r} is not registered; known: {', '.join(known)}", "value": value})
            else:
                errors += registry.validate_parameters(group, value, params)
        if config.searchMode != "vector" and config.storeType in registry.store_types():
            # Without the store's extra we cannot tell; building the store will.
            if _has_keyword_search(config.storeType) is False:
                capable = [n for n in registry.store_types() if _has_keyword_search(n)]
                errors.append({"path": "$.searchMode", "value": config.searchMode,
                               "message": f"{config.searchMode!r} needs keyword search; storeType {config.storeType!r} has none "
                                          f"(use {', '.join(capable)}, or searchMode 'vector')"})
        errors += paths.errors(config, self.data_dir)
        if errors:
            raise ConfigValidationError(errors)
        return config

    def rag_config(self, kb_id: str, version: int = 0) -> RagConfiguration:
        """The KB's configuration, its embedding provider reference resolved in the KB's own tenant
        (or marked disabled)."""
        config = validate_rag_configuration(self.resources.read("rags", kb_id, version))
        if not config.embeddingProviderId:
            return config
        return self.resolve_embedding(config, self.resources.tenant_of("rags", kb_id))

    def provider_entry(self, provider_id: str, tenant: str) -> dict[str, Any] | None:
        """An entry of ``tenant``'s providers map (/providerstore/providers), or None (another tenant's too)."""
        try:
            return self.resources.read("providers", provider_id, tenant=tenant)
        except ResourceNotFoundError:
            return None

    def resolve_embedding(self, config: RagConfiguration, tenant: str) -> RagConfiguration:
        """``config`` with its embedding backend resolved from embeddingProviderId (an entry of
        ``tenant``'s providers map) / embeddingProvider."""
        return references.resolve_config(config, lambda id: self.provider_entry(id, tenant), registry.parameter_names)

    def _run_job(self, kb_id: str, version: int, document: str, data: bytes, fmt: str, progress: Progress) -> int:
        return self.ingestor.ingest_file(kb_id, self.rag_config(kb_id, version), document, data, fmt, progress.embedded,
                                         progress.parsed, progress.cancelled).chunks

    def ingest_file(self, kb_id: str, document: str, data: bytes, content_type: str | None = None,
                    version: int = 0, **kwargs: Any) -> int:
        """Ingest a file synchronously (the CLI): its type detected from the bytes, ``content_type``
        and ``document``'s extension. Raises UnsupportedFileTypeError / UnreadableDocumentError."""
        fmt = detect(data, content_type, document)
        return self.ingestor.ingest_file(kb_id, self.rag_config(kb_id, version), document, data, fmt, **kwargs).chunks

    def ingest(self, kb_id: str, document: str, text: str, version: int = 0, **kwargs: Any) -> int:
        """Ingest synchronously (the CLI and demo); the API queues jobs instead."""
        return self.ingestor.ingest_text(kb_id, self.rag_config(kb_id, version), document, text, **kwargs).chunks

    def query(self, kb_id: str, query: str, max_results: int | None = None, min_score: float | None = None,
              where: dict[str, Any] | None = None, user_id: str | None = None):
        return self.retriever.search(kb_id, self.rag_config(kb_id), query, max_results, min_score, where, user_id)

    def health(self, kb_id: str) -> dict[str, Any]:
        """{status, timestamp, error?, details} of a KB's store; never raises for store problems."""
        config = self.rag_config(kb_id)
        timestamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            report = self.stores.get(kb_id, config).health()
        except Exception as e:  # noqa: BLE001 - unreachable, missing secret, missing extra...
            report = {"status": "error", "error": f"{type(e).__name__}: {e}", "details": {}}
        result = {"status": report["status"], "timestamp": timestamp, "storeType": config.storeType,
                  "details": report.get("details", {}), "embedding": embedding_status(config)}
        if "error" in report:  # engines' messages may quote connection details: never a resolved secret
            result["error"] = self.resolver.redact(report["error"])
        return result

    def chunk_counts(self) -> list[tuple[str, str, str, int]]:
        """(KB id, name, store type, chunks) of every knowledge base whose store answers."""
        out = []
        for kb_id in self.resources.ids("rags"):
            try:
                config = self.rag_config(kb_id)
                out.append((kb_id, config.name, config.storeType, self.stores.get(kb_id, config).count()))
            except Exception as e:  # noqa: BLE001 - an unreachable store is health's business, not the count's
                log.debug("no chunk count for %s: %s", kb_id, self.resolver.redact(str(e)))
        return out

    def turn(self, agent_id: str, message: str, user_id: str | None = None, task: str | None = None,
             chat_model: Any = None, tenant: str | None = None) -> dict[str, Any]:
        """One turn of an agent's LLM task through the LlmTask hook, as a runtime would run it: the
        whole system message, the messages, the memory entries written, and the answer when a chat
        model is given (None: everything up to the model call). ``tenant``: the caller's (another
        tenant's agent is not found); every reference is resolved in the agent's tenant."""
        memory = ConversationMemory(agent_id=agent_id, user_input=message, user_id=user_id, on_save=self.memory_knowledge)
        result = self.run_turn(memory, task, chat_model, tenant)
        return {"agentId": agent_id, "taskId": result.task_id, "systemMessage": result.system_message,
                "messages": [{"role": m.type, "content": m.content} for m in result.messages],
                "knowledgeBases": [kb.config.name for kb in result.discovery.knowledge_bases],
                "skipped": result.discovery.skipped, "memory": memory.data, "answer": result.answer}

    def run_turn(self, memory: ConversationMemory, task: str | None = None, chat_model: Any = None,
                 tenant: str | None = None) -> TurnResult:
        """The LlmTask hook on ``memory``: the agent's workflows traversed (within the agent's tenant;
        ``tenant``: the caller's, which must be the agent's), its LLM task ``task`` (default: the first),
        the chat model called when given."""
        discovery = self.traversal.discover(memory.agent_id, memory.agent_version, tenant)
        return self.llm_task.execute(memory, choose_task(discovery, memory.agent_id, task), chat_model, discovery)

    def documents(self, kb_id: str, max_chunks: int = DOCUMENT_SCAN, user_id: str | None = None) -> dict[str, Any]:
        """The KB's documents ({documentId, source, chunks, ingestedAt, user?}), read from its store's
        chunks (the store is the truth); past ``max_chunks`` chunks the list is cut: ``complete`` false.
        ``user_id``: only the shared documents and that user's own, as that user's search sees them."""
        store = self.stores.get(kb_id, self.rag_config(kb_id))
        found: dict[str, dict[str, Any]] = {}
        chunks = store.get(visible_to(user_id) if user_id is not None else None, limit=max_chunks + 1)
        for c in chunks[:max_chunks]:
            m = c.metadata
            doc = found.setdefault(m.get("document_id", "?"), {
                "documentId": m.get("document_id"), "source": m.get("source"), "chunks": 0, "ingestedAt": m.get("ingestedAt"),
                **({"userId": m["user_id"]} if "user_id" in m else {})})
            doc["chunks"] += 1
        return {"kbId": kb_id, "documents": sorted(found.values(), key=lambda d: str(d["documentId"])),
                "complete": len(chunks) <= max_chunks}

    def delete_document(self, kb_id: str, document_id: str, user_id: str | None = None) -> int:
        """Remove one document's chunks; returns how many (0: no such document). ``user_id``: only a
        shared document or that user's own."""
        where = {"document_id": document_id}
        return self._delete_chunks(kb_id, {"$and": [where, visible_to(user_id)]} if user_id is not None else where)

    def chunk_visible(self, kb_id: str, chunk_id: str, user_id: str | None) -> bool:
        """Whether the KB holds ``chunk_id`` and ``user_id``'s search could find it (shared, or that user's)."""
        return bool(self.stores.get(kb_id, self.rag_config(kb_id)).get(visible_to(user_id), limit=1, ids=[chunk_id]))

    def _delete_chunks(self, kb_id: str, where: dict[str, Any]) -> int:
        removed = self.stores.get(kb_id, self.rag_config(kb_id)).delete(where=where)
        if removed:
            self.generations.bump(kb_id)  # cached results of this KB are stale
        return removed

    def delete_knowledge_base(self, kb_id: str, version: int = 0, permanent: bool = False) -> None:
        """Soft delete (the configuration's history kept, chunks untouched), or permanent: its chunks
        dropped from the store, then every version."""
        self.jobs.cancel_kb(kb_id)  # its waiting ingestions stop (a processing one within a second)
        if permanent:
            try:
                self.drop_knowledge_base(kb_id)
            except ResourceNotFoundError:
                pass  # already soft-deleted: its config is gone, nothing we can open to drop
        self.resources.delete("rags", kb_id, version, permanent)

    def drop_knowledge_base(self, kb_id: str) -> None:
        """Remove a KB's chunks from its store (permanent delete of its configuration)."""
        self.stores.get(kb_id, self.rag_config(kb_id)).drop()
        self.stores.evict(kb_id)
        self.generations.bump(kb_id)

    def purge_expired(self, kb_id: str, now: float | None = None) -> int:
        """Delete the KB's chunks whose time to live has passed; returns how many."""
        when = time.time() if now is None else now
        return self._delete_chunks(kb_id, {"expires": True, "expiresAt": {"$lte": when}})

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def remember_conversations(self, embedding: EmbeddingSettings, **options: Any) -> MemoryKnowledge:
        """Make saved turns and notes searchable (REQ-EMB-005): the returned callback embeds what the
        notes store and every ConversationMemory of ``turn`` save into the agent's memory KB
        (``options``: MemoryKnowledge's name, per, store_type). Give it to your own
        ConversationMemory as ``on_save``."""
        if self.memory_knowledge is not None:
            self.memory_knowledge.close()
        self.memory_knowledge = MemoryKnowledge(self, embedding, **options)
        self.notes.on_save = self.memory_knowledge
        return self.memory_knowledge

    def _memory_knowledge_bases(self, agent_id: str, user_id: str | None) -> list[Any]:
        return [] if self.memory_knowledge is None else self.memory_knowledge.knowledge_bases(agent_id, user_id)

    def close(self) -> None:
        if self.memory_knowledge is not None:
            self.memory_knowledge.close()
        self.scheduler.stop()
        self.jobs.stop()
        self.stores.context.close()
        self.db.close()
