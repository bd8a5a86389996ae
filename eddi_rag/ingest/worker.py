"""The threads that run ingestion jobs in this process (EDDI_RAG_INGESTION_WORKERS, default 2): each takes a job
(``job_claims``), runs it with a ``JobProgress`` of its own (what the job's work reports, and whether it should stop),
and writes its outcome: completed (the document's file kept, earlier ones let go), failed with what fixes it,
cancelled, or given back (the worker stopping, the state database or the knowledge base's store away: not an
attempt; a store that is down is tried again after 5 s, doubling up to 5 minutes)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from eddi_rag.errors import DEPENDENCY, FILE
from eddi_rag.ingest.job_claims import JobClaims
from eddi_rag.ingest.job_states import CANCELLED, COMPLETED, MAX_ATTEMPTS, PENDING, REEMBED, UNAVAILABLE
from eddi_rag.ingest.kept_files import KeptFiles
from eddi_rag.ingest.parsing import ParseCancelledError
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import StateUnavailableError
from eddi_rag.stores.base import StoreUnavailableError

log = logging.getLogger(__name__)

RETRY_SECONDS = (5.0, 300.0)  # a job whose store is down is tried again after 5 s, doubling up to 5 min
IDLE_POLL_SECONDS = 1.0  # how often an idle worker looks for jobs other processes queued (its own wake it at once)


class _Cancelled(Exception):
    """Raised into a job's work when it should stop (cancelled, or the worker stopping)."""


class JobProgress:
    """One running job's ``ingest.progress.Progress``: what its work reports (pages or rows parsed, chunks embedded; what its author should check)
    and asks (should it stop?). The lease renewal keeps ``state`` where every replica reads it."""

    def __init__(self, job_id: str, stopping: threading.Event, acl: list[str] | None = None):
        self.job_id, self.acl = job_id, acl  # acl: who may read the document it writes (None: the ACL the document had)
        self.state: dict[str, Any] = {"phase": "parsing", "unit": None, "done": 0, "total": None}
        self.warnings: list[str] = []
        self.cancel_asked = False
        self._stopping = stopping

    def cancelled(self) -> bool:
        """Cancelled, or the worker is stopping (then the job waits for the next start)."""
        return self.cancel_asked or self._stopping.is_set()

    def parsed(self, unit: str, done: int) -> None:
        self.state = {"phase": "parsing", "unit": unit, "done": done, "total": None}

    def warn(self, text: str) -> None:
        """Something the job's author should check, kept with the job once it completes."""
        self.warnings.append(text)

    def embedded(self, done: int, total: int) -> None:
        if self.cancelled():
            raise _Cancelled()
        self.state = {"phase": "embedding", "unit": "chunks", "done": done, "total": total}


# run(kb_id, version, document id, name, body, format, progress) -> number of chunks written
Runner = Callable[[str, int, str, str, bytes, str, JobProgress], int]


