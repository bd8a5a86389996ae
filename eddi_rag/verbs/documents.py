"""A knowledge base's documents, read from its store's chunks (the store is the truth): list them,
delete one, purge expired chunks, drop them all. Every write bumps the KB's generation, so cached
search results are not served stale."""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from eddi_rag.backends.factories import EmbeddingStoreFactory
from eddi_rag.common import citations
from eddi_rag.common.principals import ACL, parse_acl
from eddi_rag.config import RagConfiguration
from eddi_rag.errors import EddiRagError
from eddi_rag.resource_types import ResourceNotFoundError
from eddi_rag.retrieval.generations import KbGenerations
from eddi_rag.retrieval.retriever import DISABLED, visible_to
from eddi_rag.stores import filters
from eddi_rag.stores.base import LIST_FILTERING, Chunk
from eddi_rag.stores.ownership import StoreOwnership
from eddi_rag.verbs.knowledge_bases import KnowledgeBases

DOCUMENT_SCAN = 20_000  # chunks read to list a KB's documents


class AclNotKeptError(EddiRagError, ValueError):
    """A store that cannot keep a document's ACL (EDDI's langchain4j layouts: scalar metadata only; HTTP 409)."""
    status = 409


def _seen_by(where: dict[str, Any] | None, user_id: str | None, readable: filters.Node | None = None) -> filters.Node | None:
    """``where`` as ``user_id`` sees it (shared chunks and that user's own) and, when given, only what ``readable``
    allows (retrieval.access: the chunks a reader's principals may read); None: every chunk."""
    parts = [p for p in (filters.parse(where) if where else None, filters.parse(visible_to(user_id)) if user_id else None,
                         readable) if p is not None]
    return None if not parts else parts[0] if len(parts) == 1 else filters.And(tuple(parts))


def _checked(chunks: builtins.list[Chunk], node: filters.Node | None, readable: filters.Node | None) -> builtins.list[Chunk]:
    """The chunks an engine returned for ``node``, checked again with the reference evaluator when a reader's
    ``readable`` is part of it: an engine's slip (a chunk without an ACL let through) hides a chunk, never shows it."""
    return chunks if readable is None else [c for c in chunks if filters.matches(node, c.metadata)]


