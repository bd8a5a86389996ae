"""The audit record (docs/audit.md): every retrieval, on every face, and the administrative actions, in the state
database (SQLite, or a fleet's PostgreSQL), each entry chained to the one before by its hash, so an edited, removed or
reordered entry is found (``verify``) and said where.

An entry is ``{seq, at, tenant, action, face, who, subject, detail}``; its ``hash`` is SHA-256 over the hash of the entry
before and the entry's canonical JSON. Entries are appended inside a state transaction, which every process takes in
turn (SQLite's write lock, PostgreSQL's advisory lock): one chain, in order, across a fleet. The face and the caller of
a request are set by the face that serves it (``acting``) and read where the entry is written (the verbs), so no verb
needs them as parameters.

A tenant's retention (``auditRetentionDays``) empties its expired entries in place: an emptied entry keeps its seq,
time, tenant and links (``previous``, ``hash``), so the chain still verifies through it, and ``verify`` checks that a
pruning the chain records covers it. Leading emptied entries are then removed, a checkpoint keeping where the chain
went on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import POSTGRESQL, StateDatabase

log = logging.getLogger(__name__)

CHAIN = "audit"  # the lock a fleet's appends take on PostgreSQL (not the write lock: a retrieval never waits on an ingestion)
GENESIS = "0" * 64  # the hash before the first entry
FACES = ("rest", "manager", "mcp", "hook", "langgraph", "langchain", "cli", "python")
QUERY_KEPT = ("full", "digest", "none")  # how a retrieval's query is kept (a tenant's auditQueries; default full)
SETTINGS_SECONDS = 10.0  # how long a process keeps a tenant's settings before reading them again (another's change)


def defaults() -> dict[str, Any]:
    """The server's audit settings, a tenant's unless it sets its own: ``EDDI_RAG_AUDIT_RETENTION_DAYS`` (365) and
    ``EDDI_RAG_AUDIT_QUERIES`` (full)."""
    queries, days = os.environ.get("EDDI_RAG_AUDIT_QUERIES", "full"), os.environ.get("EDDI_RAG_AUDIT_RETENTION_DAYS", "365")
    if queries not in QUERY_KEPT:
        raise AuditSettingsError(f"EDDI_RAG_AUDIT_QUERIES={queries!r}: must be one of {', '.join(QUERY_KEPT)}")
    try:
        retention = float(days)
    except ValueError:
        retention = -1.0
    if not retention >= 0:
        raise AuditSettingsError(f"EDDI_RAG_AUDIT_RETENTION_DAYS={days!r}: must be a number of days, 0 or more")
    return {"auditRetentionDays": retention, "auditQueries": queries}


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


class AuditSettingsError(EddiRagError, ValueError):
    """An audit setting out of its range (HTTP 400), named with its value."""
    status = 400


# PostgreSQL's append (AuditLog._appended): parameters genesis, the canonical JSON before and after the number, the
# entry's columns, its tenant again and its documents
APPEND = """WITH last AS (SELECT seq, hash FROM audit_entries ORDER BY seq DESC LIMIT 1),
  mark AS (SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1),
  base AS (SELECT COALESCE((SELECT seq FROM last), (SELECT seq FROM mark), 0) + 1 AS seq,
                  COALESCE((SELECT hash FROM last), (SELECT hash FROM mark), ?) AS previous, ?::text AS head, ?::text AS tail),
  made AS (INSERT INTO audit_entries (seq, at, tenant, action, face, who, subject, detail, previous, hash, erasable, who_user, reader)
           SELECT seq, ?, ?, ?, ?, ?, ?, ?, previous,
                  encode(sha256(convert_to(previous || E'\\n' || head || seq::text || tail, 'UTF8')), 'hex'), ?, ?, ? FROM base
           RETURNING seq),
  given AS (INSERT INTO audit_documents SELECT ?, document, made.seq FROM made, unnest(?::text[]) AS document)
