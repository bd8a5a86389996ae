"""A counter per knowledge base, bumped by every write (ingest, delete, purge, drop, a source's
removal): cached search results of an older generation are stale. Kept in the state database, so a
server's cache notices an ingest made by another process (the CLI, a fleet's worker)."""

from __future__ import annotations

from eddi_rag import state
from eddi_rag.state.sqlite import StateDatabase


class KbGenerations:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def get(self, kb_id: str) -> int:
        rows = self.db.query("SELECT n FROM kb_generations WHERE kb_id=?", (kb_id,))
        return rows[0]["n"] if rows else 0

    def bump(self, kb_id: str) -> None:
        self.db.execute("INSERT INTO kb_generations VALUES (?, 1) ON CONFLICT(kb_id) DO UPDATE SET n = kb_generations.n + 1", (kb_id,))
