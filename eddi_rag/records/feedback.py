"""Thumbs up / down on a cited source (the TypeSense integration spec's citation feedback): each
vote is stored with the question that found the source, so negative ones can be reviewed."""

from __future__ import annotations

import builtins
import csv
import io
import secrets
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from eddi_rag import state
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

Vote = Literal["up", "down"]


@dataclass
class Feedback:
    id: str
    kbId: str
    question: str
    chunkId: str
    vote: str
    source: str | None = None
    citation: str | None = None
    comment: str | None = None
    userId: str | None = None
    createdOn: str = ""
    reviewed: bool = False
    note: str | None = None
    reviewedOn: str | None = None


CSV_COLUMNS = ("createdOn", "vote", "question", "citation", "source", "chunkId", "kbId", "userId", "comment",
               "reviewed", "note", "reviewedOn")


class UnknownFeedbackError(EddiRagError, LookupError):
    status = 404


class FeedbackLog:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def record(self, tenant: str, kb_id: str, question: str, chunk_id: str, vote: Vote, source: str | None = None,
               citation: str | None = None, comment: str | None = None, user_id: str | None = None) -> Feedback:
        item = Feedback(secrets.token_hex(8), kb_id, question, chunk_id, vote, source, citation, comment, user_id,
                        datetime.now(timezone.utc).isoformat(timespec="seconds"))
        self.db.execute(
            "INSERT INTO citation_feedback (id, tenant, kb_id, question, chunk_id, source, citation, vote, comment, user_id, "
            "created_on) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (item.id, tenant, kb_id, question, chunk_id, source, citation, vote, comment, user_id, item.createdOn))
        return item

    def list(self, tenant: str, kb_id: str | None = None, vote: Vote | None = None, limit: int = 200,
             reviewed: bool | None = None) -> list[dict[str, Any]]:
        """Newest first (``reviewed``: only those marked so, or only those not)."""
        sql, args = "SELECT * FROM citation_feedback WHERE tenant=?", list[Any]([tenant])
        if kb_id:
            sql, args = sql + " AND kb_id=?", [*args, kb_id]
        if vote:
            sql, args = sql + " AND vote=?", [*args, vote]
        if reviewed is not None:
            sql, args = sql + " AND reviewed=?", [*args, int(reviewed)]
        rows = self.db.query(sql + " ORDER BY created_on DESC, id LIMIT ?", (*args, limit))
        return [asdict(self._of(r)) for r in rows]

    @staticmethod
    def _of(r: Any) -> Feedback:
        return Feedback(r["id"], r["kb_id"], r["question"], r["chunk_id"], r["vote"], r["source"], r["citation"],
                        r["comment"], r["user_id"], r["created_on"], bool(r["reviewed"]), r["note"], r["reviewed_on"])

    def review(self, tenant: str, id: str, reviewed: bool | None = None, note: str | None = None) -> dict[str, Any]:
        """Mark a vote reviewed (or not) and/or keep a note on it; 404 for another tenant's or an unknown one."""
        rows = self.db.query("SELECT * FROM citation_feedback WHERE tenant=? AND id=?", (tenant, id))
        if not rows:
            raise UnknownFeedbackError(f"no feedback {id!r}")
        item = self._of(rows[0])
        if reviewed is not None:
            item.reviewed = reviewed
            item.reviewedOn = datetime.now(timezone.utc).isoformat(timespec="seconds") if reviewed else None
        if note is not None:
            item.note = note or None
        self.db.execute("UPDATE citation_feedback SET reviewed=?, note=?, reviewed_on=? WHERE tenant=? AND id=?",
                        (int(item.reviewed), item.note, item.reviewedOn, tenant, id))
        return asdict(item)

    def csv(self, tenant: str, kb_id: str | None = None, vote: Vote | None = None,
            items: builtins.list[dict[str, Any]] | None = None) -> str:
        """The votes as CSV (``CSV_COLUMNS``), newest first, for a spreadsheet (``items``: these, already listed)."""
        out = io.StringIO()
        writer = csv.DictWriter(out, CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for item in self.list(tenant, kb_id, vote, limit=100_000) if items is None else items:
            writer.writerow({k: _cell(v) for k, v in item.items()})
        return out.getvalue()


def _cell(value: Any) -> Any:
    """A spreadsheet never runs what a cell holds: text starting with = + - @ is quoted with an apostrophe."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value
