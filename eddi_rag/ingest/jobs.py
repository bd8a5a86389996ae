"""Ingestion jobs: ``pending → processing → completed | failed: <message>``.

Jobs and their statuses live in SQLite, so they survive a restart; a job that was pending or
processing when the process stopped is picked up again by the next worker. A job's document body
is kept until it completes: a failed job can be retried as it was.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from eddi_rag.db import Database

log = logging.getLogger(__name__)

_SCHEMA = """CREATE TABLE IF NOT EXISTS ingestion_jobs (
    id TEXT PRIMARY KEY, kb_id TEXT NOT NULL, version INTEGER NOT NULL, document TEXT NOT NULL,
    status TEXT NOT NULL, body TEXT, chunks INTEGER, created_on TEXT NOT NULL, updated_on TEXT NOT NULL,
    format TEXT)"""
# ``body`` holds the file's bytes (a BLOB) or, in jobs written before files were supported, text;
# ``format`` is what loaders.detect decided (NULL in those older jobs: plain text).
_COLUMNS = "id, kb_id, version, document, status, chunks, created_on, updated_on"  # a Job's (not the body)

PENDING, PROCESSING, COMPLETED = "pending", "processing", "completed"


class JobNotRetryableError(ValueError):
    """Only a failed job can be retried."""


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
    progress: tuple[int, int] | None = None  # (chunks embedded, chunks) while processing

    @classmethod
    def of(cls, row: Any, progress: tuple[int, int] | None = None) -> Job:
        return cls(row["id"], row["kb_id"], row["version"], row["document"], row["status"], row["chunks"],
                   row["created_on"], row["updated_on"], progress if row["status"] == PROCESSING else None)

    def to_json(self) -> dict:
        out = {"ingestionId": self.id, "kbId": self.kb_id, "documentName": self.document,
               "status": self.status, "chunks": self.chunks, "createdOn": self.created, "updatedOn": self.updated}
        if self.progress is not None:
            out["progress"] = {"done": self.progress[0], "total": self.progress[1]}
        return out


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# run(kb_id, version, document, body, format, progress(done, total)) -> number of chunks written
Runner = Callable[[str, int, str, bytes, str, Callable[[int, int], None]], int]


class IngestionQueue:
    def __init__(self, db: Database, run: Runner, redact: Callable[[str], str] = lambda s: s):
        self.db, self.run, self.redact = db, run, redact
        db.execute(_SCHEMA)
        if "format" not in {r["name"] for r in db.query("PRAGMA table_info(ingestion_jobs)")}:
            db.execute("ALTER TABLE ingestion_jobs ADD COLUMN format TEXT")
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition()
        self._busy = 0
        self._progress: dict[str, tuple[int, int]] = {}

    def _enqueue(self, job_id: str) -> None:
        with self._idle:
            self._busy += 1
        self._queue.put(job_id)

    def submit(self, kb_id: str, version: int, document: str, body: bytes | str, fmt: str = "text") -> Job:
        job = Job(secrets.token_hex(12), kb_id, version, document, PENDING)
        now = _now()
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.db.execute(
            "INSERT INTO ingestion_jobs (id, kb_id, version, document, status, body, chunks, created_on, updated_on, "
            "format) VALUES (?,?,?,?,?,?,NULL,?,?,?)",
            (job.id, kb_id, version, document, PENDING, data, now, now, fmt),
        )
        self._enqueue(job.id)
        job.created = job.updated = now
        return job

    def status(self, job_id: str) -> Job | None:
        rows = self.db.query(f"SELECT {_COLUMNS} FROM ingestion_jobs WHERE id=?", (job_id,))
        return Job.of(rows[0], self._progress.get(job_id)) if rows else None

    def of_kb(self, kb_id: str, limit: int = 100) -> list[Job]:
        """The KB's ingestions, newest first."""
        rows = self.db.query(f"SELECT {_COLUMNS} FROM ingestion_jobs WHERE kb_id=? ORDER BY created_on DESC, id LIMIT ?",
                             (kb_id, limit))
        return [Job.of(r, self._progress.get(r["id"])) for r in rows]

    def last_updates(self) -> dict[str, str]:
        """Each KB's most recent ingestion time (for listings)."""
        return {r["kb_id"]: r["t"] for r in self.db.query("SELECT kb_id, MAX(updated_on) AS t FROM ingestion_jobs GROUP BY kb_id")}

    def retry(self, job_id: str) -> Job:
        """Queue a failed job again, with the document it was given."""
        job = self.status(job_id)
        if job is None or not job.status.startswith("failed"):
            raise JobNotRetryableError(f"ingestion {job_id} is {job.status if job else 'unknown'}: only a failed one can be retried")
        self._set(job_id, PENDING)
        self._enqueue(job_id)
        return self.status(job_id)

    def _set(self, job_id: str, status: str, chunks: int | None = None, clear_body: bool = False) -> None:
        body = ", body=NULL" if clear_body else ""
        self.db.execute(
            f"UPDATE ingestion_jobs SET status=?, chunks=?, updated_on=?{body} WHERE id=?",
            (status, chunks, _now(), job_id),
        )

    def process(self, job_id: str) -> None:
        rows = self.db.query("SELECT * FROM ingestion_jobs WHERE id=?", (job_id,))
        if not rows or rows[0]["status"] not in (PENDING, PROCESSING):
            return
        r = rows[0]
        self._set(job_id, PROCESSING)

        def progress(done: int, total: int) -> None:
            self._progress[job_id] = (done, total)

        try:
            body = r["body"] or b""
            chunks = self.run(r["kb_id"], r["version"], r["document"],
                              body.encode("utf-8") if isinstance(body, str) else body, r["format"] or "text", progress)
        except Exception as e:  # noqa: BLE001 - any failure becomes the job's status
            message = self.redact(str(e))
            log.warning("ingestion %s of %r failed: %s", job_id, r["document"], message)
            self._set(job_id, f"failed: {message}")  # the body stays: the job can be retried
        else:
            self._set(job_id, COMPLETED, chunks, clear_body=True)
        finally:
            self._progress.pop(job_id, None)

    # -- the background worker ------------------------------------------------------------
    def start(self) -> None:
        """Start the worker and re-queue jobs a previous process left unfinished."""
        if self._thread is not None:
            return
        unfinished = self.db.query(
            "SELECT id FROM ingestion_jobs WHERE status IN (?, ?) ORDER BY created_on", (PENDING, PROCESSING)
        )
        for r in unfinished:
            self._enqueue(r["id"])
        self._thread = threading.Thread(target=self._work, name="eddi-rag-ingestion", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            job_id = self._queue.get()
            if job_id is None:
                return
            try:
                self.process(job_id)
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=30)
            self._thread = None
