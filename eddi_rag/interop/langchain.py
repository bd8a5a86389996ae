"""Hand any KnowledgeStore to LangChain: as a ``VectorStore`` (and ``as_retriever()``), or as a
``BaseRetriever`` with EDDI's ``maxResults``/``minScore`` semantics; or a knowledge base, searched as every face
searches it (its search mode, audience and document permissions: ``KnowledgeBaseSearchRetriever``). A store handed
over whole answers every chunk it holds: give a caller that must not read everything the knowledge base's retriever."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict

from eddi_rag.backends import registry
from eddi_rag.embeddings.model import EmbeddingModel
from eddi_rag.stores.base import Chunk, KnowledgeStore, SearchHit, StoreContext

Embeddings.register(EmbeddingModel)  # type: ignore[type-abstract]  # our models are LangChain Embeddings for LangChain (embeddings.model)


def _document(id: str, text: str, metadata: dict[str, Any]) -> Document:
    return Document(id=id, page_content=text, metadata=metadata)


class EddiVectorStore(VectorStore):
    """A LangChain ``VectorStore`` over one knowledge base's store. Scores are EDDI's
    relevance, ``(cos + 1) / 2`` in [0, 1]; ``filter`` takes the ``where`` language."""

    def __init__(self, store: KnowledgeStore, embedding: Embeddings):
        self.store, self._embedding = store, embedding

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def add_texts(
        self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str] | None = None, **kwargs: Any
    ) -> list[str]:
        texts = list(texts)
        ids = [i or str(uuid.uuid4()) for i in ids] if ids else [str(uuid.uuid4()) for _ in texts]
        metadatas = metadatas or [{} for _ in texts]
        vectors = self._embedding.embed_documents(texts)
        self.store.upsert([Chunk(i, t, dict(m), v) for i, t, m, v in zip(ids, texts, metadatas, vectors)])
        return ids

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        where = kwargs.get("filter")
        if ids is None and where is None:
            return False
        self.store.delete(ids=ids, where=where)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        found = {c.id: c for c in self.store.get(ids=list(ids))}
        return [_document(i, found[i].text, found[i].metadata) for i in ids if i in found]

    def _hits(self, query: str, k: int, filter: dict | None) -> list[SearchHit]:
        return self.store.search(self._embedding.embed_query(query), k, where=filter)

    def similarity_search(self, query: str, k: int = 4, filter: dict | None = None, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter)]

    def similarity_search_with_score(self, query: str, k: int = 4, filter: dict | None = None, **kwargs: Any) -> list[tuple[Document, float]]:
        return [(_document(h.id, h.text, h.metadata), h.score) for h in self._hits(query, k, filter)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, filter: dict | None = None, **kwargs: Any) -> list[Document]:
        return [_document(h.id, h.text, h.metadata) for h in self.store.search(embedding, k, where=filter)]

    def _select_relevance_score_fn(self):
        return lambda score: score  # already a relevance in [0, 1]

    @classmethod
    def from_texts(
        cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None, *,
        ids: list[str] | None = None, store: KnowledgeStore | None = None, **kwargs: Any,
    ) -> EddiVectorStore:
        """Without ``store``: a fresh in-memory knowledge base."""
        if store is None:
            store = registry.load(registry.STORES, "in-memory")(str(uuid.uuid4()), {}, StoreContext())
        vs = cls(store, embedding)
        vs.add_texts(texts, metadatas, ids=ids)
        return vs


class KnowledgeBaseRetriever(BaseRetriever):
    """Top ``k`` chunks with a relevance of at least ``min_score``; ``k`` may be passed per call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any
    embeddings: Embeddings
    k: int = 5
    min_score: float = 0.0
    where: dict[str, Any] | None = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        k = int(kwargs.get("k", self.k))
        hits = self.store.search(self.embeddings.embed_query(query), k, where=kwargs.get("where", self.where))
        return [
            Document(id=h.id, page_content=h.text, metadata={**h.metadata, "score": h.score})
            for h in hits
            if h.score >= self.min_score
        ]


class KnowledgeBaseSearchRetriever(BaseRetriever):
    """A knowledge base searched through the search verb (``runtime.search``): its own search mode, reranker and
    rules, read as ``user_id`` (their private chunks; under audience OWNER or DOCUMENT_ACL, their permissions, groups
    from the group directory). ``k``, ``min_score``: default the knowledge base's."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    search: Any  # eddi_rag.verbs.search.Search
    kb_id: str
    user_id: str | None = None
    k: int | None = None
    min_score: float | None = None
    where: dict[str, Any] | None = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        from eddi_rag.verbs.audit import acting
        from eddi_rag.verbs.search import SearchRequest

        with acting("langchain"):
            hits = self.search.hits(SearchRequest(self.kb_id, query, k=kwargs.get("k", self.k), min_score=self.min_score,
                                                  where=kwargs.get("where", self.where), user_id=self.user_id))
        return [Document(id=h.id, page_content=h.text, metadata={**h.metadata, "score": h.score}) for h in hits]
