"""Documents into a knowledge base: a text, a file (its type detected from its bytes, content type
and name), a batch of documents (the ingest contract: upserted by ``document_id``, one failure
reported without stopping the others), or a file queued as an ingestion job."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from eddi_rag.common.jsonvalues import text_problem
from eddi_rag.common.principals import parse_acl
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest import pages
from eddi_rag.ingest.job_states import RELABEL
from eddi_rag.ingest.jobs import REEMBED, IngestionQueue, Job, JobProgress, UnknownIngestionError
from eddi_rag.ingest.limits import max_upload_bytes
from eddi_rag.ingest.loaders import EXTENSIONS, detect, readable
from eddi_rag.ingest.parsing import render
from eddi_rag.ingest.pipeline import Document, DocumentError, Ingestor
from eddi_rag.ingest.preview import preview_chunks
from eddi_rag.stores.filters import Node
from eddi_rag.verbs.contract_types import IngestionResult, as_document
from eddi_rag.verbs.knowledge_bases import KnowledgeBases

COUNTED = 100_000  # the ingestions of a knowledge base read by permissions counted for a reader (/metrics)

class DocumentNameError(DocumentError):
    """A document name that cannot be stored (HTTP 400)."""


class NoOriginalError(EddiRagError):
    """A document whose file was not kept cannot be re-parsed (HTTP 409)."""
    status = 409


def job_runner(kbs: KnowledgeBases, ingestor: Ingestor) -> Callable[[str, int, str, str, bytes, str, JobProgress], int]:
    """What the ingestion queue runs for a job: the file ingested as ``document_id`` (its chunks' source:
    ``name``) with the configuration version the job was submitted against; returns its chunk count."""
    def run(kb_id: str, version: int, document_id: str, name: str, data: bytes, fmt: str, progress: JobProgress) -> int:
        if fmt == REEMBED and bytes(data) == RELABEL:  # every document's language, as the current configuration says
            return ingestor.relabel(kb_id, kbs.get(kb_id), progress)
        if fmt == REEMBED:  # every chunk again, with the current configuration's model
            return ingestor.reembed(kb_id, kbs.get(kb_id), progress)
        return ingestor.ingest_file(kb_id, kbs.get(kb_id, version), document_id, data, fmt, progress, source=name, acl=progress.acl,
                                    metadata={"ingestionId": progress.job_id}).chunks  # every chunk: who wrote it (EDDI's)
    return run


def _named(document: str) -> str:
    if not isinstance(document, str) or not document.strip():
        raise DocumentNameError("documentName must not be blank")
    if wrong := text_problem(document, "documentName"):
        raise DocumentNameError(wrong)
    return document


REEMBED_DOCUMENT = "(re-embed all documents)"
RELABEL_DOCUMENT = "(label the documents' languages)"
PAGE_WIDTH, PAGE_MIN_WIDTH, PAGE_MAX_WIDTH = pages.WIDTH, pages.MIN_WIDTH, pages.MAX_WIDTH  # a page shown, in pixels
REFUSALS = (400, 413, 415, 422)  # statuses of a file refused for what it is (kept in the history: refusals_kept)


class Ingesting:
    def __init__(self, kbs: KnowledgeBases, ingestor: Ingestor, jobs: IngestionQueue, redact: Callable[[str], str] = lambda s: s,
                 seen: Callable[[str, list[str], Node | None], set[str]] = lambda kb_id, ids, readable: set(ids)):
        """``seen(kb_id, document_ids, readable)``: those of the documents the KB holds that a reader may read
        (Documents.seen): an ingestion names its document, so a reader sees only those of documents it may read."""
        self.kbs, self.ingestor, self.jobs, self.redact, self.seen = kbs, ingestor, jobs, redact, seen

    def text(self, kb_id: str, document: str, text: str, version: int = 0, **options: Any) -> int:
        """Ingest a text now; returns its chunk count (``options``: user_id, ttl_seconds, metadata, source)."""
        return self.ingestor.ingest_text(kb_id, self.kbs.get(kb_id, version), _named(document), text, **options).chunks

    @staticmethod
    def formats() -> str:
        """The formats a file may be in, as a person names them (the upload hint)."""
        return readable()

    @staticmethod
    def upload_limit() -> int:
        """The largest file accepted, uploaded or read by a source on the server (EDDI_RAG_MAX_UPLOAD_MB)."""
        return max_upload_bytes()

    def file(self, kb_id: str, document: str, data: bytes, content_type: str | None = None, version: int = 0,
             **options: Any) -> int:
        """Ingest a file now; returns its chunk count. UnsupportedFileTypeError / UnreadableDocumentError."""
        config = self.kbs.get(kb_id, version)
        return self.ingestor.ingest_file(kb_id, config, _named(document), data, detect(data, content_type, document),
                                         **options).chunks

    def preview(self, configuration: Any, tenant: str, document: str, data: bytes, text: bool = False) -> dict[str, Any]:
        """The chunks ``configuration`` (validated, its provider resolved in ``tenant``) would make of a document,
        with their sizes in the model's tokens; embeds and stores nothing. The file is parsed as ingestion
        parses it (its type detected, in a limited process)."""
        config = self.kbs.resolve_embedding(self.kbs.validate(configuration), tenant)
        fmt = detect(data, "text/plain" if text else None, document)
        return preview_chunks(config, document, data, fmt, self.ingestor.limits)

    def reembed(self, kb_id: str) -> Job:
        """Queue a re-embedding of every chunk with the current configuration's model (a job with progress,
        cancellable, retried as any ingestion)."""
        version = self.kbs.version(kb_id, 0)
        return self.jobs.submit(kb_id, version, REEMBED_DOCUMENT, REEMBED.encode(), REEMBED)

    def relabel(self, kb_id: str) -> Job:
        """Queue labelling every document's language again as the current configuration's ``language`` says (after a
        change of it): the keyword half analyses each so; nothing is embedded."""
        version = self.kbs.version(kb_id, 0)
        return self.jobs.submit(kb_id, version, RELABEL_DOCUMENT, RELABEL, REEMBED)

    # -- the KB's ingestion jobs -----------------------------------------------------------------
    def job(self, kb_id: str, ingestion_id: str, readable: Node | None = None) -> Job:
        """One ingestion of ``kb_id`` (UnknownIngestionError, a 404, for an unknown one or another KB's). ``readable``:
        what a reader may read of the KB (retrieval.access; None: all of it): an ingestion of a document it may not read
        (or not yet stored) is unknown to it, as a missing one is."""
        job = self.jobs.status(ingestion_id)
        if job is None or job.kb_id != kb_id or not self._shown([job], kb_id, readable):
            raise UnknownIngestionError(ingestion_id, kb_id)
        return job

    def history(self, kb_id: str, limit: int = 100, readable: Node | None = None) -> list[Job]:
        """The KB's ingestions, newest first: pending, processing (with progress), completed, failed: reason.
        ``readable``: only those of stored documents a reader may read (retrieval.access; None: all of them)."""
        return self._shown(self.jobs.of_kb(kb_id, limit), kb_id, readable)

    def _shown(self, jobs: list[Job], kb_id: str, readable: Node | None) -> list[Job]:
        if readable is None:
            return jobs
        seen = self.seen(kb_id, [j.document_id or j.document for j in jobs], readable)
        return [j for j in jobs if (j.document_id or j.document) in seen]

    def retry(self, kb_id: str, ingestion_id: str) -> Job:
        """Queue a failed or cancelled ingestion of ``kb_id`` again, with the document it was given (409 otherwise)."""
        return self.jobs.retry(self.job(kb_id, ingestion_id).id)

    def cancel(self, kb_id: str, ingestion_id: str) -> Job:
        """Cancel a pending ingestion of ``kb_id``, or stop a processing one at its next step (nothing of it is
        written); 409 for one that already ended."""
        return self.jobs.cancel(self.job(kb_id, ingestion_id).id)

    def job_counts(self, kb_ids: list[str] | None = None, readable: dict[str, Node] | None = None) -> dict[str, int]:
        """How many ingestion jobs are in each state (every ``failed: …`` counted as ``failed``), of ``kb_ids`` (None:
        of every KB). ``readable``: what a reader may read of some of them (retrieval.access): of those, only the
        ingestions its list shows are counted (``history``)."""
        readable = readable or {}
        counts = self.jobs.counts(None if kb_ids is None else [k for k in kb_ids if k not in readable])
        for kb_id, node in readable.items():
            for job in self._shown(self.jobs.of_kb(kb_id, COUNTED), kb_id, node):
                state = "failed" if job.status.startswith("failed") else job.status
                counts[state] = counts.get(state, 0) + 1
        return counts

    def last_ingested(self) -> dict[str, str]:
        """Each KB's most recent ingestion time, by KB id."""
        return self.jobs.last_updates()

    @staticmethod
    def detect(data: bytes, content_type: str | None = None, filename: str | None = None) -> str:
        """The format a file is read as (from its bytes, ``content_type`` and ``filename``'s ending); ValueError
        naming what is supported when none reads it."""
        return detect(data, content_type, filename)

    @staticmethod
    def file_endings() -> frozenset[str]:
        """Every file name ending a format is read from (".md", ".pdf" ...)."""
        return EXTENSIONS

    def page_image(self, kb_id: str, document_id: str, page: int, width: int = PAGE_WIDTH) -> bytes:
        """Page ``page`` (1-based) of the document's kept file as a PNG ``width`` pixels wide (within
        [pages.MIN_WIDTH, pages.MAX_WIDTH]), to draw its chunks' ``boxes`` on: a PDF's page or an image. 409 when
        the file was not kept, 404 for a page it does not have or a format without pages."""
        kept = self.jobs.original(kb_id, document_id)
        if kept is None:
            raise NoOriginalError(f"the file of document {document_id!r} was not kept (it was ingested before files were "
                                  "kept, or as text): its pages cannot be shown")
        name, data, fmt = kept
        return render(fmt, data, name, page, width, self.ingestor.limits)  # (pages.draw keeps the width within bounds)

    def reparsable(self, kb_id: str, document_id: str) -> bool:
        """Whether the document's file is kept (``reparse`` can run)."""
        return self.jobs.original(kb_id, document_id) is not None

    def reparse(self, kb_id: str, document_id: str) -> Job:
        """Queue the document's kept file again with the current configuration (its chunks replaced):
        after a change of chunking, or of a loader. 409 when its file was not kept."""
        kept = self.jobs.original(kb_id, document_id)
        if kept is None:
            raise NoOriginalError(f"the file of document {document_id!r} was not kept (it was ingested before files were "
                                  "kept, or as chunks): upload it again with replace=true to re-parse it")
        name, data, fmt = kept
        return self.jobs.submit(kb_id, self.kbs.version(kb_id, 0), name, data, fmt, document_id=document_id)  # (its ACL kept)

    def reparse_all(self, kb_id: str) -> list[tuple[str, Job]]:
        """Re-parse every document of the KB whose file is kept (after a change of chunking or a loader), one
        ingestion each: [(document, its ingestion)]."""
        return [(d, self.reparse(kb_id, d)) for d in self.jobs.kept_documents(kb_id)]

    def submit(self, kb_id: str, document: str, data: bytes, content_type: str | None = None, version: int = 0,
               fmt: str | None = None, replace: bool = True, acl: Any = None) -> Job:
        """Queue a file (or text) as an ingestion job against ``version`` (0: the current one); ``fmt``:
        its type when already detected. ``replace``: its chunks replace those of the document of that
        name; else they land beside them, as EDDI's ingestions do (``<name>#<ingestion id>``). ``acl``: who may read
        it (a list or a comma-separated string of principals; None: the ACL the document had). A file refused
        for what it is stays in the history (``refusals_kept``)."""
        version = self.kbs.version(kb_id, version)  # 404 for an unknown config or version
        acl = None if acl is None else parse_acl(acl)  # (400 naming the entry, before anything is queued)
        with self.refusals_kept(kb_id, version, document):
            if not data.strip():
                raise DocumentError("the document is empty")
            return self.jobs.submit(kb_id, version, _named(document), data, fmt or detect(data, content_type, document),
                                    append=not replace, acl=acl)

    @contextmanager
    def refusals_kept(self, kb_id: str, version: int, name: str) -> Iterator[None]:
        """An upload refused for what it is (too large, unsupported, empty, unreadable) stays in the KB's ingestion
        history as a failed ingestion, so a reload still says why; the refusal is raised as before. A face wraps
        its reading of an upload in it (``submit`` wraps the rest)."""
        try:
            yield
        except EddiRagError as e:
            if e.status in REFUSALS:
                self.jobs.refused(kb_id, version, (getattr(e, "document", None) or name)[:1000], str(e))
            raise

    def batch(self, documents: Iterable[Document | dict[str, Any]], kb_id: str) -> IngestionResult:
        """Upsert documents by ``document_id``, one at a time: a rejected or failed document is
        reported and leaves its stored version whole; the others still land."""
        started = time.perf_counter()
        config = self.kbs.get(kb_id)
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

        for doc, report in self.ingestor.ingest_many(kb_id, config, parsed()):
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
                              "error": self.redact(message)})
