"""Ingest one document into one knowledge base: split, embed what changed, replace its chunks atomically.

Every chunk's metadata carries ``source``, ``kbId``, ``document_id``, ``position_in_doc``,
``section`` (when the chunking knows it), ``content_hash`` and ``ingestedAt`` (epoch seconds);
a user-scoped document adds ``user_id`` and ``private: true``; a document with a time to live adds
``expiresAt`` (epoch seconds) and ``expires: true``; a document with an ACL adds ``acl`` (who may read it:
retrieval.access), and one ingested again without an ACL keeps the one it had. The flags exist because the one filter
language has no "field is missing": retrieval asks for ``private != true OR user_id == me`` and
``expires != true OR expiresAt > now``, which every backend can express exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from eddi_rag.backends.factories import (
    EmbeddingModelFactory,
    EmbeddingStoreFactory,
    embedding_key,
)
from eddi_rag.common.principals import ACL, InvalidAclError, parse_acl
from eddi_rag.config import RagConfiguration
from eddi_rag.embeddings.buffer import SharedBuffers
from eddi_rag.errors import FILE, EddiRagError
from eddi_rag.ingest import language, ocr
from eddi_rag.ingest.chunking import fit_spec, in_language, ocr_spec, split_parts
from eddi_rag.ingest.limits import DocumentLimits, chunk_bound
from eddi_rag.ingest.loaders import Part, UnreadableDocumentError, detect
from eddi_rag.ingest.parsing import parse
from eddi_rag.ingest.progress import SILENT, Progress
from eddi_rag.ingest.tokens import budget_for
from eddi_rag.stores.base import DISABLED, Chunk, position

EMBED_BATCH = 64
IN_FLIGHT = 2  # slices of EMBED_BATCH texts one ingestion keeps queued for the model at once
# Metadata keys the pipeline writes; a document's own metadata may not set them.
RESERVED = frozenset({"kbId", "document_id", "position_in_doc", "section", "content_hash", "ingestedAt",
                      "user_id", "private", "expiresAt", "expires", DISABLED, ACL})


class DocumentError(EddiRagError, ValueError):
    """A document that cannot be ingested; the message names the field."""
    status = 400
    failure = FILE


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
    acl: list[str] | None = None  # who may read it (retrieval.access); None: the ACL it had (none when new)


@dataclass
class IngestReport:
    kb_id: str
    document: str
    chunks: int
    embedded: int = 0  # chunks sent to the embedding model (the rest reused their stored vectors)
    over_limit: int = 0  # chunks longer than the model's token input (the model truncates them)
    token_limit: int = 0
    gone_switched_off: list[str] = field(default_factory=list)  # chunks switched off before whose text is gone (their start)


def _snippet(text: str, length: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= length else flat[:length] + "…"


REEMBED_BATCH = 64  # chunks per embedding call when re-embedding a knowledge base


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
        if isinstance(value, float) and not math.isfinite(value):
            raise DocumentError(f"document {doc.document_id!r}: metadata.{key} must be a finite number, got {value}")
        if not isinstance(value, (str, int, float, bool)):  # what every engine stores and filters on
            raise DocumentError(f"document {doc.document_id!r}: metadata.{key} must be a string, number or "
                                f"boolean, not {json.dumps(value, default=str)[:60]}")
    for name in ("ttl_seconds", "expires_at"):
        value = getattr(doc, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
            raise DocumentError(f"document {doc.document_id!r}: {name} must be a finite number of seconds, got {value!r}")
    if doc.source is not None and not isinstance(doc.source, str):
        raise DocumentError(f"document {doc.document_id!r}: source must be a string, got {doc.source!r}")
    ttl = config.ttlSeconds if doc.ttl_seconds is None else doc.ttl_seconds
    if ttl is not None and ttl <= 0:
        raise DocumentError(f"document {doc.document_id!r}: ttl_seconds must be positive, got {ttl}")
    if doc.user_id is not None and (not isinstance(doc.user_id, str) or not doc.user_id):
        raise DocumentError(f"document {doc.document_id!r}: user_id must be a non-empty string")
    if doc.acl is not None:
        try:
            doc.acl = parse_acl(doc.acl)
        except InvalidAclError as e:
            raise DocumentError(f"document {doc.document_id!r}: {e}") from e


def truncated(parts: list[Part], max_chars: int) -> list[Part]:
    """The first ``max_chars`` characters of the parts' text, in whole parts but the last."""
    out, left = [], max_chars
    for part in parts:
        if left <= 0:
            break
        out.append(part if len(part.text) <= left else replace(part, text=part.text[:left]))
        left -= len(part.text)
    return out


