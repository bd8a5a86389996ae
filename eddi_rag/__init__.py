"""eddi-rag: knowledge bases (RAG) for LLM agent workflows, EDDI-compatible, offline by default.

The public API, what the documentation uses::

    from eddi_rag import Runtime, SearchRequest, Document, ConversationMemory, EddiRagError

Each name is imported when first used, so ``import eddi_rag.<module>`` stays as light as that module."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from eddi_rag.version import __version__

_PUBLIC = {
    "Runtime": "eddi_rag.runtime",
    "SearchRequest": "eddi_rag.verbs.search",
    "Document": "eddi_rag.ingest.pipeline",
    "ConversationMemory": "eddi_rag.workflow.memory",
    "EddiRagError": "eddi_rag.errors",
    "RAGContext": "eddi_rag.verbs.contract_types",
    "RetrievedChunk": "eddi_rag.verbs.contract_types",
    "IngestionResult": "eddi_rag.verbs.contract_types",
}
__all__ = ["ConversationMemory", "Document", "EddiRagError", "IngestionResult", "RAGContext", "RetrievedChunk", "Runtime",
           "SearchRequest", "__version__"]

if TYPE_CHECKING:
    from eddi_rag.errors import EddiRagError
    from eddi_rag.ingest.pipeline import Document
    from eddi_rag.runtime import Runtime
    from eddi_rag.verbs.contract_types import IngestionResult, RAGContext, RetrievedChunk
    from eddi_rag.verbs.search import SearchRequest
    from eddi_rag.workflow.memory import ConversationMemory


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'eddi_rag' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
