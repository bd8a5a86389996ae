"""Collections (the rag-providers spec's wrapper API): named sets of documents that arrive with
their embeddings already computed, kept in the same stores as knowledge bases and queried by
metadata alone. A collection's metadata (and its ``embedding_provider`` / ``embedding_model``,
kept as metadata, never validated) lives in the embedded database; its documents in the store
named by ``EDDI_RAG_COLLECTIONS_STORE`` (default ``sqlite``, the data directory's file)."""

from __future__ import annotations

import json
import math
import os
import re
import secrets
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.backends.factories import EmbeddingStoreFactory
from eddi_rag.common import jsonvalues
from eddi_rag.config import RagConfiguration
from eddi_rag.errors import EddiRagError
from eddi_rag.resource_types import DEFAULT_TENANT
from eddi_rag.state.sqlite import StateDatabase
from eddi_rag.stores.base import Chunk, KnowledgeStore

DEFAULT_LIMIT, MAX_LIMIT = 100, 1000
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)
class CollectionNotFoundError(EddiRagError, LookupError):
    status = 404
    pass


class CollectionExistsError(EddiRagError, ValueError):
    status = 409
    pass


class CollectionRequestError(EddiRagError, ValueError):
    """A request the spec answers with 400 and a message."""
    status = 400


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _embedding_error(n: int, embedding: Any) -> str | None:
    if not isinstance(embedding, list) or not embedding:
        return f"Invalid embedding format for document {n}: embedding must be a non-empty array of numbers"
    for i, x in enumerate(embedding):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            return (f"Invalid embedding format for document {n}: element {i} is {json.dumps(x)[:40]}, "
                    f"not a finite number")
    return None


