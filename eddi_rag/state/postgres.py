"""The state on PostgreSQL: what a fleet of ``serve`` and ``worker`` processes on several machines shares
(``EDDI_RAG_STATE_URL=postgresql://…``). The same interface as the embedded ``state.sqlite.Database`` and the same
SQL: ``?`` placeholders become psycopg's, ``LIKE`` becomes ``ILIKE`` (SQLite's LIKE ignores case), and the
schema's SQLite types their PostgreSQL peers. Parameters are bound on the client (``ClientCursor``), as
loosely typed as SQLite's.

Connections come from a pool (``psycopg_pool``). A transaction runs on one connection, which every
statement of its thread uses until it ends, and takes one advisory lock first: state transactions are
serialised across the fleet exactly as SQLite's ``BEGIN IMMEDIATE`` serialises them in one file, so
every check-then-write above keeps its meaning. Work that must not wait on that (claiming an ingestion
job: ``FOR UPDATE SKIP LOCKED``) is one statement outside a transaction.

A fleet-wide role (the scheduler) is a session advisory lock held on a connection of its own: a process
that dies loses its connection and with it the lock, and the next process to ask takes it.

While the database is away (restarting, down), every call fails within ``EDDI_RAG_STATE_TIMEOUT`` seconds
(default 5: waiting for a connection, or making one) with ``StateUnavailableError`` (HTTP 503), never a bare
driver error; a pooled connection is checked before it is lent, so the first call after the database is back
gets a working one."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import ClientCursor, sql
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg_pool import ConnectionPool, PoolTimeout

from eddi_rag.state.sqlite import POSTGRESQL, StateUnavailableError

log = logging.getLogger(__name__)

WRITE_LOCK = 0x0EDD1_5AFE  # the advisory lock every state transaction takes first
_DDL = re.compile(r"^\s*(CREATE\s+TABLE|ALTER\s+TABLE)", re.IGNORECASE)
_TYPES = ((re.compile(r"\bBLOB\b"), "BYTEA"), (re.compile(r"\bINTEGER\b"), "BIGINT"),
          (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"))
_LIKE = re.compile(r"\bLIKE\b")


def translate(statement: str, with_params: bool) -> str:
    """A statement of the state's SQL as PostgreSQL reads it."""
    if _DDL.match(statement):
        for pattern, pg_type in _TYPES:
            statement = pattern.sub(pg_type, statement)
    statement = _LIKE.sub("ILIKE", statement)
    if with_params:
        statement = statement.replace("%", "%%").replace("?", "%s")
    return statement


class Row(tuple):
    """A row read by name or by position, as ``sqlite3.Row``."""

    _index: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        return tuple.__getitem__(self, self._index[key] if isinstance(key, str) else key)

    def keys(self) -> list[str]:
        return list(self._index)


def _rows(cursor: Any):
    index = {c.name: i for i, c in enumerate(cursor.description or ())}

    def make(values: Any) -> Row:
        row = Row(values)
        row._index = index
        return row
    return make


class _IntegerBool(Dumper):
    """True/False as 1/0: the state keeps flags in integer columns, as SQLite does."""
    format = Format.TEXT
    oid = psycopg.adapters.types["int8"].oid

    def dump(self, obj: bool) -> bytes:
        return b"1" if obj else b"0"

    def quote(self, obj: bool) -> bytes:
        return self.dump(obj)


class Connection:
    """A pooled connection as the state's SQL uses it (``execute``, ``executemany`` with ``?``)."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn

    def execute(self, statement: str, params: Any = ()) -> Any:
        return self.conn.execute(translate(statement, bool(params)), tuple(params) if params else None)

    def columns(self, table: str) -> set[str]:
        rows = self.execute("SELECT column_name FROM information_schema.columns WHERE table_name=? "
                            "AND table_schema=current_schema()", (table,)).fetchall()
        return {r[0] for r in rows}

    def executemany(self, statement: str, rows: Any) -> None:
        rows = [tuple(r) for r in rows]
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(translate(statement, True), rows)


def _split(url: str) -> tuple[str, str | None]:
    """(the URL libpq reads, the ``schema`` it named): our ``?schema=`` keeps the state in a schema of its own."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    schema = next((v for k, v in query if k == "schema"), None)
    if schema is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
        raise ValueError(f"state URL: schema {schema!r} is not a plain SQL name")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(scheme="postgresql", query=rest)), schema


def redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@"))
    return urlunsplit(parts)


def state_timeout() -> float:
    """``EDDI_RAG_STATE_TIMEOUT``: seconds a call waits for the state database before it answers 503 (default 5)."""
    raw = os.environ.get("EDDI_RAG_STATE_TIMEOUT", "5")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"EDDI_RAG_STATE_TIMEOUT={raw!r}: give seconds, for example 5") from None
    if not 0.5 <= value <= 300:
        raise ValueError(f"EDDI_RAG_STATE_TIMEOUT={raw!r}: between 0.5 and 300 seconds")
    return value


# what a lost, refused or timed-out connection raises (an SQL error of the statement itself is not among them)
_AWAY = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)
AWAY_TIMEOUT = 0.5  # seconds a call waits for a connection while the database is known to be away


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"eddi-rag:{name}".encode()).digest()[:8], "big", signed=True)


