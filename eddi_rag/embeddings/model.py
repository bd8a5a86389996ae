"""What every embedding model made here is: LangChain's ``Embeddings`` interface (``embed_documents``, ``embed_query``
and their async twins) without importing langchain-core, whose ``Embeddings`` pulls in its runnables and callbacks
(0.4 s of every process's start: ``serve``, each CLI command). ``interop.langchain`` registers ``EmbeddingModel`` as
a virtual subclass of LangChain's ``Embeddings`` when imported, so ``isinstance`` holds wherever LangChain is handed
one; a provider's own model (OpenAI's, Cohere's, ...) is LangChain's and satisfies ``Embedder`` as it is."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol


class Embedder(Protocol):
    """Any embedding model: one of ours, or a LangChain ``Embeddings``."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...
    def embed_query(self, text: str) -> list[float]: ...


class EmbeddingModel(ABC):
    @abstractmethod
    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    @abstractmethod
    def embed_query(self, text: str) -> list[float]: ...

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        import asyncio  # (here: a command that never awaits does not import it, 8 ms)

        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        import asyncio

        return await asyncio.to_thread(self.embed_query, text)
