"""Ingestion jobs: ``pending → processing → completed | failed: <message>``.

Jobs and their statuses live in SQLite, so they survive a restart; a job that was pending or
processing when the process stopped is picked up again by the next worker (its document body
is kept until the job ends).
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from eddi_rag.db import Database

log = logging.getLogger(__name__)

_SCHEMA = """CREATE TABLE IF NOT EXISTS ingestion_jobs (
    id TEXT PRIMARY KEY, kb_id TEXT NOT NULL, version INTEGER NOT NULL, document TEXT NOT NULL,
    status TEXT NOT NULL, body TEXT, chunks INTEGER, created_on TEXT NOT NULL, updated_on TEXT NOT NULL,
    format TEXT)"""
# ``body`` holds the file's bytes (a BLOB) or, in jobs written before files were supported, text;
# ``format`` is what loaders.detect decided (NULL in those older jobs: plain text).

PENDING, PROCESSING, COMPLETED = "pending", "processing", "completed"


@dataclass
class Job:
    id: str
    kb_id: str
    version: int
    document: str
    status: str
    chunks: int | None = None

    def to_json(self) -> dict:
        return {"ingestionId": self.id, "kbId": self.kb_id, "documentName": self.document,
                "status": self.status, "chunks": self.chunks}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# run(kb_id, version, document, body, format) -> number of chunks written
Runner = Callable[[str, int, str, bytes, str], int]


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

    def submit(self, kb_id: str, version: int, document: str, body: bytes | str, fmt: str = "text") -> Job:
        job = Job(secrets.token_hex(12), kb_id, version, document, PENDING)
        now = _now()
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.db.execute(
            "INSERT INTO ingestion_jobs (id, kb_id, version, document, status, body, chunks, created_on, updated_on, "
            "format) VALUES (?,?,?,?,?,?,NULL,?,?,?)",
            (job.id, kb_id, version, document, PENDING, data, now, now, fmt),
        )
        with self._idle:
            self._busy += 1
        self._queue.put(job.id)
        return job

    def status(self, job_id: str) -> Job | None:
        rows = self.db.query("SELECT * FROM ingestion_jobs WHERE id=?", (job_id,))
        if not rows:
            return None
        r = rows[0]
        return Job(r["id"], r["kb_id"], r["version"], r["document"], r["status"], r["chunks"])

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
        try:
            body = r["body"] or b""
            chunks = self.run(r["kb_id"], r["version"], r["document"],
                              body.encode("utf-8") if isinstance(body, str) else body, r["format"] or "text")
        except Exception as e:  # noqa: BLE001 - any failure becomes the job's status
            message = self.redact(str(e))
            log.warning("ingestion %s of %r failed: %s", job_id, r["document"], message)
            self._set(job_id, f"failed: {message}", clear_body=True)
        else:
            self._set(job_id, COMPLETED, chunks, clear_body=True)

    # -- the background worker ------------------------------------------------------------
    def start(self) -> None:
        """Start the worker and re-queue jobs a previous process left unfinished."""
        if self._thread is not None:
            return
        unfinished = self.db.query(
            "SELECT id FROM ingestion_jobs WHERE status IN (?, ?) ORDER BY created_on", (PENDING, PROCESSING)
        )
        for r in unfinished:
            with self._idle:
                self._busy += 1
            self._queue.put(r["id"])
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