SELECT seq FROM made"""


def unwritten(what: str, error: Exception) -> None:
    """An entry that could not be written: refused (``AuditWriteError``) unless ``EDDI_RAG_AUDIT_FAIL=open``, which
    logs it and lets the caller go on."""
    if os.environ.get("EDDI_RAG_AUDIT_FAIL", "closed") == "open":
        log.error("audit entry of %s not written (EDDI_RAG_AUDIT_FAIL=open): %s", what, error)
        return
    raise AuditWriteError(f"{what}: the audit record could not be written, so nothing is served "
                          f"(EDDI_RAG_AUDIT_FAIL=closed): {type(error).__name__}") from error


def _canonical(entry: dict[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _hash(previous: str, entry: dict[str, Any]) -> str:
    return hashlib.sha256(f"{previous}\n{_canonical(entry)}".encode()).hexdigest()


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class AuditLog:
    def __init__(self, db: StateDatabase):
        self.db = db
        self.defaults = defaults()  # (a wrong variable is said at start, not at the first retrieval)
        self._settings: dict[str, tuple[float, dict[str, Any]]] = {}
        state.migrate(db)

    def settings(self, tenant: str) -> dict[str, Any]:
        """The tenant's own settings (``None``: the server's default) and what is in effect (``effective``)."""
        cached = self._settings.get(tenant)
        if cached is not None and time.monotonic() - cached[0] < SETTINGS_SECONDS:
            return cached[1]
        rows = self.db.query("SELECT retention_days, queries FROM audit_settings WHERE tenant=?", (tenant,))
        own = {"auditRetentionDays": rows[0]["retention_days"] if rows else None, "auditQueries": rows[0]["queries"] if rows else None}
        found = {**own, "effective": {k: self.defaults[k] if v is None else v for k, v in own.items()}}
        self._settings[tenant] = (time.monotonic(), found)
        return found

    def set_settings(self, tenant: str, retention_days: float | None, queries: str | None) -> dict[str, Any]:
        """Set the tenant's settings (``None``: the server's default again); the change is an entry."""
        if queries is not None and queries not in QUERY_KEPT:
            raise AuditSettingsError(f"auditQueries={queries!r}: must be one of {', '.join(QUERY_KEPT)}")
        if retention_days is not None and not 1 <= retention_days <= 36_500:
            raise AuditSettingsError(f"auditRetentionDays={retention_days!r}: must be from 1 to 36500 days")
        before = self.settings(tenant)
        self.db.execute("INSERT INTO audit_settings VALUES (?,?,?) ON CONFLICT (tenant) DO UPDATE SET "
                        "retention_days=excluded.retention_days, queries=excluded.queries", (tenant, retention_days, queries))
        self._settings.pop(tenant, None)
        after = self.settings(tenant)
        self.append(tenant, "audit.settings", None, {"before": {k: before[k] for k in self.defaults},
                                                     "after": {k: after[k] for k in self.defaults}})
        return after

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
        documents = sorted({str(d.get("document")) for d in detail.get("documents", [])})
        if self.db.dialect == POSTGRESQL and not self.db.in_transaction():
            return self._shown(self._appended(entry, erasable=_canonical(kept) if kept else None, documents=documents), kept)
        with self.db.transaction(lock=CHAIN) as c:
            last = c.execute("SELECT seq, hash FROM audit_entries ORDER BY seq DESC LIMIT 1").fetchone()
            if last is None:
                last = c.execute("SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1").fetchone()
            seq, previous = (last[0] + 1, last[1]) if last else (1, GENESIS)
            entry = {"seq": seq, **entry}
            c.execute("INSERT INTO audit_entries (seq, at, tenant, action, face, who, subject, detail, previous, hash, erasable, "
                      "who_user, reader) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                      (seq, entry["at"], tenant, action, entry["face"], _canonical(entry["who"]), subject,
                       _canonical(entry["detail"]), previous, _hash(previous, entry), _canonical(kept) if kept else None,
                       entry["who"].get("user"), detail.get("reader")))
            if documents:
                c.executemany("INSERT INTO audit_documents VALUES (?,?,?)", [(tenant, document, seq) for document in documents])
        return self._shown(entry, kept)

    def _appended(self, entry: dict[str, Any], erasable: str | None, documents: list[str]) -> dict[str, Any]:
        """PostgreSQL's append in one statement, one round trip: the last entry (or checkpoint) read, the entry's hash
        made by the database (SHA-256 over the same bytes ``_hash`` reads: the canonical JSON with the number spliced in
        where its sorted keys put it), the entry and its documents inserted. Two processes that take the same number
        at once: one is refused by the key and tries again on the new end of the chain. Returns the entry."""
        import psycopg

        def part(keys: tuple[str, ...]) -> str:
            return ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_canonical(entry[k])}" for k in keys)
        before, after = "{" + part(("action", "at", "detail", "face")) + ',"seq":', "," + part(("subject", "tenant", "who")) + "}"
        for attempt in range(50):
            try:
                seq = self.db.query(APPEND, (GENESIS, before, after, entry["at"], entry["tenant"], entry["action"], entry["face"],
                                             _canonical(entry["who"]), entry["subject"], _canonical(entry["detail"]), erasable,
                                             entry["who"].get("user"), entry["detail"].get("reader"), entry["tenant"], documents))[0][0]
                return {"seq": seq, **entry}
            except psycopg.errors.UniqueViolation:
                if attempt == 49:
                    raise
                time.sleep(0.001 * attempt)
        raise AssertionError("unreachable")

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
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self.db.transaction(lock=CHAIN) as c:
            erased = c.execute("UPDATE audit_entries SET erasable=? WHERE tenant=? AND erasable IS NOT NULL AND erasable NOT LIKE '{\"erasedOn\"%' AND "
                               "(who_user=? OR reader=?)", (_canonical({"erasedOn": now}), tenant, user, user)).rowcount
        self.append(tenant, "audit.erased", f"user:{user}", {"entries": erased})
        return erased

    def prune(self, before: str, tenant: str | None = None) -> int:
        """Remove the entries written before ``before`` (an ISO time); returns how many went. The whole chain's (the
        operator's ``eddi-rag audit prune``): they are deleted and a checkpoint keeps where the chain went on. One
        tenant's (its retention): each is emptied in place, keeping its links, so the other tenants' entries after it
        still verify; the pruning is an entry naming the tenant and the time, which ``verify`` checks an emptied entry
        against."""
        with self.db.transaction(lock=CHAIN) as c:
            if tenant is None:
                last = c.execute("SELECT seq, hash FROM audit_entries WHERE at < ? ORDER BY seq DESC LIMIT 1", (before,)).fetchone()
                if last is None:
                    return 0
                gone = c.execute("DELETE FROM audit_entries WHERE seq <= ?", (last[0],)).rowcount
                c.execute("DELETE FROM audit_documents WHERE seq <= ?", (last[0],))
                c.execute("INSERT INTO audit_checkpoints (seq, hash, at) VALUES (?,?,?)", (last[0], last[1], before))
                detail = {"entries": gone, "through": last[0], "before": before}
            else:
                pruned = datetime.now(timezone.utc).isoformat(timespec="microseconds")
                c.execute("DELETE FROM audit_documents WHERE tenant=? AND seq IN (SELECT seq FROM audit_entries WHERE "
                          "tenant=? AND at < ? AND pruned IS NULL)", (tenant, tenant, before))
                gone = c.execute("UPDATE audit_entries SET who='{}', detail='{}', subject=NULL, erasable=NULL, who_user=NULL, "
                                 "reader=NULL, pruned=? WHERE tenant=? AND at < ? AND pruned IS NULL",
                                 (pruned, tenant, before)).rowcount
                if not gone:
                    return 0
                self._compact(c)
                detail = {"entries": gone, "tenant": tenant, "before": before}
        self.append(tenant or "default", "audit.pruned", None, detail)
        return gone

    @staticmethod
    def _compact(c: Any) -> None:
        """The emptied entries at the chain's start removed (those before its first live one, or all when none is live),
        a checkpoint keeping the last one's hash."""
        first = c.execute("SELECT MIN(seq) FROM audit_entries WHERE pruned IS NULL").fetchone()[0]
        before_first = "" if first is None else " AND seq < ?"
        last = c.execute(f"SELECT seq, hash, at FROM audit_entries WHERE pruned IS NOT NULL{before_first} ORDER BY seq DESC LIMIT 1",
                         () if first is None else (first,)).fetchone()
        if last is not None:
            c.execute("DELETE FROM audit_entries WHERE seq <= ?", (last[0],))
            c.execute("INSERT INTO audit_checkpoints (seq, hash, at) VALUES (?,?,?)", (last[0], last[1], last[2]))

    def retain(self, now: datetime | None = None) -> dict[str, int]:
        """Each tenant's retention applied (``auditRetentionDays``, else the server's): {tenant: entries emptied}."""
        now = now or datetime.now(timezone.utc)
        out = {}
        for row in self.db.query("SELECT DISTINCT tenant FROM audit_entries WHERE pruned IS NULL"):
            days = self.settings(row["tenant"])["effective"]["auditRetentionDays"]
            if days and (gone := self.prune((now - timedelta(days=days)).isoformat(timespec="microseconds"), row["tenant"])):
                out[row["tenant"]] = gone
        return out

    def entries(self, tenant: str | None = None, action: str | None = None, face: str | None = None,
                user: str | None = None, subject: str | None = None, document: str | None = None,
                since: str | None = None, until: str | None = None, limit: int = 100, after: int = 0) -> list[dict[str, Any]]:
        """Entries in order (``after``: past this seq), filtered: ``user`` the caller or a retrieval's reader,
        ``document`` retrievals that gave it. Emptied entries are not among them."""
        where, args = ["seq > ?", "pruned IS NULL"], list[Any]([after])
        for column, value in (("tenant", tenant), ("action", action), ("face", face), ("subject", subject)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if user is not None:
            where.append("(who_user = ? OR reader = ?)")
            args += [user, user]
        if document is not None:
            where.append("seq IN (SELECT seq FROM audit_documents WHERE document = ?" + (" AND tenant = ?)" if tenant else ")"))
            args += [document, tenant] if tenant else [document]
        if since is not None:
            where.append("at >= ?")
            args.append(since)
        if until is not None:
            where.append("at < ?")
            args.append(until)
        rows = self.db.query(f"SELECT * FROM audit_entries WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?", (*args, limit))
        return [self._entry(r) for r in rows]

    def verify(self) -> dict[str, Any]:
        """Walk the chain: ``{ok, entries, problems: [{seq, problem}]}`` naming each entry edited (its hash does not
        match what it holds), removed (a gap in the sequence), moved (it does not follow the entry before it) or emptied
        without a pruning of its tenant that covers it."""
        problems: list[dict[str, Any]] = []
        checkpoint = self.db.query("SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1")
        previous, expected = (checkpoint[0]["hash"], checkpoint[0]["seq"] + 1) if checkpoint else (GENESIS, 1)
        count, emptied, pruned_before = 0, [], dict[str, str]()
        for r in self.db.query("SELECT * FROM audit_entries ORDER BY seq"):
            count += 1
            seq = r["seq"]
            if seq != expected:
                problems.append({"seq": seq, "problem": f"entries {expected}–{seq - 1} are missing (removed)"})
            elif r["previous"] != previous:
                problems.append({"seq": seq, "problem": "it does not follow the entry before it (moved, or the one before "
                                                        "was replaced)"})
            if r["pruned"] is not None:
                emptied.append(r)
            elif _hash(r["previous"], self._chained(r)) != r["hash"]:
                problems.append({"seq": seq, "problem": "its content does not match its hash (edited)"})
            elif r["action"] == "audit.pruned" and (d := json.loads(r["detail"])).get("tenant") is not None:
                pruned_before[d["tenant"]] = max(pruned_before.get(d["tenant"], ""), d["before"])
            previous, expected = r["hash"], seq + 1
        for r in emptied:
            if not r["at"] < pruned_before.get(r["tenant"], ""):
                problems.append({"seq": r["seq"], "problem": "it was emptied, but no pruning of its tenant covers it"})
        problems.sort(key=lambda p: p["seq"])
        return {"ok": not problems, "entries": count, "problems": problems}
