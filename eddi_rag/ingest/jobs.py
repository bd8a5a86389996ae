"""Ingestion jobs: ``pending → processing → completed | failed: <message>``.

Jobs and their statuses live in the state database (SQLite, or the PostgreSQL a fleet shares), so they
survive a restart and any process may run them. A worker claims the oldest job it may take in one
statement (on PostgreSQL ``FOR UPDATE SKIP LOCKED``: two workers never take the same job) and holds it
under a lease (``lease_until``, EDDI_RAG_JOB_LEASE_SECONDS, renewed every second while the job runs, or every
third of the lease if shorter): a job whose worker
died is taken again once its lease ran out (at once when that worker was a process of this machine
that has ended), at most MAX_ATTEMPTS times in all (a document that crashes its process fails for good:
``failed: gave up after 3 attempts``). A job's document body is kept until it completes: a failed job can be retried as it
was. Each process runs EDDI_RAG_INGESTION_WORKERS jobs at once (default 2), their texts embedded in shared
batches (embeddings.buffer.SharedBuffers); a job waits while another job of its document, or a re-embedding of
its knowledge base, runs anywhere, so one document's jobs end in the order they were queued.

A pending or processing job can be cancelled: ``cancelled`` is stored before ``cancel`` returns
(so no restart ever runs it again), a file being parsed has its parse process killed within
POLL_SECONDS, and embedding stops before its next batch (the worker holding it learns of a cancel made on
another replica at its next lease renewal); nothing of a cancelled job is written. At
most ``max_queued`` jobs wait at once (EDDI_RAG_MAX_QUEUED_JOBS, default 1,000): more are refused
(QueueFullError, HTTP 429). While processing, ``progress`` says what the job does: ``parsing`` (the
pages or rows read) or ``embedding`` (chunks done of all), kept with the job at each lease renewal so
that every replica shows it. A failed job keeps what fixes it (``failure``: errors.FILE, DEPENDENCY or
CONFIGURATION), shown with its fix from the first failure on.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from eddi_rag import state
from eddi_rag.errors import CONFIGURATION, DEPENDENCY, FILE, EddiRagError
from eddi_rag.ingest.parsing import ParseCancelledError
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import POSTGRESQL, StateDatabase, StateUnavailableError
from eddi_rag.stores.base import StoreUnavailableError

log = logging.getLogger(__name__)

_KEPT = "EXISTS (SELECT 1 FROM ingestion_bodies b WHERE b.id = j.id)"  # the job's file is kept
_COLUMNS = ("id, kb_id, version, document, status, chunks, created_on, updated_on, document_id, progress, warnings, "
            "failure")  # a Job's (not the body)

PENDING, PROCESSING, COMPLETED, CANCELLED = "pending", "processing", "completed", "cancelled"
UNAVAILABLE = "pending: indexing unavailable"  # the KB's store is down: tried again until it is back
WAITING = (PENDING, PROCESSING, UNAVAILABLE)
MAX_ATTEMPTS = 3  # times a job is started before it fails for good
RETRY_SECONDS = (5.0, 300.0)  # a job whose store is down is tried again after 5 s, doubling up to 5 min
DEFAULT_MAX_QUEUED = 1_000
DEFAULT_WORKERS = 2  # jobs one process runs at once (EDDI_RAG_INGESTION_WORKERS): their texts share the model's batches
IDLE_POLL_SECONDS = 1.0  # how often an idle worker looks for jobs other processes queued (its own wake it at once)
# what fixes a failed job, by what its error said (errors.EddiRagError.failure)
FIXES = {
    FILE: "Replace the file (upload a fixed one under the same name) or remove it: it cannot be read as it is, and "
          "retrying will not help.",
    DEPENDENCY: "Retry later: something the ingestion needs was down or missing (not the file's fault).",
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


_now = fleet.now
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


# a job a worker may take: waiting and due, or held under a lease that ran out
_DUE = "(status IN (?, ?) AND COALESCE(not_before, '') <= ?) OR (status=? AND COALESCE(lease_until, '') < ?)"
# a job ``j`` waits while another job runs (under a live lease) for its document, or either re-embeds their whole
# knowledge base: the jobs of one document end in the order they were queued, whichever worker takes them
_BUSY = ("SELECT 1 FROM ingestion_jobs o WHERE o.kb_id = j.kb_id AND o.id <> j.id AND o.status = ? AND o.lease_until >= ? "
         "AND (COALESCE(o.document_id, o.document) = COALESCE(j.document_id, j.document) OR o.format = ? OR j.format = ?)")


REFUSED = "refused"  # the format of an upload refused at the door (kept in the history, never run)
REEMBED = "reembed"  # the format of a job that re-embeds a whole knowledge base (its body is not a file)


class Progress:
    """What a running job hears from its work (pages/rows parsed, chunks embedded) and asks (was it cancelled?)."""

    def __init__(self, job_id: str, queue: IngestionQueue, acl: list[str] | None = None):
        self.job_id, self.queue = job_id, queue
        self.acl = acl  # who may read the document it writes (None: the ACL the document had)

    def cancelled(self) -> bool:
        """Cancelled, or the worker is stopping (then the job waits for the next start)."""
        return self.job_id in self.queue._cancel or self.queue._stop.is_set()

    def parsed(self, unit: str, done: int) -> None:
        self.queue._progress[self.job_id] = {"phase": "parsing", "unit": unit, "done": done, "total": None}

    def warn(self, text: str) -> None:
        """Something the job's author should check, kept with the job once it completes."""
        self.queue._warnings.setdefault(self.job_id, []).append(text)

    def embedded(self, done: int, total: int) -> None:
        if self.cancelled():
            raise _Cancelled()
        self.queue._progress[self.job_id] = {"phase": "embedding", "unit": "chunks", "done": done, "total": total}


