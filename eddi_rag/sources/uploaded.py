"""An upload source's files, as its callers see them: kept (each within the source's limits, and only if it yields
text), listed with their state beside what the source ingested, deleted with their chunks. The bytes and their
table are ``sources.upload``; a run ingests them."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable
from typing import Any

from eddi_rag.config import IngestionSource, RagConfiguration
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.pipeline import Ingestor
from eddi_rag.sources import upload
from eddi_rag.sources.ledger import SourceLedger
from eddi_rag.sources.runs import PURGE, SourceRuns

log = logging.getLogger(__name__)


class NotAnUploadSourceError(EddiRagError, ValueError):
    """Files sent to a source that does not hold files (HTTP 409, as EDDI answers)."""
    status = 409


class UploadedFiles:
    def __init__(self, files: upload.Files, ledger: SourceLedger, runs: SourceRuns, ingestor: Ingestor,
                 source: Callable[[str, str], tuple[RagConfiguration, IngestionSource]],
                 remove: Callable[[str, RagConfiguration, str, builtins.list[str]], int], redact: Callable[[str], str]):
        """``source(kb_id, source_id)``: the KB's configuration and that source; ``remove``: documents of a source
        taken out of the knowledge base and forgotten."""
        self.files, self.ledger, self.runs, self.ingestor, self.source, self.remove, self.redact = \
            files, ledger, runs, ingestor, source, remove, redact

    def source_of(self, kb_id: str, source_id: str) -> tuple[RagConfiguration, IngestionSource]:
        """The KB's configuration and its upload source ``source_id`` (409 for a source of another type)."""
        config, source = self.source(kb_id, source_id)
        if source.type != "upload":
            raise NotAnUploadSourceError(f"source {source.effective_id!r} of knowledge base {kb_id!r} is of type "
                                         f"{source.type!r}; files go to a source of type 'upload'")
        return config, source

    def list(self, kb_id: str, source_id: str) -> list[dict[str, Any]]:
        """The files an upload source holds, each with its state: Indexed, Changed (uploaded again since) or Not indexed."""
        _, source = self.source_of(kb_id, source_id)
        sid = source.effective_id
        known = self.ledger.known(kb_id, sid)
        out = []
        for f in self.files.list(kb_id, sid):
            document_id = upload.document_id(sid, f["fileName"])
            row = known.get(document_id)
            status = "Not indexed" if row is None or row["status"] != "ok" else \
                "Changed" if f["uploadedAt"] > row["updated_at"] else "Indexed"  # uploaded again since it was ingested
            out.append({**f, "documentId": document_id, "status": status})
        return out

    def store(self, kb_id: str, source_id: str, files: builtins.list[tuple[str, bytes, str | None]]) -> dict[str, Any]:
        """Keep each file that is within the source's limits and yields text: EDDI's ``{stored, rejected:
        [{fileName, reason}]}``; running the source ingests them."""
        config, source = self.source_of(kb_id, source_id)
        stored: list[dict[str, Any]] = []
        rejected: list[dict[str, str]] = []
        for name, data, content_type in files:
            try:
                if len(data) > source.upload.maxFileBytes:  # before parsing anything
                    raise upload.FileRefusedError(f"{len(data):,} bytes, more than upload.maxFileBytes "
                                                  f"({source.upload.maxFileBytes:,})")
                self.ingestor.readable(config, upload.clean_name(name), data, content_type)
                stored.append(self.files.store(kb_id, source.effective_id, source.upload, name, data, content_type))
            except Exception as e:  # noqa: BLE001 - each file is accepted or refused on its own
                if not isinstance(e, (EddiRagError, ValueError)):
                    log.warning("upload of %s refused: %s", name, e)
                rejected.append({"fileName": upload.clean_name(name), "reason": self.redact(str(e) or type(e).__name__)})
        return {"stored": stored, "rejected": rejected}

    def delete(self, kb_id: str, source_id: str, file_id: str) -> dict[str, Any]:
        """Remove a file and its chunks now (its chunks first: a store that fails keeps the file, to try again)."""
        config, source = self.source_of(kb_id, source_id)
        sid = source.effective_id
        f = self.files.get(kb_id, sid, file_id)
        claim = self.runs.begin(kb_id, sid, PURGE)
        try:
            self.remove(kb_id, config, sid, [upload.document_id(sid, f["fileName"])])
            self.files.delete(kb_id, sid, file_id)
        finally:
            self.runs.end_claim(claim)
        return {"status": "deleted", "fileId": file_id, "fileName": f["fileName"], "sourceId": sid}

