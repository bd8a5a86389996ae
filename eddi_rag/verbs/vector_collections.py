"""The collections API's door (the rag-providers spec): named sets of documents that arrive with their
embeddings, queried by metadata. Each call names the caller's tenant; another tenant's collection does not exist
for it. What is kept, and how, is ``records.vector_collections``."""

from __future__ import annotations

from typing import Any

from eddi_rag.records.vector_collections import Collections


class VectorCollections:
    def __init__(self, collections: Collections):
        self.collections = collections

    def create(self, tenant: str, name: Any, metadata: Any = None, embedding_provider: Any = None,
               embedding_model: Any = None) -> dict[str, Any]:
        """A new, empty collection; the embedding fields are kept as metadata."""
        return self.collections.create(name, metadata, embedding_provider, embedding_model, tenant=tenant)

    def all(self, tenant: str) -> list[dict[str, Any]]:
        return self.collections.all(tenant)

    def get(self, tenant: str, name: str) -> dict[str, Any]:
        return self.collections.get(name, tenant)

    def set_metadata(self, tenant: str, name: str, metadata: Any) -> dict[str, Any]:
        return self.collections.set_metadata(name, metadata, tenant)

    def delete(self, tenant: str, name: str) -> None:
        """The collection and every document in it."""
        self.collections.delete(name, tenant)

    def add(self, tenant: str, name: str, documents: Any) -> dict[str, Any]:
        """Documents with their embeddings; all or nothing."""
        return self.collections.add(name, documents, tenant)

    def documents(self, tenant: str, name: str, where: str | None = None, limit: int | None = None,
                  offset: int = 0) -> dict[str, Any]:
        """A page of documents, filtered by ``where`` (the one filter language), id order."""
        return self.collections.documents(name, where, limit, offset, tenant)
