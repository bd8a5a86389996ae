"""Ingestion jobs as they are kept in the state database (``ingestion_jobs``, their files in ``ingestion_bodies``):
queued, read, listed, counted, given to run again (a retry) or cancelled. At most ``max_queued`` wait at once
(EDDI_RAG_MAX_QUEUED_JOBS, default 1,000): more are refused (QueueFullError, HTTP 429)."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from eddi_rag.errors import CONFIGURATION, DEPENDENCY, FILE, READER, EddiRagError
from eddi_rag.ingest.job_states import CANCELLED, COMPLETED, PENDING, PROCESSING, REFUSED, WAITING
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import StateDatabase

_COLUMNS = ("id, kb_id, version, document, status, chunks, created_on, updated_on, document_id, progress, warnings, "
            "failure")  # a Job's (not the body)
_now = fleet.now
DEFAULT_MAX_QUEUED = 1_000

# what fixes a failed job, by what its error said (errors.EddiRagError.failure)
FIXES = {
    FILE: "Upload a fixed file under the same name: this one cannot be read as it is, and retrying will not help "
          "(nothing of it was stored; an earlier version of the document, if any, stays as it was).",
    DEPENDENCY: "Retry later: something the ingestion needs was down or missing (not the file's fault).",
    READER: "Report it (the error's details say where our reader failed): a reader of this product failed on the "
            "file in a way no corrupt file explains, so the file may well be fine (other programs may open it). "
            "Meanwhile, saving it again in another program or format may help.",
    CONFIGURATION: "Change the knowledge base's configuration, or store the key it names in the vault, then retry: "
                   "the error says what stops it.",
}


class UnknownIngestionError(EddiRagError, LookupError):
    """No such ingestion (for this knowledge base): 404 with EDDI's ``{ingestionId, status: "unknown", error}``,
    so a poller reading ``status`` stops."""
    status = 404

    def __init__(self, ingestion_id: str, kb_id: str):
        super().__init__(f"no ingestion {ingestion_id} for knowledge base {kb_id}")
        self.ingestion_id = ingestion_id

    def body(self) -> dict[str, Any]:
        return {"ingestionId": self.ingestion_id, "status": "unknown", **super().body()}


class JobNotRetryableError(EddiRagError, ValueError):
    """Only a failed or cancelled job can be retried; only a pending or processing one cancelled."""
    status = 409


class QueueFullError(EddiRagError, RuntimeError):
    """Too much ingestion work is waiting (HTTP 429)."""
    status = 429

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "30"}


@dataclass
class Job:
    id: str
    kb_id: str
    version: int
    document: str
    status: str
    chunks: int | None = None
    created: str | None = None
    updated: str | None = None
    progress: dict[str, Any] | None = None  # while processing: {phase, unit, done, total}
    document_id: str | None = None  # the id its chunks get: the name (replacing), or name#ingestion id (appended)
    warnings: list[str] | None = None  # what a completed ingestion wants checked (pages OCR read poorly)
    failure: str | None = None  # a failed one: what fixes it (FIXES' keys)

    @classmethod
    def of(cls, row: Any, progress: dict[str, Any] | None = None) -> Job:
        """A job as stored; ``progress``: what this process knows of it now (else what its worker last wrote)."""
        if row["status"] != PROCESSING:
            progress = None
        elif progress is None and row["progress"]:
            progress = json.loads(row["progress"])
        return cls(row["id"], row["kb_id"], row["version"], row["document"], row["status"], row["chunks"],
                   row["created_on"], row["updated_on"], progress, row["document_id"] or row["document"],
                   json.loads(row["warnings"]) if row["warnings"] else None,
                   row["failure"] if row["status"].startswith("failed") else None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ingestionId": self.id, "kbId": self.kb_id, "documentName": self.document,
               "documentId": self.document_id or self.document,
               "status": self.status, "chunks": self.chunks, "createdOn": self.created, "updatedOn": self.updated}
        if self.progress is not None:
            out["progress"] = self.progress
        if self.warnings:
            out["warnings"] = self.warnings
        if self.failure in FIXES:
            out["failure"] = {"kind": self.failure, "fix": FIXES[self.failure]}
        return out



_order = threading.Lock()
_last_created = ""


def _created() -> str:
    """Now, and later than every job this process queued before (to the millisecond the state keeps): jobs queued one
    after another are taken, and listed, in that order. (Jobs queued in the same millisecond by two processes are
    ordered by their ids.)"""
    global _last_created
    with _order:
        now = _now()
        if now <= _last_created:
            now = (datetime.fromisoformat(_last_created) + timedelta(milliseconds=1)).isoformat(timespec="milliseconds")
        _last_created = now
        return now



def max_queued_from_env() -> int:
    import os

    raw = os.environ.get("EDDI_RAG_MAX_QUEUED_JOBS", str(DEFAULT_MAX_QUEUED))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"EDDI_RAG_MAX_QUEUED_JOBS must be a positive whole number, got {raw!r}")
    return int(raw)


class JobRecords:
    def __init__(self, db: StateDatabase, max_queued: int | None = None,
                 progress: Callable[[str], dict[str, Any] | None] = lambda job_id: None):
        """``progress(job_id)``: what this process knows of a job it runs now (else what its worker last wrote)."""
        self.db, self.progress = db, progress
        self.max_queued = max_queued or max_queued_from_env()

    def submit(self, kb_id: str, version: int, document: str, body: bytes | str, fmt: str = "text", append: bool = False,
               document_id: str | None = None, acl: list[str] | None = None) -> Job:
        """Queue ``body`` as the document named ``document``: its chunks replace that document's, or
        (``append``) land beside them under an id of their own (``<document>#<ingestion id>``), or
        (``document_id``) replace those of that document (a re-parse). ``acl``: who may read it (None: the ACL the
        document had)."""
        waiting = self.db.query("SELECT COUNT(*) AS n FROM ingestion_jobs WHERE status IN (?, ?, ?)", WAITING)[0]["n"]
        if waiting >= self.max_queued:
            raise QueueFullError(f"{waiting} ingestions are waiting (at most {self.max_queued}); try again later")
        job_id = secrets.token_hex(12)
        job = Job(job_id, kb_id, version, document, PENDING,
                  document_id=document_id or (f"{document}#{job_id}" if append else document))
        now = _created()
        data = body.encode("utf-8") if isinstance(body, str) else body
        with self.db.transaction() as c:  # (the file in a table of its own: the job's row is rewritten at every update)
            c.execute("INSERT INTO ingestion_jobs (id, kb_id, version, document, status, chunks, created_on, updated_on, "
                      "format, document_id, acl) VALUES (?,?,?,?,?,NULL,?,?,?,?,?)",
                      (job.id, kb_id, version, document, PENDING, now, now, fmt, job.document_id,
                       None if acl is None else json.dumps(acl)))
            c.execute("INSERT INTO ingestion_bodies (id, body) VALUES (?, ?)", (job.id, data))
        job.created = job.updated = now
        return job

    def status(self, job_id: str) -> Job | None:
        rows = self.db.query(f"SELECT {_COLUMNS} FROM ingestion_jobs WHERE id=?", (job_id,))
        return Job.of(rows[0], self.progress(job_id)) if rows else None

    def of_kb(self, kb_id: str, limit: int = 100) -> list[Job]:
        """The KB's ingestions, newest first."""
        rows = self.db.query(f"SELECT {_COLUMNS} FROM ingestion_jobs WHERE kb_id=? ORDER BY created_on DESC, id LIMIT ?",
                             (kb_id, limit))
        return [Job.of(r, self.progress(r["id"])) for r in rows]

    def failing(self, kb_id: str) -> list[str]:
        """The documents of ``kb_id`` whose latest ingestion failed (a later one that succeeds clears them)."""
        rows = self.db.query("SELECT document, status FROM ingestion_jobs j WHERE kb_id=? AND created_on = "
                             "(SELECT MAX(created_on) FROM ingestion_jobs k WHERE k.kb_id=j.kb_id "
                             "AND COALESCE(k.document_id, k.document) = COALESCE(j.document_id, j.document)) "
                             "ORDER BY document", (kb_id,))
        return [r["document"] for r in rows if r["status"].startswith("failed")]

    def counts(self, kb_ids: list[str] | None = None) -> dict[str, int]:
        """How many jobs are in each state (every ``failed: …`` counted as ``failed``); ``kb_ids``: of those knowledge
        bases only (None: of every one)."""
        counts = dict.fromkeys((PENDING, PROCESSING, COMPLETED, CANCELLED, "failed"), 0)
        if kb_ids is not None and not kb_ids:
            return counts
        of = "" if kb_ids is None else f" WHERE kb_id IN ({','.join('?' * len(kb_ids))})"
        for r in self.db.query("SELECT CASE WHEN status LIKE 'failed%' THEN 'failed' ELSE status END AS state, "
                               f"COUNT(*) AS n FROM ingestion_jobs{of} GROUP BY state", tuple(kb_ids or ())):
            counts[r["state"]] = r["n"]
        return counts

    def last_updates(self) -> dict[str, str]:
        """Each KB's most recent ingestion time (for listings)."""
        return {r["kb_id"]: r["t"] for r in self.db.query("SELECT kb_id, MAX(updated_on) AS t FROM ingestion_jobs GROUP BY kb_id")}

    def refused(self, kb_id: str, version: int, document: str, reason: str) -> Job:
        """An upload refused at the door (unsupported type, too large, empty), kept in the history as a failed
        ingestion that cannot be retried (its file was not kept)."""
        job = Job(secrets.token_hex(12), kb_id, version, document, f"failed: refused: {reason}"[:2000], document_id=document,
                  failure=FILE)
        now = _created()
        self.db.execute(
            "INSERT INTO ingestion_jobs (id, kb_id, version, document, status, chunks, created_on, updated_on, "
            "format, document_id, failure) VALUES (?,?,?,?,?,NULL,?,?,?,?,?)",
            (job.id, kb_id, version, document, job.status, now, now, REFUSED, document, FILE))
        job.created = job.updated = now
        return job

    def retry(self, job_id: str) -> Job:
        """Queue a failed or cancelled job again, with the document it was given (attempts start over)."""
        job = self.status(job_id)
        if job is None or not (job.status.startswith("failed") or job.status == CANCELLED):
            raise JobNotRetryableError(f"ingestion {job_id} is {job.status if job else 'unknown'}: only a failed or "
                                       f"cancelled one can be retried")
        if job.status.startswith("failed: refused: "):
            raise JobNotRetryableError(f"ingestion {job_id} was refused when uploaded and its file was not kept: "
                                       "upload the file again (as a supported type, within the size limit)")
        self.db.execute("UPDATE ingestion_jobs SET status=?, chunks=NULL, attempts=0, owner=NULL, lease_until=NULL, not_before=NULL, "
                        "progress=NULL, updated_on=? WHERE id=?", (PENDING, _now(), job_id))
        return self.status(job_id) or job

    def cancel(self, job_id: str) -> Job:
        """Cancel a pending or processing job: ``cancelled`` is stored at once; a processing one stops
        within POLL_SECONDS while parsing (its process killed), or before its next embedding batch.
        Nothing of it is written (a document's chunks replace its old ones in one step, at the end). Any replica
        may cancel: the worker holding the job learns of it at its next lease renewal."""
        job = self.status(job_id)
        if job is None or job.status not in WAITING:
            raise JobNotRetryableError(f"ingestion {job_id} is {job.status if job else 'unknown'}: only a pending or "
                                       f"processing one can be cancelled")
        self.db.execute(f"UPDATE ingestion_jobs SET status=?, updated_on=? WHERE id=? AND status IN ({', '.join('?' * len(WAITING))})",
                        (CANCELLED, _now(), job_id, *WAITING))
        return self.status(job_id) or job

    def waiting(self, kb_id: str) -> list[str]:
        """The pending or processing jobs of a knowledge base."""
        return [r["id"] for r in self.db.query(
            f"SELECT id FROM ingestion_jobs WHERE kb_id=? AND status IN ({', '.join('?' * len(WAITING))})", (kb_id, *WAITING))]
