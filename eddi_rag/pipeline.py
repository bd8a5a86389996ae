"""The retrieve and ingest contracts (the "RAG pipeline contract") over one knowledge base.

``context_key`` is the knowledge base's configuration id. ``retrieve`` answers the same query for
the same key from a 5-minute cache; any write to that knowledge base (ingest, purge, drop) or a
new configuration version invalidates it, across processes sharing the data directory.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from cachetools import TTLCache

from eddi_rag.db import Database
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.pipeline import Document, DocumentError
from eddi_rag.stores.base import StoreUnavailableError

if TYPE_CHECKING:
    from eddi_rag.runtime import Runtime

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


class KbGenerations:
    """A counter per knowledge base, bumped by every write; kept in the embedded database so a
    server's cache notices an ingest made by the CLI."""

    def __init__(self, db: Database):
        self.db = db
        db.execute("CREATE TABLE IF NOT EXISTS kb_generations (kb_id TEXT PRIMARY KEY, n INTEGER NOT NULL)")

    def get(self, kb_id: str) -> int:
        rows = self.db.query("SELECT n FROM kb_generations WHERE kb_id=?", (kb_id,))
        return rows[0]["n"] if rows else 0

    def bump(self, kb_id: str) -> None:
        self.db.execute("INSERT INTO kb_generations VALUES (?, 1) ON CONFLICT(kb_id) DO UPDATE SET n = n + 1", (kb_id,))


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


class RagPipeline:
    def __init__(self, runtime: Runtime, ttl_seconds: float = RESULT_TTL_SECONDS, max_entries: int = 1024,
                 timer: Callable[[], float] = time.monotonic):
        self.runtime = runtime
        self._cache: TTLCache = TTLCache(max_entries, ttl_seconds, timer=timer)
        self._lock = threading.Lock()

    def retrieve(self, query: str, context_key: str, max_chunks: int = 5, min_relevance: float = 0.6, *,
                 user_id: str | None = None, where: dict[str, Any] | None = None,
                 expansion: str | None = None) -> RAGContext:
        if not isinstance(query, str) or not query.strip():
            raise InvalidQueryError("query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidQueryError(f"query is {len(query)} characters; at most {MAX_QUERY_CHARS} are allowed")
        if max_chunks < 1:
            raise InvalidQueryError(f"max_chunks must be at least 1, got {max_chunks}")
        if not 0 <= min_relevance <= 1:
            raise InvalidQueryError(f"min_relevance must be within [0, 1], got {min_relevance}")
        rt = self.runtime
        # ResourceNotFoundError for an unknown key; the embedding provider resolved as /query resolves it
        # (embeddingProviderId: the providers map entry of the KB's tenant, or disabled)
        config = rt.rag_config(context_key)
        shown = {**config.to_json(), "disabled": config.embedding_disabled}
        key = (context_key, rt.generations.get(context_key), json.dumps(shown, sort_keys=True, default=str), query,
               max_chunks, min_relevance, user_id, json.dumps(where, sort_keys=True), expansion)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return replace(hit, cached=True)
        vector = rt.embeddings.for_config(config).embed_query(query)
        try:
            hits = rt.retriever.search(context_key, config, query, max_chunks, 0.0, where, user_id, vector)
            avg = sum(h.score for h in hits) / len(hits) if hits else 0.0
            meets = bool(hits) and avg >= min_relevance
            kept = [h for h in hits if meets and h.score >= min_relevance]
            passages = rt.retriever.passages(context_key, config, kept, expansion, user_id)
        except ValueError:
            raise  # a bad filter or a dimension mismatch: the request's or the configuration's fault
        except StoreUnavailableError as e:
            raise VectorDBUnavailableError(str(e)) from e
        except Exception as e:  # noqa: BLE001 - the engine is down, refused us, or timed out
            raise VectorDBUnavailableError(rt.resolver.redact(
                f"knowledge base {context_key!r}: {config.storeType} store unavailable: {type(e).__name__}: {e}")) from e
        text_of = {h.id: p.text for p in passages for h in p.hits}
        chunks = [RetrievedChunk(h.id, h.text, round(h.score, 6), h.metadata.get("position_in_doc"), h.metadata,
                                 text_of.get(h.id)) for h in kept]
        result = RAGContext(uuid.uuid4().hex, uuid.uuid4().hex, context_key, query, chunks, round(avg, 6), meets)
        with self._lock:
            self._cache[key] = result
        return result

    def ingest(self, documents: Iterable[Document | dict[str, Any]], context_key: str) -> IngestionResult:
        """Upsert documents by ``document_id``, one at a time: a rejected or failed document is
        reported and leaves its stored version whole; the others still land."""
        started = time.perf_counter()
        rt = self.runtime
        config = rt.rag_config(context_key)
        result = IngestionResult(job_id=secrets.token_hex(12))
        seen: set[str] = set()
        failed: list[tuple[int, Any, Exception]] = []  # documents that did not parse
        position: dict[int, int] = {}

        def parsed() -> Iterator[Document]:
            for n, raw in enumerate(documents):
                try:
                    doc = as_document(raw)
                except Exception as e:  # noqa: BLE001 - reported per document
                    failed.append((n, raw.get("document_id") if isinstance(raw, dict) else getattr(raw, "document_id", None), e))
                    continue
                position[id(doc)] = n
                yield doc

        for doc, report in rt.ingestor.ingest_many(context_key, config, parsed()):
            while failed:
                self._failed(result, *failed.pop(0))
            if isinstance(report, Exception):
                self._failed(result, position[id(doc)], doc.document_id, report)
                continue
            if doc.document_id in seen:
                result.warnings.append(f"document {doc.document_id!r} appears more than once; the last one wins")
            seen.add(doc.document_id)
            result.documents_processed += 1
            result.embedding_count += report.embedded
            result.chunk_count += report.chunks
            if report.over_limit:
                result.warnings.append(
                    f"document {doc.document_id!r}: {report.over_limit} chunk(s) exceed the embedding model's "
                    f"{report.token_limit}-token input and are truncated when embedded; lower chunkSize")
        while failed:
            self._failed(result, *failed.pop(0))
        result.duration = round(time.perf_counter() - started, 3)
        return result

    def _failed(self, result: IngestionResult, n: int, doc_id: Any, error: Exception) -> None:
        message = str(error) if isinstance(error, DocumentError) else f"{type(error).__name__}: {error}"
        result.documents_failed += 1
        result.errors.append({"document_id": str(doc_id) if doc_id is not None else f"#{n}",
                              "error": self.runtime.resolver.redact(message)})
