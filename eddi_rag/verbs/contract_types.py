"""The types of the retrieve and ingest contracts (the "RAG pipeline contract"): what ``retrieve``
answers (``RAGContext`` of ``RetrievedChunk``), what ``ingest`` answers (``IngestionResult``), and
their errors. The verbs are ``verbs.search.Search.retrieve`` and ``verbs.ingesting.Ingesting.batch``;
``verbs.contract.RagPipeline`` offers them under the contract's names."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.pipeline import Document, DocumentError
from eddi_rag.stores.base import StoreUnavailableError

if TYPE_CHECKING:
    pass

MAX_QUERY_CHARS = 2000
RESULT_TTL_SECONDS = 300


class InvalidQueryError(EddiRagError, ValueError):
    status = 400
    pass


class VectorDBUnavailableError(StoreUnavailableError):
    """The retrieve contract's name for a store that cannot answer."""


@dataclass(frozen=True)
class RetrievedChunk:
    id: str
    text: str
    relevance_score: float  # (cosine + 1) / 2, as minScore
    position_in_doc: int | None
    metadata: dict[str, Any]
    passage: str | None = None  # what reaches the model for it (contextExpansion; one per document)


@dataclass(frozen=True)
class RAGContext:
    context_id: str
    query_id: str
    context_key: str
    query: str
    chunks: list[RetrievedChunk]  # best first
    avg_relevance: float  # over every chunk retrieved, before the threshold
    meets_threshold: bool
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class IngestionResult:
    job_id: str
    documents_processed: int = 0
    documents_failed: int = 0
    embedding_count: int = 0  # chunks sent to the embedding model (unchanged chunks reuse their vectors)
    chunk_count: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)  # {document_id, error}
    warnings: list[str] = field(default_factory=list)
    duration: float = 0.0  # seconds

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_DOCUMENT_FIELDS = {f.name for f in fields(Document)} - {"parts"}  # parts come from file loaders


def as_document(raw: Document | dict[str, Any]) -> Document:
    if isinstance(raw, Document):
        return raw
    if not isinstance(raw, dict):
        raise DocumentError(f"a document must be an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _DOCUMENT_FIELDS)
    if unknown:
        raise DocumentError(f"document {raw.get('document_id')!r}: unknown field(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(_DOCUMENT_FIELDS))}")
    return Document(**raw)
