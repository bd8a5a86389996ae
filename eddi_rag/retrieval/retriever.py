"""Embed a query, search one knowledge base, keep what passes ``minScore``."""

from __future__ import annotations

from typing import Any

from eddi_rag.config import RagConfiguration
from eddi_rag.factories import EmbeddingModelFactory, EmbeddingStoreFactory
from eddi_rag.stores.base import SearchHit


class Retriever:
    def __init__(self, embeddings: EmbeddingModelFactory, stores: EmbeddingStoreFactory):
        self.embeddings, self.stores = embeddings, stores

    def search(
        self,
        kb_id: str,
        config: RagConfiguration,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[SearchHit]:
        if not query or not query.strip():
            raise ValueError("query must not be empty")
        k = config.maxResults if max_results is None else max_results
        threshold = config.minScore if min_score is None else min_score
        vector = self.embeddings.for_config(config).embed_query(query)
        hits = self.stores.get(kb_id, config).search(vector, k, where=where)
        return [h for h in hits if h.score >= threshold]
