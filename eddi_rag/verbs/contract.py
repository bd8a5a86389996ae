"""The RAG pipeline contract's two calls, under its names, over the verbs: ``retrieve(query,
context_key, max_chunks, min_relevance)`` (``Search.retrieve``) and ``ingest(documents,
context_key)`` (``Ingesting.batch``). ``context_key`` is the knowledge base's configuration id."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eddi_rag.ingest.pipeline import Document
from eddi_rag.verbs.contract_types import IngestionResult, InvalidQueryError, RAGContext
from eddi_rag.verbs.ingesting import Ingesting
from eddi_rag.verbs.search import Search, SearchRequest


class RagPipeline:
    def __init__(self, search: Search, ingesting: Ingesting):
        self.search, self.ingesting = search, ingesting

    def retrieve(self, query: str, context_key: str, max_chunks: int = 5, min_relevance: float = 0.6, *,
                 user_id: str | None = None, where: dict[str, Any] | None = None,
                 expansion: str | None = None) -> RAGContext:
        if max_chunks < 1:  # (the request checks the rest, naming its own fields)
            raise InvalidQueryError(f"max_chunks must be at least 1, got {max_chunks}")
        return self.search.retrieve(SearchRequest(context_key, query, k=max_chunks, where=where, user_id=user_id,
                                                  expansion=expansion), min_relevance)

    def ingest(self, documents: Iterable[Document | dict[str, Any]], context_key: str) -> IngestionResult:
        """Upsert documents by ``document_id``; a failed document is reported, the others land."""
        return self.ingesting.batch(documents, context_key)
