"""Who runs which ingestion job, on the shared ``state.fleet.Leases``: a worker claims the oldest job it may take in
one statement (on PostgreSQL ``FOR UPDATE SKIP LOCKED``: two workers never take the same job), counting the attempt,
and holds it under a lease it renews; its outcome is written only while it still holds it (a job cancelled meanwhile
stays cancelled; one whose lease ran out and another worker took counts that worker's outcome); a job given back
(a stop, the state or the store away) is not counted as an attempt."""

from __future__ import annotations

import json
from typing import Any

from eddi_rag.ingest.job_states import CANCELLED, PENDING, PROCESSING, REEMBED, UNAVAILABLE, WAITING
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import POSTGRESQL, StateDatabase

_now = fleet.now
# a job a worker may take: waiting and due, or held under a lease that ran out
_DUE = "(status IN (?, ?) AND COALESCE(not_before, '') <= ?) OR (status=? AND COALESCE(lease_until, '') < ?)"
# a job ``j`` waits while another job runs (under a live lease) for its document, or either re-embeds their whole
# knowledge base: the jobs of one document end in the order they were queued, whichever worker takes them
_BUSY = ("SELECT 1 FROM ingestion_jobs o WHERE o.kb_id = j.kb_id AND o.id <> j.id AND o.status = ? AND o.lease_until >= ? "
         "AND (COALESCE(o.document_id, o.document) = COALESCE(j.document_id, j.document) OR o.format = ? OR j.format = ?)")


class JobClaims:
    def __init__(self, db: StateDatabase, leases: fleet.Leases):
        self.db, self.leases, self.owner = db, leases, leases.owner

    def claim(self, job_id: str | None = None) -> Any:
        """Take a job (``job_id``, if it is waiting; else the oldest this worker may take: pending and due, or
        processing under a lease that ran out) in one statement, counting the attempt; its row, or None."""
        now = _now()
        params: tuple[Any, ...]
        if job_id is not None:
            which, params = "id=? AND status IN (?, ?, ?)", (job_id, *WAITING)
        else:
            if not self.due(now):  # (a look that finds nothing writes nothing)
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

    def due(self, now: str) -> bool:
        """Whether a job waits that a worker may take now."""
        return bool(self.db.query(f"SELECT 1 FROM ingestion_jobs WHERE {_DUE} LIMIT 1", (PENDING, UNAVAILABLE, now, PROCESSING, now)))

    def finish(self, job_id: str, status: str, chunks: int | None = None, clear_body: bool = False,
               warnings: list[str] | None = None, failure: str | None = None) -> None:
        """A held job's outcome, unless it was cancelled meanwhile (cancelled stays cancelled) or another worker
        took it since (its lease ran out: that worker's outcome counts)."""
        with self.db.transaction() as c:
            written = c.execute(
                "UPDATE ingestion_jobs SET status=?, chunks=?, updated_on=?, owner=NULL, lease_until=NULL, progress=NULL, "
                "warnings=?, failure=? WHERE id=? AND status<>? AND owner=?",
                (status, chunks, _now(), json.dumps(warnings) if warnings else None, failure, job_id, CANCELLED, self.owner),
            ).rowcount
            if clear_body and written:
                c.execute("DELETE FROM ingestion_bodies WHERE id=?", (job_id,))

    def give_back(self, job_id: str, status: str, after: float = 0.0) -> None:
        """Give a job back (the attempt not counted): ``status`` again, due in ``after`` seconds."""
        self.db.execute("UPDATE ingestion_jobs SET status=?, attempts=attempts-1, owner=NULL, lease_until=NULL, progress=NULL, "
                        "not_before=?, updated_on=? WHERE id=? AND status=? AND owner=?",
                        (status, _now(after) if after else None, _now(), job_id, PROCESSING, self.owner))

    def renewed(self, job_id: str, until: str, progress: dict[str, Any] | None) -> bool:
        """The lease of a held job renewed, with its progress where every replica reads it; False: no longer ours."""
        return bool(self.db.execute("UPDATE ingestion_jobs SET lease_until=?, progress=? WHERE id=? AND owner=? AND status=?",
                                    (until, json.dumps(progress) if progress else None, job_id, self.owner,
                                     PROCESSING)).rowcount)

    def cancelled(self, job_id: str) -> bool:
        rows = self.db.query("SELECT status FROM ingestion_jobs WHERE id=?", (job_id,))
        return bool(rows) and rows[0]["status"] == CANCELLED

    def release_ended(self) -> int:
        """Make the jobs held by an ended process of this machine (or an ended queue of this one) due now,
        instead of when their leases run out; how many."""
        rows = self.db.query("SELECT id, owner FROM ingestion_jobs WHERE status=? AND owner IS NOT NULL", (PROCESSING,))
        ended = [r["id"] for r in rows if fleet.owner_ended(r["owner"])]
        for job_id in ended:
            self.db.execute("UPDATE ingestion_jobs SET lease_until=NULL WHERE id=? AND status=?", (job_id, PROCESSING))
        return len(ended)