class Documents:
    def __init__(self, kbs: KnowledgeBases, stores: EmbeddingStoreFactory, generations: KbGenerations,
                 let_go: Callable[[str, str], None] = lambda kb_id, document_id: None):
        """``let_go(kb_id, document_id)``: forget a document's kept file (IngestionQueue.let_go)."""
        self.kbs, self.stores, self.generations, self.let_go = kbs, stores, generations, let_go
        self.record: Callable[..., None] = lambda *entry: None  # the audit record (verbs.audit; given by the runtime)

    @property
    def ownership(self) -> StoreOwnership:
        """Who holds each physical store (the store factory's record)."""
        if self.stores.ownership is None:
            raise RuntimeError("the store factory records no ownership (a Runtime gives it one)")
        return self.stores.ownership

    def _store(self, kb_id: str, config: RagConfiguration | None = None):
        return self.stores.get(kb_id, config or self.kbs.get(kb_id))

    def list(self, kb_id: str, max_chunks: int = DOCUMENT_SCAN, user_id: str | None = None,
             readable: filters.Node | None = None) -> dict[str, Any]:
        """The KB's documents ({documentId, source, chunks, ingestedAt, user?, language?, acl?}); past ``max_chunks``
        chunks the list is cut: ``complete`` false. ``user_id``: only the shared documents and that
        user's own, as that user's search sees them; ``readable``: only what a reader may read (counts included)."""
        found: dict[str, dict[str, Any]] = {}
        node = _seen_by(None, user_id, readable)
        chunks = _checked(self._store(kb_id).get(node, limit=max_chunks + 1), node, readable)
        for c in chunks[:max_chunks]:
            m = c.metadata
            doc = found.setdefault(m.get("document_id", "?"), {
                "documentId": m.get("document_id"), "source": m.get("source"), "chunks": 0, "ingestedAt": m.get("ingestedAt"),
                **({"userId": m["user_id"]} if "user_id" in m else {}),
                **({"language": m["language"]} if isinstance(m.get("language"), str) else {}),
                **({"acl": m[ACL]} if isinstance(m.get(ACL), list) else {})})
            doc["chunks"] += 1
            doc["disabled"] = doc.get("disabled", 0) + (1 if m.get(DISABLED) else 0)
        return {"kbId": kb_id, "documents": sorted(found.values(), key=lambda d: str(d["documentId"])),
                "complete": len(chunks) <= max_chunks}

    def chunks(self, kb_id: str, document_id: str, user_id: str | None = None,
               readable: filters.Node | None = None) -> builtins.list[dict[str, Any]]:
        """One document's chunks in order: {id, position, where (page, section, rows...), text, enabled, acl (who may
        read it, when it says); a PDF's or an image's also page and boxes: where on the page, ``ingest.boxes``}.
        404 when the KB holds no such document (that this user, or reader, may see)."""
        node = _seen_by({"document_id": document_id}, user_id, readable)
        found = _checked(self._store(kb_id).get(node), node, readable)
        if not found:
            raise ResourceNotFoundError(f"knowledge base {kb_id} has no document {document_id!r}")
        found.sort(key=lambda c: c.metadata.get("position_in_doc", 0))
        return [{"id": c.id, "position": c.metadata.get("position_in_doc"), "where": citations.within(c.metadata),
                 "source": c.metadata.get("source"), "text": c.text, "enabled": not c.metadata.get(DISABLED),
                 **({"acl": c.metadata[ACL]} if isinstance(c.metadata.get(ACL), list) else {}),
                 **citations.place(c.metadata)} for c in found]

    def enable(self, kb_id: str, chunk_id: str, enabled: bool, user_id: str | None = None) -> dict[str, Any]:
        """Switch a chunk on or off: off, no search finds it and no passage shows it; its text and vector stay."""
        store = self._store(kb_id)
        found = store.get(_seen_by(None, user_id), ids=[chunk_id])
        if not found:
            raise ResourceNotFoundError(f"knowledge base {kb_id} has no chunk {chunk_id!r} you can see")
        chunk = found[0]
        meta = {k: v for k, v in chunk.metadata.items() if k != DISABLED} | ({} if enabled else {DISABLED: True})
        store.upsert([replace(chunk, metadata=meta)])
        self.generations.bump(kb_id)  # cached results of this KB are stale
        return {"kbId": kb_id, "chunkId": chunk_id, "enabled": enabled}

    def delete(self, kb_id: str, document_id: str, user_id: str | None = None) -> int:
        """Remove one document's chunks and its kept file (the body of its upload); returns how many chunks (0: no
        such document). ``user_id``: only a shared document or that user's own."""
        removed = self.delete_where(kb_id, _seen_by({"document_id": document_id}, user_id))
        if removed:
            self.let_go(kb_id, document_id)
            self.record(self.kbs.get(kb_id).tenant, "document.deleted", f"rags/{kb_id}", {"document": document_id, "chunks": removed})
        return removed

    def seen(self, kb_id: str, document_ids: builtins.list[str], readable: filters.Node | None) -> set[str]:
        """Those of ``document_ids`` the KB holds that a reader may read (``readable``: retrieval.access; None: every
        one the KB holds), for what names documents beside their chunks (ingestions)."""
        wanted, store = sorted(set(document_ids)), self._store(kb_id)

        def found(ids: builtins.list[str], limit: int) -> builtins.list[Chunk]:
            node = _seen_by({"document_id": {"$in": ids}}, None, readable)
            return _checked(store.get(node, limit=limit), node, readable)
        seen: set[str] = set()
        for start in range(0, len(wanted), filters.MAX_VALUES):
            ids = wanted[start:start + filters.MAX_VALUES]
            chunks = found(ids, DOCUMENT_SCAN)
            seen |= {str(c.metadata.get("document_id")) for c in chunks}
            if len(chunks) >= DOCUMENT_SCAN:  # long documents filled the read: the others asked for one at a time
                seen |= {d for d in ids if d not in seen and found([d], 1)}
        return seen

    def visible(self, kb_id: str, chunk_id: str, user_id: str | None, readable: filters.Node | None = None) -> bool:
        """Whether the KB holds ``chunk_id`` and ``user_id``'s search could find it (shared, or that user's; and what
        ``readable`` allows)."""
        node = _seen_by(visible_to(user_id), None, readable)
        return bool(_checked(self._store(kb_id).get(node, limit=1, ids=[chunk_id]), node, readable))

    def set_acl(self, kb_id: str, document_id: str, acl: Any) -> dict[str, Any]:
        """Who may read one document from now on (retrieval.access): its chunks' ``acl`` rewritten in one atomic
        replace, their texts and vectors as they were (nothing is embedded again); the next search honours it."""
        acl = parse_acl(acl, "acl")
        config = self.kbs.get(kb_id)
        store = self._store(kb_id, config)
        if LIST_FILTERING not in store.capabilities:
            raise AclNotKeptError(f"knowledge base {kb_id}: storeType {config.storeType!r} in EDDI's layout keeps scalar "
                                  "metadata only, so a document's ACL cannot be stored there")
        found = store.get({"document_id": document_id})
        if not found:
            raise ResourceNotFoundError(f"knowledge base {kb_id} has no document {document_id!r}")
        store.replace({"document_id": document_id}, [replace(c, metadata={**c.metadata, ACL: acl}) for c in found])
        self.generations.bump(kb_id)  # cached results of this KB are stale
        self.record(config.tenant, "acl.changed", f"rags/{kb_id}", {"documents": [{"document": document_id,
                    "before": found[0].metadata.get(ACL), "after": acl}]})
        return {"kbId": kb_id, "documentId": document_id, "acl": acl, "chunks": len(found)}

    def delete_where(self, kb_id: str, where: filters.Where, config: RagConfiguration | None = None) -> int:
        """Remove the chunks ``where`` matches (``config``: the KB's, when the caller has it already)."""
        removed = self._store(kb_id, config).delete(where=where)
        if removed:
            self.generations.bump(kb_id)  # cached results of this KB are stale
        return removed

    def purge_expired(self, kb_id: str, now: float | None = None) -> int:
        """Delete the KB's chunks whose time to live has passed; returns how many."""
        when = time.time() if now is None else now
        return self.delete_where(kb_id, {"expires": True, "expiresAt": {"$lte": when}})

    def drop(self, kb_id: str) -> None:
        """Remove a KB's chunks (a permanent delete of its configuration). Its table or collection is dropped only
        when this product created it and no other knowledge base uses it; in EDDI's "id" layout its own chunks are
        deleted (by their kbId tag); an adopted store, or one a KB used before ownership was recorded, is left as
        it is (stores.ownership)."""
        config = self.kbs.get(kb_id)
        store, place = self._store(kb_id, config), self.stores.place(kb_id, config)
        if place is None or self.ownership.sole_creator(kb_id, place):
            store.drop()
        elif place.layout == "id":
            store.delete(where={"kbId": kb_id})
        self.ownership.release(kb_id)
        if place is not None and not self.ownership.holders(place) and hasattr(store, "restore_schema"):
            store.restore_schema()  # a table it did not make: left as it was found
        self.forget_store(kb_id)

    def forget_store(self, kb_id: str) -> None:
        """The KB's store is opened afresh at its next use (its configuration changed)."""
        self.stores.evict(kb_id)
        self.generations.bump(kb_id)