class Ingestor:
    def __init__(self, embeddings: EmbeddingModelFactory, stores: EmbeddingStoreFactory,
                 on_change: Callable[[str], None] = lambda kb_id: None, limits: DocumentLimits | None = None):
        """``limits``: what one document may cost (default: DocumentLimits.from_env())."""
        self.embeddings, self.stores, self.on_change = embeddings, stores, on_change
        self.limits = limits or DocumentLimits.from_env()
        self.buffers = SharedBuffers(EMBED_BATCH)  # every ingestion's texts share the model's batches

    def close(self) -> None:
        """Embed what is queued, then stop the embedding buffers' threads."""
        self.buffers.close()

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

    def reembed(self, kb_id: str, config: RagConfiguration, progress: Progress = SILENT) -> int:
        """Every chunk of ``kb_id`` embedded again with ``config``'s model (after a change of provider, model or
        dimensions): same ids, texts and metadata, new vectors. The store is rebuilt only once every vector is
        ready (a new model may have another dimension); if writing fails, the old chunks are put back.
        Chunking is not redone: re-parse a document (its kept file) to re-chunk it."""
        if config.eddi_layout:
            raise DocumentError("this knowledge base uses EDDI's stored vectors in place (storeNamespace): "
                                "re-embedding would rewrite EDDI's store; ingest into a new knowledge base instead")
        old = self.stores.get(kb_id, config).get()
        model, key = self.embeddings.for_config(config), embedding_key(config)
        vectors: list[Any] = []
        for start in range(0, len(old), REEMBED_BATCH):
            vectors += model.embed_documents([c.text for c in old[start:start + REEMBED_BATCH]])
            progress.embedded(len(vectors), len(old))
        fresh = [Chunk(c.id, c.text, {**c.metadata, "content_hash": content_hash(key, c.text)}, v) for c, v in zip(old, vectors)]
        self._rebuild(kb_id, config, fresh, old)
        return len(fresh)

    def relabel(self, kb_id: str, config: RagConfiguration, progress: Progress = SILENT) -> int:
        """Each document's chunks labelled with its language under ``config.language`` (after a change of it), which
        the keyword half analyses them as: same texts and vectors, nothing embedded. Returns the chunks relabelled."""
        if config.eddi_layout:
            return 0  # (EDDI's store is read in place, never rewritten)
        store = self.stores.get(kb_id, config)
        documents: dict[Any, list[Chunk]] = {}
        for chunk in store.get():
            documents.setdefault(chunk.metadata.get("document_id"), []).append(chunk)
        changed = []
        for chunks in documents.values():
            chunks.sort(key=position)
            found = language.of_document(config.language, "\n\n".join(c.text for c in chunks))
            for c in chunks:
                if c.metadata.get("language") != found:
                    kept = {k: v for k, v in c.metadata.items() if k != "language"}
                    changed.append(Chunk(c.id, c.text, {**kept, **({"language": found} if found else {})}, c.vector))
        for start in range(0, len(changed), REEMBED_BATCH):
            store.upsert(changed[start:start + REEMBED_BATCH])
            progress.embedded(min(start + REEMBED_BATCH, len(changed)), len(changed))
        self.on_change(kb_id)
        return len(changed)

    def _rebuild(self, kb_id: str, config: RagConfiguration, chunks: list[Chunk], old: list[Chunk]) -> None:
        """The store holding ``chunks`` alone (dropped and opened afresh: their dimension may differ), or
        ``old`` again when writing them fails."""
        def holding(these: list[Chunk]) -> None:
            self.stores.get(kb_id, config).drop()
            self.stores.evict(kb_id)
            if these:
                self.stores.get(kb_id, config).upsert(these)

        try:
            holding(chunks)
        except Exception:
            holding(old)
            raise
        finally:
            self.on_change(kb_id)

    def ingest_file(self, kb_id: str, config: RagConfiguration, document: str, data: bytes, fmt: str,
                    progress: Progress = SILENT, max_chars: int | None = None, **fields: Any) -> IngestReport:
        """Ingest a file already detected as ``fmt`` (``loaders.detect``): parsed in a limited process
        (``parsing.parse``: ``progress`` hears the pages/rows read, and stops it when cancelled), its parts
        chunked one by one, each chunk carrying its part's citation (page, slide, sheet/row/cell...);
        its text cut after ``max_chars`` characters (a source's ``maxContentLength``); ``progress`` also hears the
        chunks embedded and what the author should check (pages OCR read with low confidence; chunks switched off whose
        text is gone: a chunk switched off whose text is still there stays off).
        Raises UnreadableDocumentError (encrypted, corrupt, no text; DocumentLimitError over a limit)
        or ParseCancelledError before anything is stored."""
        parts = parse(fmt, data, fields.get("source") or document, fit_spec(config), self.limits, progress.parsed,
                      progress.cancelled, ocr_spec(config))
        languages, missing = ocr.packs(config)
        if poor := ocr.poorly_read(parts, languages):
            progress.warn(poor + (f" (the packs of its language, {', '.join(missing)}, are not installed: "
                                  f"Debian's tesseract-ocr-{missing[0].replace('_', '-')})" if missing else ""))
        if max_chars is not None:
            whole = sum(len(p.text) for p in parts)
            parts = truncated(parts, max_chars)
            if whole > max_chars:
                progress.warn(f"its text ({whole:,} characters) was cut to the first {max_chars:,} (the source's "
                              "settings.maxContentLength): the rest is not searchable")
        text = "\n\n".join(p.text for p in parts)
        report = self.ingest(kb_id, config, Document(document, text, parts=parts, **fields), progress.embedded,
                             file_bytes=len(data))
        if report.gone_switched_off:
            progress.warn(f"{len(report.gone_switched_off)} chunk(s) switched off before are gone: their text is no longer in the "
                   f"document ({'; '.join(repr(t) for t in report.gone_switched_off[:5])}); switch off what replaced them "
                   "if it should stay out of answers")
        return report

    def estimate(self, kb_id: str, config: RagConfiguration, document: str, data: bytes, fmt: str,
                 max_chars: int | None = None, source: str | None = None) -> int:
        """How many chunks ingesting this file now would embed (the others reuse stored vectors), embedding and storing
        nothing: a source's preview, against its caps. Raises as ``ingest_file`` would before anything is stored."""
        parts = parse(fmt, data, source or document, fit_spec(config), self.limits, ocr=ocr_spec(config))
        if max_chars is not None:
            parts = truncated(parts, max_chars)
        doc = Document(document, "\n\n".join(p.text for p in parts), parts=parts, source=source)
        return len(self._plan(kb_id, config, self.stores.get(kb_id, config), doc, len(data)).todo)

    def readable(self, config: RagConfiguration, name: str, data: bytes, content_type: str | None) -> None:
        """Raise UnsupportedFileTypeError or UnreadableDocumentError unless the file parses to some text (an
        upload source's file is read when it arrives, not refused at every run)."""
        parts = parse(detect(data, content_type, name), data, name, fit_spec(config), self.limits, ocr=ocr_spec(config))
        if not any(p.text.strip() for p in parts):
            raise UnreadableDocumentError(f"{name}: no text in it (a scan without a text layer?)")

    def ingest(self, kb_id: str, config: RagConfiguration, doc: Document,
               progress: Callable[[int, int], None] | None = None, file_bytes: int | None = None) -> IngestReport:
        """Replace the chunks of ``doc`` in the KB. Chunks whose text (and model) did not change
        keep their stored vectors; the others are embedded, in the model's batches shared with every other
        ingestion running meanwhile. The old chunks stay untouched until
        every new chunk has its vector, and the swap is one atomic store operation. ``file_bytes``: the size of the
        file ``doc`` was read from, which bounds its chunks (``limits.chunk_bound``), checked before anything is embedded."""
        store = self.stores.get(kb_id, config)
        plan = self._plan(kb_id, config, store, doc, file_bytes)
        if plan.todo:
            self._embed(self.embeddings.for_config(config), plan, progress)
        return self._write(kb_id, config, store, doc, plan)

    def _embed(self, model: Any, plan: _Plan, progress: Callable[[int, int], None] | None) -> None:
        """The vectors of the pieces ``plan`` has to embed, through the shared buffer in slices of EMBED_BATCH (at
        most IN_FLIGHT queued at once), ``progress`` told after each; a raise from it (a cancel) cancels the rest."""
        waiting: deque[tuple[list[int], Future[list[Any]]]] = deque()
        done = len(plan.pieces) - len(plan.todo)
        try:
            for start in range(0, len(plan.todo), EMBED_BATCH):
                batch = plan.todo[start : start + EMBED_BATCH]
                waiting.append((batch, self.buffers.enqueue(model, [plan.pieces[i].text for i in batch])))
                last = start + EMBED_BATCH >= len(plan.todo)
                while waiting and (last or len(waiting) > IN_FLIGHT):
                    batch, future = waiting.popleft()
                    plan.vectors.update(zip(batch, future.result()))
                    done += len(batch)
                    if progress:
                        progress(done, len(plan.pieces))
        finally:
            for _, future in waiting:
                future.cancel()

    def ingest_many(self, kb_id: str, config: RagConfiguration, docs: Iterable[Document],
                    in_flight: int = 256) -> Iterator[tuple[Document, IngestReport | Exception]]:
        """Ingest documents as ``ingest`` does, each on its own (a failure is yielded as the
        document's result and the others go on), with embedding overlapped: the texts of many
        documents share the model's batches in the shared buffer's background thread while this
        thread splits the next documents and writes the finished ones. Results come in order;
        at most ``in_flight`` documents wait for their vectors at once."""
        store = self.stores.get(kb_id, config)
        model = None
        pending: deque[tuple[Document, Any]] = deque()

        def embed(texts: list[str]) -> Future[list[Any]]:
            nonlocal model
            model = model or self.embeddings.for_config(config)
            return self.buffers.enqueue(model, texts)

        def finish() -> tuple[Document, IngestReport | Exception]:
            doc, (plan, future) = pending.popleft()
            if isinstance(plan, Exception):
                return doc, plan
            try:
                plan.vectors.update(zip(plan.todo, future.result()))
                return doc, self._write(kb_id, config, store, doc, plan)
            except Exception as e:  # noqa: BLE001 - reported per document
                return doc, e

        for doc in docs:
            try:
                plan = self._plan(kb_id, config, store, doc)
                pending.append((doc, (plan, embed([plan.pieces[i].text for i in plan.todo]) if plan.todo else _done([]))))
            except Exception as e:  # noqa: BLE001 - reported per document
                pending.append((doc, (e, None)))
            while pending and (len(pending) > in_flight or pending[0][1][1] is None or pending[0][1][1].done()):
                yield finish()
        while pending:
            yield finish()

    def _plan(self, kb_id: str, config: RagConfiguration, store: Any, doc: Document, file_bytes: int | None = None) -> _Plan:
        """Check and split ``doc``; which pieces need embedding and which reuse stored vectors."""
        check_document(doc, config)
        if len(doc.text) > self.limits.max_chars:
            raise self.limits.over("max_chars", f"document {doc.document_id!r}: its text is {len(doc.text):,} characters")
        budget = budget_for(config)
        given = doc.metadata.get("language") if "language" in doc.metadata else language.of_document(config.language, doc.text)
        found = given if isinstance(given, str) else None
        with in_language(found):  # (its sentences split by its language's rules)
            pieces = split_parts(doc.parts or [Part(doc.text)], config, budget)
        bound, limit = chunk_bound(self.limits, file_bytes)
        if len(pieces) > bound:
            of = f" from a file of {file_bytes:,} bytes, more than {bound:,}" if limit == "max_chunks_per_mb" else ""
            raise self.limits.over(limit, f"document {doc.document_id!r} makes {len(pieces):,} chunks{of}")
        model_key = embedding_key(config)
        hashes = [content_hash(model_key, p.text) for p in pieces]
        old = store.get({"document_id": doc.document_id})
        stored = {c.metadata.get("content_hash"): c.vector for c in old if c.vector is not None}
        todo = [i for i, h in enumerate(hashes) if h not in stored]
        vectors: dict[int, Any] = {i: stored[h] for i, h in enumerate(hashes) if h in stored}
        over = sum(1 for p in pieces if budget.count(p.text) > budget.limit)
        switched_off = {c.text for c in old if c.metadata.get(DISABLED)}  # a curator's: kept by their text
        acl = next((c.metadata[ACL] for c in old if isinstance(c.metadata.get(ACL), list)), None)
        return _Plan(pieces, hashes, todo, vectors, over, budget.limit, switched_off, acl, found)

    def _write(self, kb_id: str, config: RagConfiguration, store: Any, doc: Document, plan: _Plan) -> IngestReport:
        now = time.time()
        tag = config.name if config.eddi_layout == "name" else kb_id  # EDDI tags its "name" layout with the KB's name
        common: dict[str, Any] = {**doc.metadata, "source": doc.source or doc.document_id, "kbId": tag,
                                  "document_id": doc.document_id, "ingestedAt": now}
        if "language" not in common and plan.language is not None:
            common["language"] = plan.language  # (the document's, on each chunk: what its keyword search will analyse it as)
        if doc.user_id is not None:
            common.update(user_id=doc.user_id, private=True)
        if (acl := doc.acl if doc.acl is not None else plan.acl) is not None:
            common[ACL] = acl
        ttl = config.ttlSeconds if doc.ttl_seconds is None else doc.ttl_seconds
        expires = doc.expires_at if doc.expires_at is not None else (now + ttl if ttl is not None else None)
        if expires is not None:
            common.update(expiresAt=float(expires), expires=True)
        chunks = []
        for i, (piece, digest) in enumerate(zip(plan.pieces, plan.hashes)):
            meta = {**common, **piece.citation, "position_in_doc": i, "content_hash": digest}
            if piece.section:
                meta["section"] = piece.section
            if piece.text in plan.switched_off:
                meta[DISABLED] = True  # switched off before, the same text: it stays off
            chunks.append(Chunk(chunk_id(kb_id, doc.document_id, i), piece.text, meta, plan.vectors[i]))
        store.replace({"document_id": doc.document_id}, chunks)
        self.on_change(kb_id)
        gone = sorted(plan.switched_off - {p.text for p in plan.pieces})
        return IngestReport(kb_id, doc.document_id, len(chunks), len(plan.todo), plan.over_limit, plan.token_limit,
                            [_snippet(t) for t in gone])


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


@dataclass
class _Plan:
    pieces: list[Any]
    hashes: list[str]
    todo: list[int]  # pieces to embed
    vectors: dict[int, Any]  # piece -> vector (stored ones now, embedded ones later)
    over_limit: int
    token_limit: int
    switched_off: set[str] = field(default_factory=set)  # texts of the document's chunks switched off before
    acl: list[str] | None = None  # the ACL its chunks had (kept when the document comes again without one)
    language: str | None = None  # the document's (metadata.language), found before it was split
