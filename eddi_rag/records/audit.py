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
import secrets
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
               face: str | None = None, who: dict[str, Any] | None = None, erasable: dict[str, str] | None = None) -> dict[str, Any]:
        """Write one entry at the end of the chain (face and who: the request's, unless given); returns it. ``erasable``:
        texts (a query) the chain holds only as a salted digest, kept beside it until erased (``erase``)."""
        now = ACTING.get()
        detail, kept = dict(detail or {}), {}
        for name, text in (erasable or {}).items():
            salt = secrets.token_hex(16)
            detail[name] = {"digest": digest(salt + text)}
            kept[name], kept[f"{name}Salt"] = text, salt
        entry: dict[str, Any] = {"at": datetime.now(timezone.utc).isoformat(timespec="microseconds"), "tenant": tenant,
                                 "action": action, "face": face or now.face, "who": who if who is not None else now.who,
                                 "subject": subject, "detail": detail}
        with self.db.transaction() as c:
            last = c.execute("SELECT seq, hash FROM audit_entries ORDER BY seq DESC LIMIT 1").fetchone()
            if last is None:
                last = c.execute("SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1").fetchone()
            seq, previous = (last[0] + 1, last[1]) if last else (1, GENESIS)
            entry = {"seq": seq, **entry}
            c.execute("INSERT INTO audit_entries (seq, at, tenant, action, face, who, subject, detail, previous, hash, erasable) "
                      "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                      (seq, entry["at"], tenant, action, entry["face"], _canonical(entry["who"]), subject,
                       _canonical(entry["detail"]), previous, _hash(previous, entry), _canonical(kept) if kept else None))
        return self._shown(entry, kept)

    @staticmethod
    def _shown(entry: dict[str, Any], kept: dict[str, Any]) -> dict[str, Any]:
        """An entry as it is read: an erasable text in place of its digest, or ``None`` once erased."""
        detail = dict(entry["detail"])
        for name, value in list(detail.items()):
            if isinstance(value, dict) and set(value) == {"digest"} and (name in kept or "erasedOn" in kept):
                detail[name] = kept.get(name)
                if "erasedOn" in kept:
                    detail[f"{name}ErasedOn"] = kept["erasedOn"]
        return {**entry, "detail": detail}

    @staticmethod
    def _chained(r: Any) -> dict[str, Any]:
        return {"seq": r["seq"], "at": r["at"], "tenant": r["tenant"], "action": r["action"], "face": r["face"],
                "who": json.loads(r["who"]), "subject": r["subject"], "detail": json.loads(r["detail"])}

    def _entry(self, r: Any) -> dict[str, Any]:
        return self._shown(self._chained(r), json.loads(r["erasable"]) if r["erasable"] else {})

    def erase(self, tenant: str, user: str) -> int:
        """Erase the query texts of ``user``'s retrievals in ``tenant`` (GDPR Art. 17): each text and the salt of its
        digest go, the chained digest stays, so the chain still verifies and the digest says nothing. Returns how many."""
        erased, now = 0, datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self.db.transaction() as c:
            for r in c.execute("SELECT seq, who, detail FROM audit_entries WHERE tenant=? AND erasable IS NOT NULL", (tenant,)).fetchall():
                who, detail = json.loads(r[1]), json.loads(r[2])
                if who.get("user") == user or detail.get("reader") == user:
                    c.execute("UPDATE audit_entries SET erasable=? WHERE seq=?", (_canonical({"erasedOn": now}), r[0]))
                    erased += 1
        self.append(tenant, "audit.erased", f"user:{user}", {"entries": erased})
        return erased

    def prune(self, before: str) -> int:
        """Remove the entries written before ``before`` (an ISO time): a checkpoint keeps where the chain went on, so
        ``verify`` still holds from it. Returns how many went."""
        with self.db.transaction() as c:
            last = c.execute("SELECT seq, hash FROM audit_entries WHERE at < ? ORDER BY seq DESC LIMIT 1", (before,)).fetchone()
            if last is None:
                return 0
            gone = c.execute("DELETE FROM audit_entries WHERE seq <= ?", (last[0],)).rowcount
            c.execute("INSERT INTO audit_checkpoints (seq, hash, at) VALUES (?,?,?)", (last[0], last[1], before))
        self.append("default", "audit.pruned", None, {"entries": gone, "through": last[0], "before": before})
        return gone

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
        checkpoint = self.db.query("SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1")
        previous, expected = (checkpoint[0]["hash"], checkpoint[0]["seq"] + 1) if checkpoint else (GENESIS, 1)
        count = 0
        for r in self.db.query("SELECT * FROM audit_entries ORDER BY seq"):
            count += 1
            seq = r["seq"]
            if seq != expected:
                problems.append({"seq": seq, "problem": f"entries {expected}–{seq - 1} are missing (removed)"})
            elif r["previous"] != previous:
                problems.append({"seq": seq, "problem": "it does not follow the entry before it (moved, or the one before "
                                                        "was replaced)"})
            if _hash(r["previous"], self._chained(r)) != r["hash"]:
                problems.append({"seq": seq, "problem": "its content does not match its hash (edited)"})
            previous, expected = r["hash"], seq + 1
        return {"ok": not problems, "entries": count, "problems": problems}
