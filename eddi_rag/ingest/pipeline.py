"""Ingest one document into one knowledge base: split, embed what changed, replace its chunks atomically.

Every chunk's metadata carries ``source``, ``kbId``, ``document_id``, ``position_in_doc``,
``section`` (when the chunking knows it), ``content_hash`` and ``ingestedAt`` (epoch seconds);
a user-scoped document adds ``user_id`` and ``private: true``; a document with a time to live adds
``expiresAt`` (epoch seconds) and ``expires: true``. The flags exist because the one filter
language has no "field is missing": retrieval asks for ``private != true OR user_id == me`` and
``expires != true OR expiresAt > now``, which every backend can express exactly.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddi_rag.config import RagConfiguration
from eddi_rag.factories import (
    EmbeddingModelFactory,
    EmbeddingStoreFactory,
    embedding_key,
)
from eddi_rag.ingest import loaders
from eddi_rag.ingest.chunking import fits_for, split_parts
from eddi_rag.ingest.loaders import Part
from eddi_rag.ingest.tokens import budget_for
from eddi_rag.stores.base import Chunk

EMBED_BATCH = 64
# Metadata keys the pipeline writes; a document's own metadata may not set them.
RESERVED = frozenset({"kbId", "document_id", "position_in_doc", "section", "content_hash", "ingestedAt",
                      "user_id", "private", "expiresAt", "expires"})


class DocumentError(ValueError):
    """A document that cannot be ingested; the message names the field."""


@dataclass
class Document:
    document_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str | None = None  # shown in citations; default: document_id
    user_id: str | None = None  # only this user's queries will see its chunks
    ttl_seconds: float | None = None  # default: the KB's ttlSeconds
    expires_at: float | None = None  # epoch seconds; wins over ttl_seconds
    parts: list[Part] | None = None  # a loaded file's pages/slides/rows with their citations (default: the text)


@dataclass
class IngestReport:
    kb_id: str
    document: str
    chunks: int
    embedded: int = 0  # chunks sent to the embedding model (the rest reused their stored vectors)
    over_limit: int = 0  # chunks longer than the model's token input (the model truncates them)
    token_limit: int = 0


def chunk_id(kb_id: str, document: str, position: int) -> str:
    digest = hashlib.sha256(f"{kb_id}\x00{document}".encode()).hexdigest()[:16]
    return f"{digest}-{position:06d}"


def content_hash(model_key: str, text: str) -> str:
    """Equal for equal text embedded by the same model configuration (so a model change re-embeds)."""
    return hashlib.sha256(f"{model_key}\x00{text}".encode()).hexdigest()


def check_document(doc: Document, config: RagConfiguration) -> None:
    """Raise DocumentError naming what is wrong: missing id/text/required metadata, reserved or
    non-scalar metadata, a negative time to live."""
    if not isinstance(doc.document_id, str) or not doc.document_id.strip():
        raise DocumentError("document_id is required")
    if not isinstance(doc.text, str) or not doc.text.strip():
        raise DocumentError(f"document {doc.document_id!r}: text is empty")
    if not isinstance(doc.metadata, dict):
        raise DocumentError(f"document {doc.document_id!r}: metadata must be an object")
    missing = [k for k in config.requiredMetadata if doc.metadata.get(k) in (None, "")]
    if missing:
        raise DocumentError(f"document {doc.document_id!r}: missing required metadata {', '.join(missing)}")
    for key, value in doc.metadata.items():
        if key in RESERVED:
            raise DocumentError(f"document {doc.document_id!r}: metadata.{key} is reserved (set by the pipeline)")
        if not isinstance(value, (str, int, float, bool)):  # what every engine stores and filters on
            raise DocumentError(f"document {doc.document_id!r}: metadata.{key} must be a string, number or "
                                f"boolean, not {json.dumps(value, default=str)[:60]}")
    for name in ("ttl_seconds", "expires_at"):
        value = getattr(doc, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise DocumentError(f"document {doc.document_id!r}: {name} must be a number of seconds, got {value!r}")
    if doc.source is not None and not isinstance(doc.source, str):
        raise DocumentError(f"document {doc.document_id!r}: source must be a string, got {doc.source!r}")
    ttl = config.ttlSeconds if doc.ttl_seconds is None else doc.ttl_seconds
    if ttl is not None and ttl <= 0:
        raise DocumentError(f"document {doc.document_id!r}: ttl_seconds must be positive, got {ttl}")
    if doc.user_id is not None and (not isinstance(doc.user_id, str) or not doc.user_id):
        raise DocumentError(f"document {doc.document_id!r}: user_id must be a non-empty string")


class Ingestor:
    def __init__(self, embeddings: EmbeddingModelFactory, stores: EmbeddingStoreFactory,
                 on_change: Callable[[str], None] = lambda kb_id: None):
        self.embeddings, self.stores, self.on_change = embeddings, stores, on_change

    def ingest_text(
        self,
        kb_id: str,
        config: RagConfiguration,
        document: str,
        text: str,
        progress: Callable[[int, int], None] | None = None,
        **fields: Any,
    ) -> IngestReport:
        return self.ingest(kb_id, config, Document(document, text, **fields), progress)

    def ingest_file(self, kb_id: str, config: RagConfiguration, document: str, data: bytes, fmt: str,
                    progress: Callable[[int, int], None] | None = None, **fields: Any) -> IngestReport:
        """Ingest a file already detected as ``fmt`` (``loaders.detect``): its parts are chunked
        one by one, each chunk carrying its part's citation (page, slide, sheet/row/cell...).
        Raises UnreadableDocumentError (encrypted, corrupt, no text) before anything is stored."""
        parts = loaders.load(fmt, data, document, fits_for(config, budget_for(config)))
        text = "\n\n".join(p.text for p in parts)
        return self.ingest(kb_id, config, Document(document, text, parts=parts, **fields), progress)

    def ingest(self, kb_id: str, config: RagConfiguration, doc: Document,
               progress: Callable[[int, int], None] | None = None) -> IngestReport:
        """Replace the chunks of ``doc`` in the KB. Chunks whose text (and model) did not change
        keep their stored vectors; the others are embedded. The old chunks stay untouched until
        every new chunk has its vector, and the swap is one atomic store operation."""
        check_document(doc, config)
        store = self.stores.get(kb_id, config)
        budget = budget_for(config)
        pieces = split_parts(doc.parts or [Part(doc.text)], config, budget)
        model_key = embedding_key(config)
        hashes = [content_hash(model_key, p.text) for p in pieces]
        stored = {c.metadata.get("content_hash"): c.vector for c in store.get({"document_id": doc.document_id})
                  if c.vector is not None}
        todo = [i for i, h in enumerate(hashes) if h not in stored]
        vectors: dict[int, Any] = {i: stored[h] for i, h in enumerate(hashes) if h in stored}
        model = self.embeddings.for_config(config) if todo else None
        for start in range(0, len(todo), EMBED_BATCH):
            batch = todo[start : start + EMBED_BATCH]
            vectors.update(zip(batch, model.embed_documents([pieces[i].text for i in batch])))
            if progress:
                progress(len(pieces) - len(todo) + start + len(batch), len(pieces))
        now = time.time()
        common: dict[str, Any] = {**doc.metadata, "source": doc.source or doc.document_id, "kbId": kb_id,
                                  "document_id": doc.document_id, "ingestedAt": now}
        if doc.user_id is not None:
            common.update(user_id=doc.user_id, private=True)
        ttl = config.ttlSeconds if doc.ttl_seconds is None else doc.ttl_seconds
        expires = doc.expires_at if doc.expires_at is not None else (now + ttl if ttl is not None else None)
        if expires is not None:
            common.update(expiresAt=float(expires), expires=True)
        chunks = []
        for i, (piece, digest) in enumerate(zip(pieces, hashes)):
            meta = {**common, **piece.citation, "position_in_doc": i, "content_hash": digest}
            if piece.section:
                meta["section"] = piece.section
            chunks.append(Chunk(chunk_id(kb_id, doc.document_id, i), piece.text, meta, vectors[i]))
        store.replace({"document_id": doc.document_id}, chunks)
        self.on_change(kb_id)
        over = sum(1 for p in pieces if budget.count(p.text) > budget.limit)
        return IngestReport(kb_id, doc.document_id, len(chunks), len(todo), over, budget.limit)
