"""The files ingestions were given, kept beside their jobs (``ingestion_bodies``): a job's file until it completes (a
failed one can be retried as it was), then a document's latest one (a re-parse reads it again); earlier ones are let
go."""

from __future__ import annotations

from eddi_rag.ingest.job_states import COMPLETED, REEMBED
from eddi_rag.state.sqlite import StateDatabase

KEPT = "EXISTS (SELECT 1 FROM ingestion_bodies b WHERE b.id = j.id)"  # the job ``j``'s file is kept


class KeptFiles:
    def __init__(self, db: StateDatabase):
        self.db = db

    def original(self, kb_id: str, document_id: str) -> tuple[str, bytes, str] | None:
        """(name, file, format) a document was last ingested from, when kept (its latest ingestion completed
        since files were kept); None otherwise."""
        rows = self.db.query(f"SELECT j.id, document, format FROM ingestion_jobs j WHERE kb_id=? AND "
                             f"COALESCE(document_id, document)=? AND status=? AND {KEPT} "
                             "ORDER BY created_on DESC LIMIT 1", (kb_id, document_id, COMPLETED))
        body = self.body(rows[0]["id"]) if rows else None
        return None if body is None else (rows[0]["document"], body, rows[0]["format"] or "text")

    def body(self, job_id: str) -> bytes | None:
        """The file of a job, when kept (text in jobs written before files were supported: encoded)."""
        rows = self.db.query("SELECT body FROM ingestion_bodies WHERE id=?", (job_id,))
        body = rows[0]["body"] if rows else None
        return body.encode("utf-8") if isinstance(body, str) else None if body is None else bytes(body)

    def documents(self, kb_id: str) -> list[str]:
        """The documents of a knowledge base whose file is kept (``original`` finds one)."""
        rows = self.db.query("SELECT DISTINCT COALESCE(document_id, document) AS d FROM ingestion_jobs j WHERE kb_id=? AND "
                             f"status=? AND {KEPT} AND format<>?", (kb_id, COMPLETED, REEMBED))
        return sorted(r["d"] for r in rows)

    def let_go(self, kb_id: str, document_id: str | None = None, keep: str = "") -> None:
        """Forget the kept files of a document (removed), or of every document of a knowledge base; but
        that of the ingestion ``keep`` (the document's latest)."""
        document = " AND COALESCE(document_id, document)=?" if document_id is not None else ""
        self.db.execute(f"DELETE FROM ingestion_bodies WHERE id IN (SELECT id FROM ingestion_jobs WHERE kb_id=?{document} "
                        "AND status=? AND id<>?)", (kb_id, *([document_id] if document_id is not None else []), COMPLETED, keep))
