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

import os
from collections.abc import Callable
from typing import Any

from eddi_rag import state
from eddi_rag.ingest.job_claims import JobClaims
from eddi_rag.ingest.job_records import (  # noqa: F401 - what callers import from here
    DEFAULT_MAX_QUEUED,
    FIXES,
    Job,
    JobNotRetryableError,
    JobRecords,
    QueueFullError,
    UnknownIngestionError,
    max_queued_from_env,
)
from eddi_rag.ingest.job_states import CANCELLED, COMPLETED, MAX_ATTEMPTS, PENDING, PROCESSING, REEMBED, REFUSED, UNAVAILABLE, WAITING  # noqa: F401
from eddi_rag.ingest.kept_files import KeptFiles
from eddi_rag.ingest.worker import IngestionWorker, JobProgress, Runner  # noqa: F401
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import StateDatabase

DEFAULT_WORKERS = 2  # jobs one process runs at once (EDDI_RAG_INGESTION_WORKERS): their texts share the model's batches


def workers_from_env() -> int:
    raw = os.environ.get("EDDI_RAG_INGESTION_WORKERS", str(DEFAULT_WORKERS))
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ValueError(f"EDDI_RAG_INGESTION_WORKERS must be a whole number from 1 to 64, got {raw!r}")
    return int(raw)


class IngestionQueue:
    """The ingestion wing, put together: the jobs' records (``job_records``), their kept files (``kept_files``), who
    runs which (``job_claims``, on the shared leases) and the threads that run them (``worker``)."""

    def __init__(self, db: StateDatabase, run: Runner, redact: Callable[[str], str] = lambda s: s, max_queued: int | None = None,
                 lease_seconds: float | None = None, workers: int | None = None):
        state.migrate(db)
        self.db = db
        # the jobs this process runs, their leases renewed (with their progress) every min(1 s, a third of the lease)
        self.leases = fleet.Leases("ingestion", self._renew, self._lost, lease_seconds, redact)
        self.owner = self.leases.owner
        self.claims = JobClaims(db, self.leases)
        self.kept = KeptFiles(db)
        self.worker = IngestionWorker(self.claims, self.kept, run, redact, workers or workers_from_env())
        self.records = JobRecords(db, max_queued, self.worker.progress)

    @property
    def max_queued(self) -> int:
        """Jobs that may wait at once (the records refuse more)."""
        return self.records.max_queued

    @max_queued.setter
    def max_queued(self, n: int) -> None:
        self.records.max_queued = n

    @property
    def workers(self) -> int:
        return self.worker.workers

    # -- the records ------------------------------------------------------------------------
    def submit(self, kb_id: str, version: int, document: str, body: bytes | str, fmt: str = "text", append: bool = False,
               document_id: str | None = None, acl: list[str] | None = None) -> Job:
        """Queue ``body`` as the document named ``document``: its chunks replace that document's, or
        (``append``) land beside them under an id of their own (``<document>#<ingestion id>``), or
        (``document_id``) replace those of that document (a re-parse). ``acl``: who may read it (None: the ACL the
        document had). QueueFullError (429) when ``max_queued`` wait already."""
        job = self.records.submit(kb_id, version, document, body, fmt, append, document_id, acl)
        self.worker.wake.set()
        return job

    def status(self, job_id: str) -> Job | None:
        return self.records.status(job_id)

    def of_kb(self, kb_id: str, limit: int = 100) -> list[Job]:
        """The KB's ingestions, newest first."""
        return self.records.of_kb(kb_id, limit)

    def failing(self, kb_id: str) -> list[str]:
        return self.records.failing(kb_id)

    def counts(self, kb_ids: list[str] | None = None) -> dict[str, int]:
        return self.records.counts(kb_ids)

    def last_updates(self) -> dict[str, str]:
        return self.records.last_updates()

    def refused(self, kb_id: str, version: int, document: str, reason: str) -> Job:
        return self.records.refused(kb_id, version, document, reason)

    def retry(self, job_id: str) -> Job:
        job = self.records.retry(job_id)
        self.worker.wake.set()
        return job

    def cancel(self, job_id: str) -> Job:
        """Cancel a pending or processing job (``job_records``); one this process runs stops at its next step."""
        job = self.records.cancel(job_id)
        self.worker.cancel(job_id)
        return job

    def cancel_kb(self, kb_id: str) -> int:
        """Cancel every pending or processing job of a knowledge base (it is being deleted); how many."""
        ids = self.records.waiting(kb_id)
        for job_id in ids:
            try:
                self.cancel(job_id)
            except JobNotRetryableError:  # it ended meanwhile
                pass
        return len(ids)

    # -- the kept files ---------------------------------------------------------------------
    def original(self, kb_id: str, document_id: str) -> tuple[str, bytes, str] | None:
        return self.kept.original(kb_id, document_id)

    def kept_documents(self, kb_id: str) -> list[str]:
        return self.kept.documents(kb_id)

    def let_go(self, kb_id: str, document_id: str | None = None, keep: str = "") -> None:
        self.kept.let_go(kb_id, document_id, keep)

    # -- the claims and the worker ----------------------------------------------------------
    def _renew(self, job_id: str, until: str) -> bool:
        return self.claims.renewed(job_id, until, self.worker.progress(job_id))

    def _lost(self, job_id: str) -> None:
        """A held job is no longer ours and running: cancelled elsewhere, it stops at its next step."""
        if self.claims.cancelled(job_id):
            self.worker.cancel(job_id)

    def renew(self) -> None:
        """Renew the leases of the jobs this process runs, keep their progress where every replica reads it, and
        hear of the ones cancelled elsewhere (the lease thread does this; tests call it to be sure it ran)."""
        self.leases.renew()

    def release_ended(self) -> int:
        return self.claims.release_ended()

    def claim(self, job_id: str | None = None) -> Any:
        """Take a job now (tests: a worker that dies holding it)."""
        return self.claims.claim(job_id)

    def carry_out(self, row: Any) -> None:
        self.worker.carry_out(row)

    def process(self, job_id: str) -> None:
        self.worker.process(job_id)

    def start(self) -> None:
        self.worker.start()

    def working(self) -> bool:
        return self.worker.working()

    def idle(self) -> bool:
        return self.worker.idle()

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self.worker.wait_idle(timeout)

    def stop(self) -> None:
        self.worker.stop()