class PostgresDatabase:
    def __init__(self, url: str, max_size: int = 10, timeout: float | None = None):
        self.dialect = POSTGRESQL
        self.path = redacted(url)  # what messages name
        self.conninfo, self.schema = _split(url)
        self.timeout = state_timeout() if timeout is None else timeout
        self.connect_timeout = max(1, round(self.timeout))
        self._away = False  # the last call found the database away: the next waits a moment only (AWAY_TIMEOUT)
        if self.schema:
            with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=self.connect_timeout) as c:
                try:
                    c.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
                except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
                    pass  # a process of the fleet starting at the same moment made it (IF NOT EXISTS races)
        # check: a connection the database dropped (a restart) is replaced before it is lent, not handed out broken;
        # reconnect_timeout: the pool's own reconnection (backing off 1, 2, 4, 8 … s) gives up within the timeout, so
        # the first call after the database is back connects at once instead of waiting out a long back-off
        self.pool = ConnectionPool(self.conninfo, min_size=1, max_size=max_size, open=True, configure=self._configure,
                                   kwargs={"autocommit": True, "cursor_factory": ClientCursor,
                                           "connect_timeout": self.connect_timeout},
                                   timeout=self.timeout, reconnect_timeout=self.timeout,
                                   check=ConnectionPool.check_connection, name="eddi-rag-state")
        self._local = threading.local()
        self._leaders: dict[str, psycopg.Connection] = {}
        self._leaders_lock = threading.Lock()
        self.migrated = False

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.row_factory = _rows
        conn.adapters.register_dumper(bool, _IntegerBool)
        if self.schema:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection; a lost, refused or timed-out one as StateUnavailableError (its detail logged, not
        shown: the database's address is the server's business). While the database is away, a call waits
        ``AWAY_TIMEOUT`` for a connection, not the whole timeout: the 503s of an outage come at once."""
        try:
            with self.pool.connection(timeout=AWAY_TIMEOUT if self._away else self.timeout) as conn:
                yield conn
            self._away = False
        except _AWAY as e:
            if not self._away:
                log.warning("state database out of reach: %s: %s", type(e).__name__, redacted(str(e)))
            self._away = True
            raise StateUnavailableError("the state database is out of reach (restarting or down); try again in a few "
                                        "seconds") from e

    @contextmanager
    def transaction(self, lock: str | None = None) -> Iterator[Connection]:
        """A transaction holding the fleet's write lock, or ``lock``'s alone (the audit record's chain: its appends wait
        for one another, not for an ingestion's writes); one of this thread that is open is joined, taking ``lock``
        too."""
        current = getattr(self._local, "conn", None)
        if current is not None:  # a transaction of this thread is open: the block joins it (as SQLite's do)
            if lock is not None:
                current.execute("SELECT pg_advisory_xact_lock(?)", (_lock_key(lock),))
            yield current
            return
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK if lock is None else _lock_key(lock),))
            self._local.conn = Connection(conn)
            try:
                yield self._local.conn
            finally:
                self._local.conn = None

    def in_transaction(self) -> bool:
        """Whether this thread has a transaction open (a statement now would join it)."""
        return getattr(self._local, "conn", None) is not None

    def execute(self, statement: str, params: Any = ()) -> Any:
        current = getattr(self._local, "conn", None)
        if current is not None:
            return current.execute(statement, params)
        with self._connection() as conn:
            return Connection(conn).execute(statement, params)

    def query(self, statement: str, params: Any = ()) -> list[Row]:
        return self.execute(statement, params).fetchall()

    # -- what the migrations and the fleet ask of every state database ----------------------------
    @staticmethod
    def schema_version(c: Connection) -> int:
        """(the table is state.VERSION_TABLE, made before this is asked)"""
        rows = c.execute("SELECT version FROM eddi_rag_schema").fetchall()
        return rows[0][0] if rows else 0

    @staticmethod
    def set_schema_version(c: Connection, version: int) -> None:
        c.execute("DELETE FROM eddi_rag_schema")
        c.execute("INSERT INTO eddi_rag_schema VALUES (?)", (version,))

    def leader(self, name: str) -> bool:
        """Whether this process holds the fleet-wide role ``name``: asked again on every tick, so a holder
        whose connection broke finds out, and a process takes the role once its holder is gone."""
        with self._leaders_lock:
            held = self._leaders.get(name)
            if held is not None:
                try:
                    held.execute("SELECT 1")
                    return True
                except psycopg.Error:
                    self._leaders.pop(name, None)
            try:
                conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=self.connect_timeout)
            except psycopg.Error:
                return False
            if conn.execute("SELECT pg_try_advisory_lock(%s)", (_lock_key(name),)).fetchone()[0]:  # type: ignore[index]
                self._leaders[name] = conn
                return True
            conn.close()
            return False

    def release(self, name: str) -> None:
        with self._leaders_lock:
            conn = self._leaders.pop(name, None)
        if conn is not None:
            conn.close()  # (the session's advisory locks go with it)

    def close(self) -> None:
        for name in list(self._leaders):
            self.release(name)
        self.pool.close()