class Collections:
    def __init__(self, db: StateDatabase, stores: EmbeddingStoreFactory, store_type: str | None = None):
        self.db, self.stores = db, stores
        self.store_type = store_type or os.environ.get("EDDI_RAG_COLLECTIONS_STORE", "sqlite")
        state.migrate(db)

    def _store(self, tenant: str, name: str) -> KnowledgeStore:
        config = RagConfiguration(name=f"collection {name}", embeddingProvider="none", storeType=self.store_type)
        return self.stores.get(f"collection:{tenant}/{name}", config)

    def _row(self, tenant: str, name: str):
        rows = self.db.query("SELECT * FROM collections WHERE tenant=? AND name=?", (tenant, name))
        if not rows:
            raise CollectionNotFoundError(f"Collection '{name}' not found")
        return rows[0]

    def _describe(self, row) -> dict[str, Any]:
        return {"name": row["name"], "metadata": json.loads(row["metadata"]), "dimension": row["dimension"],
                "count": self._store(row["tenant"], row["name"]).count(), "created_on": row["created_on"],
                "last_modified_on": row["last_modified_on"]}

    # -- collections ------------------------------------------------------------------------
    def create(self, name: Any, metadata: Any = None, embedding_provider: Any = None,
               embedding_model: Any = None, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        if not isinstance(name, str) or not _NAME.match(name):
            raise CollectionRequestError("Collection name is required: 1-128 letters, digits, '.', '_' or '-', "
                                         "starting with a letter or digit")
        if metadata is not None and not isinstance(metadata, dict):
            raise CollectionRequestError("metadata must be an object")
        meta = dict(metadata or {})
        for key, value in (("embedding_provider", embedding_provider), ("embedding_model", embedding_model)):
            if value is not None and not isinstance(value, str):
                raise CollectionRequestError(f"{key} must be a string (got {type(value).__name__})")
            if value is not None:
                meta[key] = value
        now = _now()
        with self.db.transaction() as conn:
            if conn.execute("SELECT 1 FROM collections WHERE tenant=? AND name=?", (tenant, name)).fetchone():
                raise CollectionExistsError(f"Collection '{name}' already exists")
            conn.execute("INSERT INTO collections VALUES (?,?,?,NULL,?,?)", (tenant, name, json.dumps(meta), now, now))
        return self.get(name, tenant)

    def get(self, name: str, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        return self._describe(self._row(tenant, name))

    def all(self, tenant: str = DEFAULT_TENANT) -> list[dict[str, Any]]:
        return [self._describe(r) for r in self.db.query("SELECT * FROM collections WHERE tenant=? ORDER BY name", (tenant,))]

    def set_metadata(self, name: str, metadata: Any, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        self._row(tenant, name)
        if not isinstance(metadata, dict):
            raise CollectionRequestError("metadata must be an object")
        self.db.execute("UPDATE collections SET metadata=?, last_modified_on=? WHERE tenant=? AND name=?",
                        (json.dumps(metadata), _now(), tenant, name))
        return self.get(name, tenant)

    def delete(self, name: str, tenant: str = DEFAULT_TENANT) -> None:
        self._row(tenant, name)
        self._store(tenant, name).drop()
        self.stores.evict(f"collection:{tenant}/{name}")
        self.db.execute("DELETE FROM collections WHERE tenant=? AND name=?", (tenant, name))

    # -- documents --------------------------------------------------------------------------
    def add(self, name: str, documents: Any, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """Store documents with their pre-computed embeddings; all or nothing."""
        row = self._row(tenant, name)
        if not isinstance(documents, list) or not documents:
            raise CollectionRequestError("Documents array is required")
        if any(not isinstance(d, dict) or d.get("embedding") is None for d in documents):
            raise CollectionRequestError("All documents must include pre-computed embeddings")
        chunks, first = [], None
        for n, doc in enumerate(documents):
            error = _embedding_error(n, doc["embedding"])
            if error:
                raise CollectionRequestError(error)
            dims = len(doc["embedding"])
            if first is None:
                first = dims
            elif dims != first:
                raise CollectionRequestError(f"Embedding dimension mismatch: document 0 has {first} dimensions, "
                                             f"document {n} has {dims}")
            text, metadata = doc.get("text"), ({} if doc.get("metadata") is None else doc["metadata"])
            if not isinstance(text, str) or not text.strip():
                raise CollectionRequestError(f"Document {n}: text is required")
            if not isinstance(metadata, dict) or any(not isinstance(v, (str, int, float, bool)) for v in metadata.values()):
                raise CollectionRequestError(f"Document {n}: metadata must be an object of strings, numbers or booleans")
            if doc.get("id") is not None and not isinstance(doc["id"], str):
                raise CollectionRequestError(f"Document {n}: id must be a string (got {type(doc['id']).__name__})")
            doc_id = doc.get("id") or secrets.token_hex(12)
            chunks.append(Chunk(str(doc_id), text, metadata, [float(x) for x in doc["embedding"]]))
        if row["dimension"] is not None and row["dimension"] != first:
            raise CollectionRequestError(f"Embedding dimension mismatch: collection '{name}' holds "
                                         f"{row['dimension']}-dimensional embeddings, these have {first}")
        self._store(tenant, name).upsert(chunks)
        self.db.execute("UPDATE collections SET dimension=?, last_modified_on=? WHERE tenant=? AND name=?",
                        (first, _now(), tenant, name))
        return {"success": True, "collection": name, "count": len(chunks), "ids": [c.id for c in chunks]}

    def documents(self, name: str, where: str | None = None, limit: int | None = None, offset: int = 0,
                  tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """``{documents: [{id, text, metadata}], count, total}`` matching ``where`` (JSON text), in id order."""
        self._row(tenant, name)
        try:
            parsed = json.loads(where) if where not in (None, "") else None
        except ValueError:
            raise CollectionRequestError("Invalid 'where' filter: must be valid JSON") from None
        if parsed is not None and not isinstance(parsed, dict):
            raise CollectionRequestError("Invalid 'where' filter: must be a JSON object")
        if wrong := jsonvalues.problem(parsed, "where"):
            raise CollectionRequestError(f"Invalid 'where' filter: {wrong}")
        if offset < 0:
            raise CollectionRequestError("offset must be 0 or more")
        size = DEFAULT_LIMIT if limit is None else max(1, min(int(limit), MAX_LIMIT))
        store = self._store(tenant, name)
        chunks = store.get(parsed, limit=size, offset=offset)
        return {"documents": [{"id": c.id, "text": c.text, "metadata": c.metadata} for c in chunks],
                "count": len(chunks), "total": store.count(parsed)}
