"""A source's runs and who holds them: one run (or purge, or file delete) per source at a time, across the
processes sharing the state (a fleet's machines too). A run is held under a lease its process renews
(``state.fleet.Leases``, the one mechanism ingestion jobs use too); a run whose process died (its lease ran
out, or it was a process of this machine that is gone) is marked FAILED by the next one that looks.

Runs answer EDDI's IngestionRun (``runId, sourceId, status: RUNNING|COMPLETED|FAILED|CANCELLED, startedAt,
finishedAt, documentsSeen, documentsIngested, documentsUnchanged, documentsFailed, documentsTombstoned,
segmentsStored, costUsd, error``) and ours beside it (``added, updated, unchanged, deleted, failed,
failures: [{document, name, reason}], embedded, stopReason``, and ``outcome``: COMPLETED_WITH_FAILURES for a
completed run with failures), newest first."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from eddi_rag.errors import EddiRagError
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import StateDatabase

RUNNING, COMPLETED, FAILED, CANCELLED = "RUNNING", "COMPLETED", "FAILED", "CANCELLED"
COMPLETED_WITH_FAILURES = "COMPLETED_WITH_FAILURES"  # an outcome (``Run.outcome``), never a status
PURGE = "purge"  # the claim a purge or a file delete takes; not listed among the runs
PERMISSIONS = "permissions"  # a permission sync: who may read each document, as the source says now
MAX_RUNS_LISTED = 200  # a longer history is asked for in vain: it reads as this many


class SourceBusyError(EddiRagError, RuntimeError):
    """A run of this source is under way, or the source is disabled (HTTP 409, EDDI's ``{error, sourceId}``)."""
    status = 409

    def __init__(self, message: str, source_id: str):
        super().__init__(message)
        self.source_id = source_id

    def body(self) -> dict[str, Any]:
        return {**super().body(), "sourceId": self.source_id}


@dataclass
class Run:
    runId: str
    status: str
    startedAt: str
    finishedAt: str | None = None
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    kind: str = "run"
    embedded: int = 0  # chunks sent to the embedding model (unchanged text reuses its vectors)
    seen: int = 0  # documents the listing found
    segments: int = 0  # chunks the ingested documents have
    stopReason: str | None = None  # the limit that stopped it
    costUsd: float | None = None
    sourceId: str | None = None
    message: str | None = None  # what the listing said beside its counts (EDDI's report field)
    fix: str | None = None  # a failed run's: what fixes what ended it, when its error says (errors.EddiRagError.fix)
    warnings: list[dict[str, str]] = field(default_factory=list)  # {document, name, warning}: ingested, but check it
    failing: list[dict[str, str]] | None = None  # as it ended: every document of the source whose ingestion fails now
    # (this run's and earlier ones' not read again since), {documentId, name, reason}; not kept in the history

    @property
    def outcome(self) -> str:
        """Its status, with COMPLETED_WITH_FAILURES for a completed run after which documents fail (EDDI's ``status``
        says COMPLETED: an EDDI client reads what it knows)."""
        if self.status == COMPLETED and (self.failed or self.failing):
            return COMPLETED_WITH_FAILURES
        return self.status

    def to_json(self) -> dict[str, Any]:
        ours = {k: v for k, v in asdict(self).items() if v is not None}
        return {**ours, "outcome": self.outcome, "documentsSeen": self.seen, "documentsIngested": self.added + self.updated,
                "documentsUnchanged": self.unchanged, "documentsFailed": self.failed,
                "documentsTombstoned": self.deleted, "segmentsStored": self.segments}


class SourceRuns:
    def __init__(self, db: StateDatabase, redact: Any = lambda s: s):
        self.db = db
        self.leases = fleet.Leases("source-runs", self._renew, redact=redact)

    def _renew(self, run_id: str, until: str) -> bool:
        return bool(self.db.execute("UPDATE source_runs SET lease_until=? WHERE run_id=? AND status=?",
                                    (until, run_id, RUNNING)).rowcount)

    def _interrupted(self, row: Any) -> bool:
        """Whether a RUNNING run's process ended before it finished: its lease ran out or its owner is known to
        have ended (a run of this process it is not carrying out, e.g. one of an earlier process that had the
        same pid, too); a run written before leases: its process is gone."""
        if row["run_id"] in self.leases:
            return False
        if row["owner"] == self.leases.owner:  # ours, and we do not carry it out
            return True
        if row["owner"]:
            return fleet.expired(row["owner"], row["lease_until"])
        return row["pid"] == os.getpid() or not fleet.alive(row["pid"])

    @staticmethod
    def _fail_interrupted(conn: Any, row: Any) -> None:
        conn.execute("UPDATE source_runs SET status=?, finished_at=?, error=? WHERE run_id=? AND status=?",
                     (FAILED, fleet.now(), f"interrupted: its process ({row['owner'] or row['pid']}) ended before it finished",
                      row["run_id"], RUNNING))

    def begin(self, kb_id: str, source_id: str, kind: str) -> Run:
        """A run (or ``PURGE`` claim) of the source, held by this process; SourceBusyError (409) while another holds it."""
        run = Run(secrets.token_hex(12), RUNNING, fleet.now(), kind=kind, sourceId=source_id)
        try:
            self._claim(kb_id, source_id, kind, run)
        except BaseException:
            self.leases.release(run.runId)
            raise
        return run

    def _claim(self, kb_id: str, source_id: str, kind: str, run: Run) -> None:
        with self.db.transaction() as conn:
            for row in conn.execute("SELECT run_id, pid, kind, owner, lease_until FROM source_runs "
                                    "WHERE kb_id=? AND source_id=? AND status=?",
                                    (kb_id, source_id, RUNNING)).fetchall():
                if not self._interrupted(row):
                    what = "a purge or a file delete is under way" if row["kind"] == PURGE \
                        else f"it is already running (run {row['run_id']})"
                    raise SourceBusyError(f"source {source_id!r} of knowledge base {kb_id!r}: {what}; "
                                          f"one run per source at a time", source_id)
                self._fail_interrupted(conn, row)
            conn.execute("INSERT INTO source_runs (run_id, kb_id, source_id, kind, status, started_at, pid, owner, lease_until) "
                         "VALUES (?,?,?,?,?,?,?,?,?)", (run.runId, kb_id, source_id, kind, RUNNING, run.startedAt, os.getpid(),
                                                        self.leases.owner, self.leases.until()))
            self.leases.hold(run.runId)  # (before the commit: no run of this process reads it as one it left)

    def end_claim(self, run: Run) -> None:
        """A purge's or a file delete's claim ends without a trace in the run history."""
        self.db.execute("DELETE FROM source_runs WHERE run_id=?", (run.runId,))
        self.leases.release(run.runId)

    def progress(self, run: Run) -> None:
        """Keep a RUNNING run's counts so far (a face follows it: seen, added, updated, unchanged, deleted, failed)."""
        self.db.execute("UPDATE source_runs SET added=?, updated=?, unchanged=?, deleted=?, failed=?, embedded=?, seen=?, "
                        "segments=? WHERE run_id=? AND status=?", (run.added, run.updated, run.unchanged, run.deleted,
                                                                    run.failed, run.embedded, run.seen, run.segments,
                                                                    run.runId, RUNNING))

    def finish(self, run: Run) -> None:
        """Keep the run's outcome, unless a shutdown cancelled it meanwhile (that is what it reads)."""
        if run.runId not in self.leases:
            return
        self.db.execute(
            "UPDATE source_runs SET status=?, finished_at=?, added=?, updated=?, unchanged=?, deleted=?, failed=?, "
            "failures=?, error=?, embedded=?, seen=?, segments=?, stop_reason=?, cost=?, message=?, fix=? WHERE run_id=?",
            (run.status, run.finishedAt, run.added, run.updated, run.unchanged, run.deleted, run.failed,
             json.dumps(run.failures), run.error, run.embedded, run.seen, run.segments, run.stopReason, run.costUsd,
             run.message, run.fix, run.runId))
        self.leases.release(run.runId)

    def embedded_this_month(self, kb_id: str, source_id: str, but: str | None = None) -> int:
        """Chunks the source's runs (``but`` this one) embedded since the start of the calendar month (UTC)."""
        month = datetime.now(timezone.utc).strftime("%Y-%m-01T00:00:00")
        rows = self.db.query("SELECT COALESCE(SUM(embedded), 0) AS n FROM source_runs WHERE kb_id=? AND source_id=? AND "
                             "started_at >= ? AND run_id <> ?", (kb_id, source_id, month, but or ""))
        return int(rows[0]["n"])

    def last_started(self, kb_id: str, source_id: str, kind: str) -> str | None:
        """When the source's newest run of ``kind`` started (None: never)."""
        rows = self.db.query("SELECT MAX(started_at) AS at FROM source_runs WHERE kb_id=? AND source_id=? AND kind=?",
                             (kb_id, source_id, kind))
        return rows[0]["at"] if rows else None

    def history(self, kb_id: str, source_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """The source's runs, newest first: ``limit`` of them, at most MAX_RUNS_LISTED; a run whose process died
        reads as what it is."""
        limit = max(1, min(limit, MAX_RUNS_LISTED))
        query = ("SELECT * FROM source_runs WHERE kb_id=? AND source_id=? AND kind<>? ORDER BY started_at DESC LIMIT ?",
                 (kb_id, source_id, PURGE, limit))
        rows = self.db.query(*query)
        stale = [r for r in rows if r["status"] == RUNNING and self._interrupted(r)]
        if stale:
            with self.db.transaction() as conn:
                for r in stale:
                    self._fail_interrupted(conn, r)
            rows = self.db.query(*query)
        return [Run(r["run_id"], r["status"], r["started_at"], r["finished_at"], r["added"], r["updated"],
                    r["unchanged"], r["deleted"], r["failed"], json.loads(r["failures"] or "[]"), r["error"],
                    r["kind"], r["embedded"], r["seen"] or 0, r["segments"] or 0, r["stop_reason"], r["cost"],
                    source_id, r["message"], fix=r["fix"]).to_json() for r in rows]

    def close(self) -> None:
        """A graceful shutdown: runs this process is carrying out read CANCELLED (as EDDI's), not left to be reaped."""
        for run_id in self.leases.held():
            self.db.execute("UPDATE source_runs SET status=?, finished_at=?, error=? WHERE run_id=? AND status=?",
                            (CANCELLED, fleet.now(), "the server shut down during the run", run_id, RUNNING))
            self.leases.release(run_id)
        self.leases.ended()
