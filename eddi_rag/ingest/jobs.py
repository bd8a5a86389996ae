"""Ingestion jobs: ``pending → processing → completed | failed: <message>``.

Jobs and their statuses live in SQLite, so they survive a restart; a job that was pending or
processing when the process stopped is picked up again by the next worker, at most MAX_ATTEMPTS
times in all (a document that crashes the process fails for good: ``failed: gave up after 3
attempts``). A job's document body is kept until it completes: a failed job can be retried as it
was. A pending or processing job can be cancelled: ``cancelled`` is stored before ``cancel`` returns
(so no restart ever runs it again), a file being parsed has its parse process killed within
POLL_SECONDS, and embedding stops before its next batch; nothing of a cancelled job is written. At
most ``max_queued`` jobs wait at once (EDDI_RAG_MAX_QUEUED_JOBS, default 1,000): more are refused
(QueueFullError, HTTP 429). While processing, ``progress`` says what the job does: ``parsing`` (the
pages or rows read) or ``embedding`` (chunks done of all).
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.db import Database
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.parsing import ParseCancelledError
from eddi_rag.stores.base import StoreUnavailableError

log = logging.getLogger(__name__)

_COLUMNS = "id, kb_id, version, document, status, chunks, created_on, updated_on, document_id"  # a Job's (not the body)

PENDING, PROCESSING, COMPLETED, CANCELLED = "pending", "processing", "completed", "cancelled"
UNAVAILABLE = "pending: indexing unavailable"  # the KB's store is down: tried again until it is back
WAITING = (PENDING, PROCESSING, UNAVAILABLE)
MAX_ATTEMPTS = 3  # times a job is started before it fails for good
RETRY_SECONDS = (5.0, 300.0)  # a job whose store is down is tried again after 5 s, doubling up to 5 min
DEFAULT_MAX_QUEUED = 1_000


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


class _Cancelled(Exception):
    pass


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

    @classmethod
    def of(cls, row: Any, progress: dict[str, Any] | None = None) -> Job:
        return cls(row["id"], row["kb_id"], row["version"], row["document"], row["status"], row["chunks"],
                   row["created_on"], row["updated_on"], progress if row["status"] == PROCESSING else None,
                   row["document_id"] or row["document"])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ingestionId": self.id, "kbId": self.kb_id, "documentName": self.document,
               "documentId": self.document_id or self.document,
               "status": self.status, "chunks": self.chunks, "createdOn": self.created, "updatedOn": self.updated}
        if self.progress is not None:
            out["progress"] = self.progress
        return out


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


REFUSED = "refused"  # the format of an upload refused at the door (kept in the history, never run)
REEMBED = "reembed"  # the format of a job that re-embeds a whole knowledge base (its body is not a file)


class Progress:
    """What a running job hears from its work (pages/rows parsed, chunks embedded) and asks (was it cancelled?)."""

    def __init__(self, job_id: str, queue: IngestionQueue):
        self.job_id, self.queue = job_id, queue

    def cancelled(self) -> bool:
        """Cancelled, or the worker is stopping (then the job waits for the next start)."""
        return self.job_id in self.queue._cancel or self.queue._stopping

    def parsed(self, unit: str, done: int) -> None:
        self.queue._progress[self.job_id] = {"phase": "parsing", "unit": unit, "done": done, "total": None}

    def embedded(self, done: int, total: int) -> None:
        if self.cancelled():
            raise _Cancelled()
        self.queue._progress[self.job_id] = {"phase": "embedding", "unit": "chunks", "done": done, "total": total}


# run(kb_id, version, document, body, format, progress) -> number of chunks written
Runner = Callable[[str, int, str, str, bytes, str, Progress], int]  # kb, version, document id, name, body, format


def max_queued_from_env() -> int:
    raw = os.environ.get("EDDI_RAG_MAX_QUEUED_JOBS", str(DEFAULT_MAX_QUEUED))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"EDDI_RAG_MAX_QUEUED_JOBS must be a positive whole number, got {raw!r}")
    return int(raw)


class IngestionQueue:
    def __init__(self, db: Database, run: Runner, redact: Callable[[str], str] = lambda s: s, max_queued: int | None = None):
        self.db, self.run, self.redact = db, run, redact
        self.max_queued = max_queued or max_queued_from_env()
        state.migrate(db)
        self._cancel: set[str] = set()  # processing jobs asked to stop
        self._stopping = False  # stop(): the running job is put back for the next start
        self._waits: dict[str, int] = {}  # job -> times its store was found down in a row
        self._timers: dict[str, threading.Timer] = {}
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition()
        self._busy = 0
        self._progress: dict[str, dict[str, Any]] = {}

    def _enqueue(self, job_id: str) -> None:
        with self._idle:
            self._busy += 1
        self._queue.put(job_id)

    def submit(self, kb_id: str, version: int, document: str, body: bytes | str, fmt: str = "text", append: bool = False,
               document_id: str | None = None) -> Job:
        """Queue ``body`` as the document named ``document``: its chunks replace that document's, or
        (``append``) land beside them under an id of their own (``<document>#<ingestion id>``), or
        (``document_id``) replace those of that document (a re-parse)."""
        waiting = self.db.query("SELECT COUNT(*) AS n FROM ingestion_jobs WHERE status IN (?, ?, ?)", WAITING)[0]["n"]
        if waiting >= self.max_queued:
            raise QueueFullError(f"{waiting} ingestions are waiting (at most {self.max_queued}); try again later")
        job_id = secrets.token_hex(12)
        job = Job(job_id, kb_id, version, document, PENDING,
                  document_id=document_id or (f"{document}#{job_id}" if append else document))
        now = _now()
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.db.execute(
            "INSERT INTO ingestion_jobs (id, kb_id, version, document, status, body, chunks, created_on, updated_on, "
            "format, document_id) VALUES (?,?,?,?,?,?,NULL,?,?,?,?)",
            (job.id, kb_id, version, document, PENDING, data, now, now, fmt, job.document_id),
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

    def failing(self, kb_id: str) -> list[str]:
        """The documents of ``kb_id`` whose latest ingestion failed (a later one that succeeds clears them)."""
        rows = self.db.query("SELECT document, status FROM ingestion_jobs j WHERE kb_id=? AND created_on = "
                             "(SELECT MAX(created_on) FROM ingestion_jobs k WHERE k.kb_id=j.kb_id "
                             "AND COALESCE(k.document_id, k.document) = COALESCE(j.document_id, j.document)) "
                             "ORDER BY document", (kb_id,))
        return [r["document"] for r in rows if r["status"].startswith("failed")]

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state (every ``failed: …`` counted as ``failed``)."""
        counts = dict.fromkeys((PENDING, PROCESSING, COMPLETED, CANCELLED, "failed"), 0)
        for r in self.db.query("SELECT CASE WHEN status LIKE 'failed%' THEN 'failed' ELSE status END AS state, "
                               "COUNT(*) AS n FROM ingestion_jobs GROUP BY state"):
            counts[r["state"]] = r["n"]
        return counts

    def last_updates(self) -> dict[str, str]:
        """Each KB's most recent ingestion time (for listings)."""
        return {r["kb_id"]: r["t"] for r in self.db.query("SELECT kb_id, MAX(updated_on) AS t FROM ingestion_jobs GROUP BY kb_id")}

    def refused(self, kb_id: str, version: int, document: str, reason: str) -> Job:
        """An upload refused at the door (unsupported type, too large, empty), kept in the history as a failed
        ingestion that cannot be retried (its file was not kept)."""
        job = Job(secrets.token_hex(12), kb_id, version, document, f"failed: refused: {reason}"[:2000], document_id=document)
        now = _now()
        self.db.execute(
            "INSERT INTO ingestion_jobs (id, kb_id, version, document, status, body, chunks, created_on, updated_on, "
            "format, document_id) VALUES (?,?,?,?,?,NULL,NULL,?,?,?,?)",
            (job.id, kb_id, version, document, job.status, now, now, REFUSED, document))
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
        self._cancel.discard(job_id)
        self.db.execute("UPDATE ingestion_jobs SET status=?, chunks=NULL, attempts=0, updated_on=? WHERE id=?", (PENDING, _now(), job_id))
        self._enqueue(job_id)
        return self.status(job_id) or job

    def cancel(self, job_id: str) -> Job:
        """Cancel a pending or processing job: ``cancelled`` is stored at once; a processing one stops
        within POLL_SECONDS while parsing (its process killed), or before its next embedding batch.
        Nothing of it is written (a document's chunks replace its old ones in one step, at the end)."""
        job = self.status(job_id)
        if job is None or job.status not in WAITING:
            raise JobNotRetryableError(f"ingestion {job_id} is {job.status if job else 'unknown'}: only a pending or "
                                       f"processing one can be cancelled")
        self._cancel.add(job_id)  # (a pending one never starts: its stored status says so)
        self.db.execute(f"UPDATE ingestion_jobs SET status=?, updated_on=? WHERE id=? AND status IN ({', '.join('?' * len(WAITING))})",
                        (CANCELLED, _now(), job_id, *WAITING))
        return self.status(job_id) or job

    def original(self, kb_id: str, document_id: str) -> tuple[str, bytes, str] | None:
        """(name, file, format) a document was last ingested from, when kept (its latest ingestion completed
        since files were kept); None otherwise."""
        rows = self.db.query("SELECT document, body, format FROM ingestion_jobs WHERE kb_id=? AND "
                             "COALESCE(document_id, document)=? AND status=? AND body IS NOT NULL "
                             "ORDER BY created_on DESC LIMIT 1", (kb_id, document_id, COMPLETED))
        if not rows:
            return None
        body = rows[0]["body"]
        return rows[0]["document"], body.encode("utf-8") if isinstance(body, str) else body, rows[0]["format"] or "text"

    def let_go(self, kb_id: str, document_id: str | None = None, keep: str = "") -> None:
        """Forget the kept files of a document (removed), or of every document of a knowledge base; but
        that of the ingestion ``keep`` (the document's latest)."""
        document = " AND COALESCE(document_id, document)=?" if document_id is not None else ""
        self.db.execute(f"UPDATE ingestion_jobs SET body=NULL WHERE kb_id=?{document} AND status=? AND id<>? "
                        "AND body IS NOT NULL", (kb_id, *([document_id] if document_id is not None else []), COMPLETED, keep))

    def cancel_kb(self, kb_id: str) -> int:
        """Cancel every pending or processing job of a knowledge base (it is being deleted); how many."""
        rows = self.db.query(f"SELECT id FROM ingestion_jobs WHERE kb_id=? AND status IN ({', '.join('?' * len(WAITING))})",
                             (kb_id, *WAITING))
        for r in rows:
            try:
                self.cancel(r["id"])
            except JobNotRetryableError:  # it ended meanwhile
                pass
        return len(rows)

    def _set(self, job_id: str, status: str, chunks: int | None = None, clear_body: bool = False) -> None:
        """A job's new status, unless it was cancelled meanwhile (cancelled stays cancelled)."""
        body = ", body=NULL" if clear_body else ""
        self.db.execute(
            f"UPDATE ingestion_jobs SET status=?, chunks=?, updated_on=?{body} WHERE id=? AND status<>?",
            (status, chunks, _now(), job_id, CANCELLED),
        )

    def process(self, job_id: str) -> None:
        rows = self.db.query("SELECT * FROM ingestion_jobs WHERE id=?", (job_id,))
        if not rows or rows[0]["status"] not in WAITING:
            self._cancel.discard(job_id)  # (cancelled before it started)
            return
        r = rows[0]
        if r["attempts"] >= MAX_ATTEMPTS:  # it was started that often and never finished: it stops the process
            self._set(job_id, f"failed: gave up after {r['attempts']} attempts")
            return
        self._cancel.discard(job_id)  # (a retried job cancelled before)
        started = self.db.execute(f"UPDATE ingestion_jobs SET status=?, attempts=attempts+1, updated_on=? "
                                  f"WHERE id=? AND status IN ({', '.join('?' * len(WAITING))})", (PROCESSING, _now(), job_id, *WAITING))
        if not started.rowcount:  # cancelled since it was read
            return
        self._progress[job_id] = {"phase": "parsing", "unit": None, "done": 0, "total": None}
        try:
            body = r["body"] or b""
            chunks = self.run(r["kb_id"], r["version"], r["document_id"] or r["document"], r["document"],
                              body.encode("utf-8") if isinstance(body, str) else body, r["format"] or "text", Progress(job_id, self))
        except (_Cancelled, ParseCancelledError):
            if job_id in self._cancel:
                self._set(job_id, CANCELLED)
            else:  # the server is stopping: the next start runs it again (not counted as an attempt)
                self.db.execute("UPDATE ingestion_jobs SET status=?, attempts=attempts-1, updated_on=? WHERE id=? AND status=?",
                                (PENDING, _now(), job_id, PROCESSING))
        except StoreUnavailableError as e:  # not the document's fault: not an attempt either
            log.warning("ingestion %s of %r waits for its store: %s", job_id, r["document"], self.redact(str(e)))
            self.db.execute("UPDATE ingestion_jobs SET status=?, attempts=attempts-1, updated_on=? WHERE id=?",
                            (UNAVAILABLE, _now(), job_id))
            self._later(job_id)
        except Exception as e:  # noqa: BLE001 - any failure becomes the job's status
            message = self.redact(str(e))
            log.warning("ingestion %s of %r failed: %s", job_id, r["document"], message)
            self._set(job_id, f"failed: {message}")  # the body stays: the job can be retried
        else:
            # the document's file is kept with its latest ingestion (re-parse), earlier ones let go
            self._set(job_id, COMPLETED, chunks, clear_body=r["format"] == REEMBED)
            self.let_go(r["kb_id"], r["document_id"] or r["document"], keep=job_id)
            self._waits.pop(job_id, None)
        finally:
            self._progress.pop(job_id, None)
            self._cancel.discard(job_id)

    def _later(self, job_id: str) -> None:
        """Queue the job again once its store may be back (exponential waits)."""
        n = self._waits[job_id] = self._waits.get(job_id, 0) + 1
        if self._thread is None:
            return  # no worker: the next start() picks it up
        timer = threading.Timer(min(RETRY_SECONDS[1], RETRY_SECONDS[0] * 2 ** (n - 1)), self._enqueue, (job_id,))
        timer.daemon = True
        self._timers[job_id] = timer
        timer.start()

    # -- the background worker ------------------------------------------------------------
    def start(self) -> None:
        """Start the worker and re-queue jobs a previous process left unfinished."""
        if self._thread is not None:
            return
        self._stopping = False
        unfinished = self.db.query("SELECT id FROM ingestion_jobs WHERE status IN (?, ?, ?) ORDER BY created_on", WAITING)
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
        """Stop the worker; a job it is running stops at its next step and waits for the next start."""
        self._stopping = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=30)
            self._thread = None