class IngestionWorker:
    def __init__(self, claims: JobClaims, kept: KeptFiles, run: Runner, redact: Callable[[str], str], workers: int):
        self.claims, self.kept, self.run, self.redact, self.workers = claims, kept, run, redact, workers
        self.running: dict[str, JobProgress] = {}  # the jobs this process runs now
        self._waits: dict[str, int] = {}  # job -> times its store was found down in a row
        self.wake = threading.Event()  # a job was queued here: look now
        self._claiming = threading.Lock()  # held from a claim until its job is held (idle() waits for it)
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()  # stop(): the running job is put back for the next start

    def progress(self, job_id: str) -> dict[str, Any] | None:
        running = self.running.get(job_id)
        return running.state if running else None

    def cancel(self, job_id: str) -> None:
        """A job this process runs stops at its next step (a parse process is killed within POLL_SECONDS)."""
        if (running := self.running.get(job_id)) is not None:
            running.cancel_asked = True

    def claim(self, job_id: str | None = None) -> Any:
        return self.claims.claim(job_id)

    def process(self, job_id: str) -> None:
        """Run the job ``job_id`` now, if it waits (whoever held it)."""
        row = self.claims.claim(job_id)
        if row is not None:
            self.carry_out(row)

    def carry_out(self, r: Any) -> None:
        job_id = r["id"]
        try:
            if r["attempts"] > MAX_ATTEMPTS:  # it was started that often and never finished: it stops the process
                self.claims.finish(job_id, f"failed: gave up after {r['attempts'] - 1} attempts", failure=FILE)
                return
            self._run(r)
        finally:
            self.claims.leases.release(job_id)
            self.running.pop(job_id, None)

    def _run(self, r: Any) -> None:
        job_id = r["id"]
        progress = self.running[job_id] = JobProgress(job_id, self._stop, None if r["acl"] is None else json.loads(r["acl"]))
        outcome: Callable[[], Any]
        try:
            chunks = self.run(r["kb_id"], r["version"], r["document_id"] or r["document"], r["document"],
                              self.kept.body(job_id) or b"", r["format"] or "text", progress)
        except (_Cancelled, ParseCancelledError):
            if progress.cancel_asked:
                outcome = lambda: self.claims.finish(job_id, CANCELLED)  # noqa: E731
            else:  # the worker is stopping: released for the next one (not counted as an attempt)
                outcome = lambda: self.claims.give_back(job_id, PENDING)  # noqa: E731
        except StateUnavailableError as e:  # the state database went away meanwhile: not an attempt either
            log.warning("ingestion %s of %r waits for the state database: %s", job_id, r["document"], e)
            outcome = lambda: self.claims.give_back(job_id, PENDING)  # noqa: E731
        except StoreUnavailableError as e:  # not the document's fault: not an attempt either
            log.warning("ingestion %s of %r waits for its store: %s", job_id, r["document"], self.redact(str(e)))
            n = self._waits[job_id] = self._waits.get(job_id, 0) + 1
            after = min(RETRY_SECONDS[1], RETRY_SECONDS[0] * 2 ** (n - 1))
            outcome = lambda: self.claims.give_back(job_id, UNAVAILABLE, after)  # noqa: E731
        except Exception as e:  # noqa: BLE001 - any failure becomes the job's status
            message = self.redact(str(e))
            log.warning("ingestion %s of %r failed: %s", job_id, r["document"], message)
            failure = getattr(e, "failure", None) or DEPENDENCY
            outcome = lambda: self.claims.finish(job_id, f"failed: {message}", failure=failure)  # noqa: E731 - the body stays: it can be retried
        else:
            def outcome() -> None:
                # the document's file is kept with its latest ingestion (re-parse), earlier ones let go
                self.claims.finish(job_id, COMPLETED, chunks, clear_body=r["format"] == REEMBED, warnings=progress.warnings or None)
                self.kept.let_go(r["kb_id"], r["document_id"] or r["document"], keep=job_id)
                self._waits.pop(job_id, None)
        self._recorded(outcome)

    def _recorded(self, write: Callable[[], Any]) -> None:
        """Write a job's outcome, waiting while the state database is away (a restart); when the worker stops first,
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

    # -- the threads -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the threads (and the renewal of their leases); jobs a process of this machine left unfinished are
        due at once."""
        if self._threads:
            return
        self._stop.clear()
        self.claims.leases.working()
        self.claims.release_ended()
        self._threads = [threading.Thread(target=self._work, name=f"eddi-rag-ingestion-{i}", daemon=True)
                         for i in range(self.workers)]
        for thread in self._threads:
            thread.start()

    def working(self) -> bool:
        """Whether this worker's threads run."""
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def _work(self) -> None:
        while not self._stop.is_set():
            self.wake.clear()
            try:
                with self._claiming:
                    row = self.claims.claim()
            except Exception as e:  # noqa: BLE001 - the state database is out of reach: try again
                log.warning("ingestion worker cannot reach the state database: %s", self.redact(str(e)))
                row = None
            if row is not None:
                try:
                    self.carry_out(row)
                except Exception as e:  # noqa: BLE001 - the worker goes on; the job's lease runs out and it is taken again
                    log.warning("ingestion %s: %s", row["id"], self.redact(str(e)))
                self.wake.set()  # a job of the same document may wait for this one: the other workers look now
            else:
                self.wake.wait(IDLE_POLL_SECONDS)

    def idle(self) -> bool:
        """Nothing runs here and nothing waits that a worker could take now."""
        with self._claiming:
            if self.claims.leases.held():
                return False
        return not self.claims.due(fleet.now())

    def wait_idle(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.idle():
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        """Stop the threads; a job one is running stops at its next step and is given back (the next worker takes it)."""
        self._stop.set()
        self.wake.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads = []
        self.claims.leases.ended()
