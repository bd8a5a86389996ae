"""The audit record (docs/audit.md): every retrieval, on every face, and the administrative actions, in the state
database (SQLite, or a fleet's PostgreSQL), each entry chained to the one before by its hash, so an edited, removed or
reordered entry is found (``verify``) and said where.

An entry is ``{seq, at, tenant, action, face, who, subject, detail}``; its ``hash`` is SHA-256 over the hash of the entry
before and the entry's canonical JSON. Entries are appended inside a state transaction, which every process takes in
turn (SQLite's write lock, PostgreSQL's advisory lock): one chain, in order, across a fleet. The face and the caller of
a request are set by the face that serves it (``acting``) and read where the entry is written (the verbs), so no verb
needs them as parameters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

GENESIS = "0" * 64  # the hash before the first entry
FACES = ("rest", "manager", "mcp", "hook", "langgraph", "langchain", "cli", "python")
QUERY_KEPT = ("full", "digest", "none")  # how a retrieval's query is kept (a tenant's auditQueries; default full)


@dataclass
class Acting:
    """Who a request is served for, and through which face: set by the face, read where an entry is written."""
    face: str = "python"
    who: dict[str, Any] = field(default_factory=dict)  # {user, role, key, groups, actsFor}: never a secret
    about: dict[str, Any] = field(default_factory=dict)  # what a retrieval belongs to: {agent, conversation, task}


ACTING: ContextVar[Acting] = ContextVar("eddi_rag_acting", default=Acting())  # noqa: B039 - never mutated in place


@contextmanager
def acting(face: str, about: dict[str, Any] | None = None, **who: Any) -> Iterator[Acting]:
    """Entries written inside are of ``face`` and ``who`` (the faces' entry points); ``about``: what they belong to."""
    token = ACTING.set(Acting(face, {k: v for k, v in who.items() if v not in (None, (), [])},
                              {k: v for k, v in (about or {}).items() if v is not None}))
    try:
        yield ACTING.get()
    finally:
        ACTING.reset(token)


class AuditWriteError(EddiRagError, RuntimeError):
    """The audit record could not be written: the retrieval it was for is refused (fail closed, the default)."""
    status = 503


def _canonical(entry: dict[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _hash(previous: str, entry: dict[str, Any]) -> str:
    return hashlib.sha256(f"{previous}\n{_canonical(entry)}".encode()).hexdigest()


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class AuditLog:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def append(self, tenant: str, action: str, subject: str | None = None, detail: dict[str, Any] | None = None,
               face: str | None = None, who: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write one entry at the end of the chain (face and who: the request's, unless given); returns it."""
        now = ACTING.get()
        entry: dict[str, Any] = {"at": datetime.now(timezone.utc).isoformat(timespec="microseconds"), "tenant": tenant, "action": action,
                 "face": face or now.face, "who": who if who is not None else now.who, "subject": subject,
                 "detail": detail or {}}
        with self.db.transaction() as c:
            last = c.execute("SELECT seq, hash FROM audit_entries ORDER BY seq DESC LIMIT 1").fetchone()
            seq, previous = (last[0] + 1, last[1]) if last else (1, GENESIS)
            entry = {"seq": seq, **entry}
            c.execute("INSERT INTO audit_entries (seq, at, tenant, action, face, who, subject, detail, previous, hash) "
                      "VALUES (?,?,?,?,?,?,?,?,?,?)",
                      (seq, entry["at"], tenant, action, entry["face"], _canonical(entry["who"]), subject,
                       _canonical(entry["detail"]), previous, _hash(previous, entry)))
        return entry

    @staticmethod
    def _entry(r: Any) -> dict[str, Any]:
        return {"seq": r["seq"], "at": r["at"], "tenant": r["tenant"], "action": r["action"], "face": r["face"],
                "who": json.loads(r["who"]), "subject": r["subject"], "detail": json.loads(r["detail"])}

    def entries(self, tenant: str | None = None, action: str | None = None, face: str | None = None,
                user: str | None = None, subject: str | None = None, document: str | None = None,
                since: str | None = None, until: str | None = None, limit: int = 100, after: int = 0) -> list[dict[str, Any]]:
        """Entries in order (``after``: past this seq), filtered; ``document``: retrievals that gave it."""
        args: list[Any]
        where, args = ["seq > ?"], [after]
        for column, value in (("tenant", tenant), ("action", action), ("face", face), ("subject", subject)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if since is not None:
            where.append("at >= ?")
            args.append(since)
        if until is not None:
            where.append("at < ?")
            args.append(until)
        out = []
        for r in self.db.query(f"SELECT * FROM audit_entries WHERE {' AND '.join(where)} ORDER BY seq", tuple(args)):
            entry = self._entry(r)
            if user is not None and entry["who"].get("user") != user and entry["detail"].get("reader") != user:
                continue
            if document is not None and document not in {d.get("document") for d in entry["detail"].get("documents", [])}:
                continue
            out.append(entry)
            if len(out) >= limit:
                break
        return out

    def verify(self) -> dict[str, Any]:
        """Walk the chain: ``{ok, entries, problems: [{seq, problem}]}`` naming each entry edited (its hash does not
        match what it holds), removed (a gap in the sequence) or moved (it does not follow the entry before it)."""
        problems: list[dict[str, Any]] = []
        previous, expected, count = GENESIS, 1, 0
        for r in self.db.query("SELECT * FROM audit_entries ORDER BY seq"):
            count += 1
            seq = r["seq"]
            if seq != expected:
                problems.append({"seq": seq, "problem": f"entries {expected}–{seq - 1} are missing (removed)"})
            elif r["previous"] != previous:
                problems.append({"seq": seq, "problem": "it does not follow the entry before it (moved, or the one before "
                                                        "was replaced)"})
            entry = {**self._entry(r)}
            if _hash(r["previous"], entry) != r["hash"]:
                problems.append({"seq": seq, "problem": "its content does not match its hash (edited)"})
            previous, expected = r["hash"], seq + 1
        return {"ok": not problems, "entries": count, "problems": problems}
