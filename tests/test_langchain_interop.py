"""LangChain's own standard test suites, run against our stores, retriever and local model."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_tests.integration_tests import (
    EmbeddingsIntegrationTests,
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)
from langchain_tests.unit_tests import EmbeddingsUnitTests

from eddi_rag.backends import registry
from eddi_rag.embeddings.local import LocalOnnxEmbeddings
from eddi_rag.interop.langchain import EddiVectorStore, KnowledgeBaseRetriever
from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import StoreContext
from eddi_rag.stores.embedded.memory import InMemoryStore
from tests.conformance.test_store_conformance import BACKENDS


class _StoreSuite(VectorStoreIntegrationTests):
    """LangChain's suite over one backend, with the storeParameters the conformance suite uses."""

    backend = "in-memory"

    @pytest.fixture
    def vectorstore(self, request, tmp_path):
        cls = registry.load(registry.STORES, self.backend)
        params = BACKENDS[self.backend](request)
        store = cls(f"lc-{uuid.uuid4().hex[:8]}", params, StoreContext(Database(tmp_path / "lc.db"), tmp_path))
        try:
            yield EddiVectorStore(store, self.get_embeddings())
        finally:
            store.drop()


class TestInMemoryVectorStore(_StoreSuite):
    backend = "in-memory"


class TestSqliteVectorStore(_StoreSuite):
    backend = "sqlite"


class TestSqliteVecVectorStore(_StoreSuite):
    backend = "sqlite-vec"


@pytest.mark.integration
@pytest.mark.services
class TestPgVectorVectorStore(_StoreSuite):
    backend = "pgvector"


class TestQdrantVectorStore(_StoreSuite):
    backend = "qdrant"


@pytest.mark.integration
@pytest.mark.services
class TestChromaVectorStore(_StoreSuite):
    backend = "chroma"


@pytest.mark.integration
@pytest.mark.services
class TestTypesenseVectorStore(_StoreSuite):
    backend = "typesense"


@pytest.mark.integration  # its HTTP stand-in on loopback (a real server with ES_URL)
@pytest.mark.services
class TestElasticsearchVectorStore(_StoreSuite):
    backend = "elasticsearch"


class TestKnowledgeBaseRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return KnowledgeBaseRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        embeddings = DeterministicFakeEmbedding(size=16)
        vs = EddiVectorStore.from_texts([f"passage number {i}" for i in range(10)], embeddings)
        return {"store": vs.store, "embeddings": embeddings}

    @property
    def retriever_query_example(self) -> str:
        return "passage"


class TestLocalEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self):
        return LocalOnnxEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {}


class TestLocalEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self):
        return LocalOnnxEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {}


def test_as_retriever_and_relevance_scores():
    vs = EddiVectorStore.from_texts(["night trains to Vienna", "goulash in the dining car"], LocalOnnxEmbeddings(),
                                    metadatas=[{"source": "rail.md"}, {"source": "menu.md"}])
    docs = vs.as_retriever(search_kwargs={"k": 1}).invoke("When is the train to Vienna?")
    assert [d.metadata["source"] for d in docs] == ["rail.md"]
    (doc, score), _ = vs.similarity_search_with_relevance_scores("train to Vienna", k=2)
    assert doc.metadata["source"] == "rail.md" and 0.5 < score <= 1
    assert vs.similarity_search("food", k=2, filter={"source": "menu.md"})[0].page_content.startswith("goulash")
    assert isinstance(vs.store, InMemoryStore)
