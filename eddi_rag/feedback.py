"""Thumbs up / down on a cited source (the TypeSense integration spec's citation feedback): each
vote is stored with the question that found the source, so negative ones can be reviewed."""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from eddi_rag import state
from eddi_rag.db import Database

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


class FeedbackLog:
    def __init__(self, db: Database):
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

    def list(self, tenant: str, kb_id: str | None = None, vote: Vote | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Newest first."""
        sql, args = "SELECT * FROM citation_feedback WHERE tenant=?", [tenant]
        if kb_id:
            sql, args = sql + " AND kb_id=?", [*args, kb_id]
        if vote:
            sql, args = sql + " AND vote=?", [*args, vote]
        rows = self.db.query(sql + " ORDER BY created_on DESC, id LIMIT ?", (*args, limit))
        return [asdict(Feedback(r["id"], r["kb_id"], r["question"], r["chunk_id"], r["vote"], r["source"], r["citation"],
                                r["comment"], r["user_id"], r["created_on"])) for r in rows]