# run(kb_id, version, document, body, format, progress) -> number of chunks written
Runner = Callable[[str, int, str, str, bytes, str, Progress], int]  # kb, version, document id, name, body, format


def workers_from_env() -> int:
    raw = os.environ.get("EDDI_RAG_INGESTION_WORKERS", str(DEFAULT_WORKERS))
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ValueError(f"EDDI_RAG_INGESTION_WORKERS must be a whole number from 1 to 64, got {raw!r}")
    return int(raw)


def max_queued_from_env() -> int:
    raw = os.environ.get("EDDI_RAG_MAX_QUEUED_JOBS", str(DEFAULT_MAX_QUEUED))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"EDDI_RAG_MAX_QUEUED_JOBS must be a positive whole number, got {raw!r}")
    return int(raw)


class IngestionQueue:
    def __init__(self, db: StateDatabase, run: Runner, redact: Callable[[str], str] = lambda s: s, max_queued: int | None = None,
                 lease_seconds: float | None = None, workers: int | None = None):
        self.db, self.run, self.redact = db, run, redact
        self.max_queued = max_queued or max_queued_from_env()
        self.workers = workers or workers_from_env()
        # the jobs this queue runs now, their leases renewed (with their progress) every min(1 s, a third of the lease)
        self.leases = fleet.Leases("ingestion", self._renew, self._lost, lease_seconds, redact)
        self.owner = self.leases.owner
        state.migrate(db)
        self._cancel: set[str] = set()  # processing jobs asked to stop
        self._waits: dict[str, int] = {}  # job -> times its store was found down in a row
        self._wake = threading.Event()  # a job was queued here: look now
        self._claiming = threading.Lock()  # held from a claim until its job is held (idle() waits for it)
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()  # stop(): the running job is put back for the next start
        self._progress: dict[str, dict[str, Any]] = {}
        self._warnings: dict[str, list[str]] = {}  # what a running job wants checked, written when it completes

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
        self._wake.set()
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
        self._cancel.discard(job_id)
        self.db.execute("UPDATE ingestion_jobs SET status=?, chunks=NULL, attempts=0, owner=NULL, lease_until=NULL, not_before=NULL, "
                        "progress=NULL, updated_on=? WHERE id=?", (PENDING, _now(), job_id))
        self._wake.set()
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
        self._cancel.add(job_id)  # (a pending one never starts: its stored status says so)
        self.db.execute(f"UPDATE ingestion_jobs SET status=?, updated_on=? WHERE id=? AND status IN ({', '.join('?' * len(WAITING))})",
                        (CANCELLED, _now(), job_id, *WAITING))
        return self.status(job_id) or job

    def original(self, kb_id: str, document_id: str) -> tuple[str, bytes, str] | None:
        """(name, file, format) a document was last ingested from, when kept (its latest ingestion completed
        since files were kept); None otherwise."""
        rows = self.db.query(f"SELECT j.id, document, format FROM ingestion_jobs j WHERE kb_id=? AND "
                             f"COALESCE(document_id, document)=? AND status=? AND {_KEPT} "
                             "ORDER BY created_on DESC LIMIT 1", (kb_id, document_id, COMPLETED))
        body = self._body(rows[0]["id"]) if rows else None
        return None if body is None else (rows[0]["document"], body, rows[0]["format"] or "text")

    def _body(self, job_id: str) -> bytes | None:
        """The file of a job, when kept (text in jobs written before files were supported: encoded)."""
        rows = self.db.query("SELECT body FROM ingestion_bodies WHERE id=?", (job_id,))
        body = rows[0]["body"] if rows else None
        return body.encode("utf-8") if isinstance(body, str) else None if body is None else bytes(body)

    def kept_documents(self, kb_id: str) -> list[str]:
        """The documents of a knowledge base whose file is kept (``original`` finds one)."""
        rows = self.db.query("SELECT DISTINCT COALESCE(document_id, document) AS d FROM ingestion_jobs j WHERE kb_id=? AND "
                             f"status=? AND {_KEPT} AND format<>?", (kb_id, COMPLETED, REEMBED))
        return sorted(r["d"] for r in rows)

    def let_go(self, kb_id: str, document_id: str | None = None, keep: str = "") -> None:
        """Forget the kept files of a document (removed), or of every document of a knowledge base; but
        that of the ingestion ``keep`` (the document's latest)."""
        document = " AND COALESCE(document_id, document)=?" if document_id is not None else ""
        self.db.execute(f"DELETE FROM ingestion_bodies WHERE id IN (SELECT id FROM ingestion_jobs WHERE kb_id=?{document} "
                        "AND status=? AND id<>?)", (kb_id, *([document_id] if document_id is not None else []), COMPLETED, keep))

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

    def _set(self, job_id: str, status: str, chunks: int | None = None, clear_body: bool = False,
             warnings: list[str] | None = None, failure: str | None = None) -> None:
        """A job's new status, unless it was cancelled meanwhile (cancelled stays cancelled) or another worker
        took it since (its lease ran out: that worker's outcome counts)."""
        with self.db.transaction() as c:
            written = c.execute(
                "UPDATE ingestion_jobs SET status=?, chunks=?, updated_on=?, owner=NULL, lease_until=NULL, progress=NULL, "
                "warnings=?, failure=? WHERE id=? AND status<>? AND owner=?",
                (status, chunks, _now(), json.dumps(warnings) if warnings else None, failure, job_id, CANCELLED, self.owner),
            ).rowcount
            if clear_body and written:
                c.execute("DELETE FROM ingestion_bodies WHERE id=?", (job_id,))

    def _claim(self, job_id: str | None = None) -> Any:
        """Take a job (``job_id``, if it is waiting; else the oldest this worker may take: pending and due, or
        processing under a lease that ran out) in one statement, counting the attempt; its row, or None."""
        now = _now()
        params: tuple[Any, ...]
        if job_id is not None:
            which, params = "id=? AND status IN (?, ?, ?)", (job_id, *WAITING)
        else:
            if not self._due(now):  # (a look that finds nothing writes nothing)
                return None
            skip = " FOR UPDATE SKIP LOCKED" if self.db.dialect == POSTGRESQL else ""
            which = f"id = (SELECT id FROM ingestion_jobs j WHERE ({_DUE}) AND NOT EXISTS ({_BUSY}) ORDER BY created_on, id LIMIT 1{skip})"
            params = (PENDING, UNAVAILABLE, now, PROCESSING, now, PROCESSING, now, REEMBED, REEMBED)
        rows = self.db.query(f"UPDATE ingestion_jobs SET status=?, attempts=attempts+1, owner=?, lease_until=?, not_before=NULL, "
                             f"progress=NULL, updated_on=? WHERE {which} RETURNING *",
                             (PROCESSING, self.owner, self.leases.until(), now, *params))
        if rows:
            self.leases.hold(rows[0]["id"])
        return rows[0] if rows else None

    def process(self, job_id: str) -> None:
        """Run the job ``job_id`` now, if it waits (whoever held it)."""
        row = self._claim(job_id)
        if row is None:
            self._cancel.discard(job_id)  # (cancelled before it started)
            return
        self._carry_out(row)

    def _carry_out(self, r: Any) -> None:
        job_id = r["id"]
        try:
            if r["attempts"] > MAX_ATTEMPTS:  # it was started that often and never finished: it stops the process
                self._set(job_id, f"failed: gave up after {r['attempts'] - 1} attempts", failure=FILE)  # it ended its process
                return
            self._cancel.discard(job_id)  # (a retried job cancelled before)
            self._run(r)
        finally:
            self.leases.release(job_id)
            self._progress.pop(job_id, None)
            self._warnings.pop(job_id, None)
            self._cancel.discard(job_id)

    def _run(self, r: Any) -> None:
        job_id = r["id"]
        self._progress[job_id] = {"phase": "parsing", "unit": None, "done": 0, "total": None}
        outcome: Callable[[], Any]
        try:
            chunks = self.run(r["kb_id"], r["version"], r["document_id"] or r["document"], r["document"],
                              self._body(job_id) or b"", r["format"] or "text",
                              Progress(job_id, self, None if r["acl"] is None else json.loads(r["acl"])))
        except (_Cancelled, ParseCancelledError):
            if job_id in self._cancel:
                outcome = lambda: self._set(job_id, CANCELLED)  # noqa: E731
            else:  # the worker is stopping: released for the next one (not counted as an attempt)
                outcome = lambda: self._release(job_id, PENDING)  # noqa: E731
        except StateUnavailableError as e:  # the state database went away meanwhile: not an attempt either
            log.warning("ingestion %s of %r waits for the state database: %s", job_id, r["document"], e)
            outcome = lambda: self._release(job_id, PENDING)  # noqa: E731
        except StoreUnavailableError as e:  # not the document's fault: not an attempt either
            log.warning("ingestion %s of %r waits for its store: %s", job_id, r["document"], self.redact(str(e)))
            n = self._waits[job_id] = self._waits.get(job_id, 0) + 1
            after = min(RETRY_SECONDS[1], RETRY_SECONDS[0] * 2 ** (n - 1))
            outcome = lambda: self._release(job_id, UNAVAILABLE, after)  # noqa: E731
        except Exception as e:  # noqa: BLE001 - any failure becomes the job's status
            message = self.redact(str(e))
            log.warning("ingestion %s of %r failed: %s", job_id, r["document"], message)
            failure = getattr(e, "failure", None) or DEPENDENCY
            outcome = lambda: self._set(job_id, f"failed: {message}", failure=failure)  # noqa: E731 - the body stays: it can be retried
        else:
            def outcome() -> None:
                # the document's file is kept with its latest ingestion (re-parse), earlier ones let go
                self._set(job_id, COMPLETED, chunks, clear_body=r["format"] == REEMBED, warnings=self._warnings.get(job_id))
                self.let_go(r["kb_id"], r["document_id"] or r["document"], keep=job_id)
                self._waits.pop(job_id, None)
        self._recorded(job_id, outcome)

    def _recorded(self, job_id: str, write: Callable[[], Any]) -> None:
        """Write a job's outcome, waiting while the state database is away (a restart); when the queue stops first,
        the job's lease runs out and a worker takes it again."""
        delay = 0.1
        while True:
            try:
                write()
                return
            except StateUnavailableError:
                if self._stop.wait(delay):
                    return
                delay = min(1.0, delay * 2)

    def _release(self, job_id: str, status: str, after: float = 0.0) -> None:
        """Give a job back (the attempt not counted): ``status`` again, due in ``after`` seconds."""
        self.db.execute("UPDATE ingestion_jobs SET status=?, attempts=attempts-1, owner=NULL, lease_until=NULL, progress=NULL, "
                        "not_before=?, updated_on=? WHERE id=? AND status=? AND owner=?",
                        (status, _now(after) if after else None, _now(), job_id, PROCESSING, self.owner))

    def renew(self) -> None:
        """Renew the leases of the jobs this queue runs, keep their progress where every replica reads it, and
        hear of the ones cancelled elsewhere (the lease thread does this; tests call it to be sure it ran)."""
        self.leases.renew()

    def _renew(self, job_id: str, until: str) -> bool:
        progress = self._progress.get(job_id)
        return bool(self.db.execute("UPDATE ingestion_jobs SET lease_until=?, progress=? WHERE id=? AND owner=? AND status=?",
                                    (until, json.dumps(progress) if progress else None, job_id, self.owner,
                                     PROCESSING)).rowcount)

    def _lost(self, job_id: str) -> None:
        """A held job is no longer ours and running: cancelled elsewhere, it stops at its next step."""
        rows = self.db.query("SELECT status FROM ingestion_jobs WHERE id=?", (job_id,))
        if rows and rows[0]["status"] == CANCELLED:
            self._cancel.add(job_id)

    def release_ended(self) -> int:
        """Make the jobs held by an ended process of this machine (or an ended queue of this one) due now,
        instead of when their leases run out; how many."""
        rows = self.db.query("SELECT id, owner FROM ingestion_jobs WHERE status=? AND owner IS NOT NULL", (PROCESSING,))
        ended = [r["id"] for r in rows if fleet.owner_ended(r["owner"])]
        for job_id in ended:
            self.db.execute("UPDATE ingestion_jobs SET lease_until=NULL WHERE id=? AND status=?", (job_id, PROCESSING))
        return len(ended)

    # -- the background worker ------------------------------------------------------------
    def start(self) -> None:
        """Start the worker (and the renewal of its leases); jobs a process of this machine left unfinished are
        due at once."""
        if self._threads:
            return
        self._stop.clear()
        self.leases.working()
        self.release_ended()
        self._threads = [threading.Thread(target=self._work, name=f"eddi-rag-ingestion-{i}", daemon=True)
                         for i in range(self.workers)]
        for thread in self._threads:
            thread.start()

    def working(self) -> bool:
        """Whether this queue's worker runs."""
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                with self._claiming:
                    row = self._claim()
            except Exception as e:  # noqa: BLE001 - the state database is out of reach: try again
                log.warning("ingestion worker cannot reach the state database: %s", self.redact(str(e)))
                row = None
            if row is not None:
                try:
                    self._carry_out(row)
                except Exception as e:  # noqa: BLE001 - the worker goes on; the job's lease runs out and it is taken again
                    log.warning("ingestion %s: %s", row["id"], self.redact(str(e)))
                self._wake.set()  # a job of the same document may wait for this one: the other workers look now
            else:
                self._wake.wait(IDLE_POLL_SECONDS)

    def idle(self) -> bool:
        """Nothing runs here and nothing waits that a worker could take now."""
        with self._claiming:
            if self.leases.held():
                return False
        return not self._due(_now())

    def _due(self, now: str) -> bool:
        """Whether a job waits that a worker may take now."""
        return bool(self.db.query(f"SELECT 1 FROM ingestion_jobs WHERE {_DUE} LIMIT 1", (PENDING, UNAVAILABLE, now, PROCESSING, now)))

    def wait_idle(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.idle():
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        """Stop the worker; a job it is running stops at its next step and is given back (the next worker takes it)."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads = []
        self.leases.ended()
