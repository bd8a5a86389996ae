"""The state database: one small interface (``transaction``, ``execute``, ``query``, ``close``) over SQLite
(the embedded default, this module) or PostgreSQL (``state.postgres``, a fleet's shared state); ``state.open_state``
picks one from a URL. The state's SQL is written once, with ``?`` placeholders, in the dialect both speak."""

from __future__ import annotations

import fcntl
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from eddi_rag.errors import EddiRagError

SQLITE, POSTGRESQL = "sqlite", "postgresql"


class StateUnavailableError(EddiRagError, RuntimeError):
    """The state database is out of reach (restarting, down, or slower than the state's timeout): HTTP 503 with
    Retry-After; an ingestion job that met it is given back, not failed (ingest.jobs)."""
    status = 503

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "2"}


BUSY_SECONDS = 30.0  # how long a statement waits for another process's write to end before it is a 503
RETRIES_AT_ONCE = 5  # BEGIN IMMEDIATE asked again after SQLite refused it at once (10 to 50 ms apart)


def _locked(e: sqlite3.OperationalError) -> bool:
    return "locked" in str(e) or "busy" in str(e)


class StateDatabase(Protocol):
    """What the state's components use of a database, whichever holds it."""
    dialect: str
    path: str
    migrated: bool

    def transaction(self, lock: str | None = None) -> AbstractContextManager[Any]: ...
    def in_transaction(self) -> bool: ...
    def execute(self, sql: str, params: Any = ()) -> Any: ...
    def query(self, sql: str, params: Any = ()) -> list[Any]: ...
    def schema_version(self, c: Any) -> int: ...
    def set_schema_version(self, c: Any, version: int) -> None: ...
    def leader(self, name: str) -> bool: ...
    def release(self, name: str) -> None: ...
    def close(self) -> None: ...


class Database:
    """A SQLite connection guarded by a lock, usable from several threads.

    ``transaction()`` runs a block atomically: it commits at the end or rolls back on error.
    WAL mode lets another process (the CLI beside a running server) read while we write.
    """

    def __init__(self, path: str | Path = ":memory:", busy_seconds: float = BUSY_SECONDS):
        """``busy_seconds``: how long a statement waits for another process's write (``serve --processes``, a worker
        beside a server) before it gives up with StateUnavailableError (503, Retry-After): nothing of it written."""
        self.path, self.busy_seconds = str(path), busy_seconds
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=busy_seconds)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._depth = 0
        self._roles: dict[str, Any] = {}  # role -> the open file holding its lock (leader)
        self.dialect = SQLITE
        self.migrated = False  # state.migrate brought its tables up to date

    def _at_once(self, started: float) -> bool:
        """Whether SQLite refused a statement begun at ``started`` without its busy wait (well inside the bound)."""
        return time.monotonic() - started < self.busy_seconds / 2

    def _busy(self, e: sqlite3.OperationalError, started: float) -> StateUnavailableError:
        if self._at_once(started):  # SQLite answered without waiting (a read of this connection was open)
            return StateUnavailableError(f"another process's write to the state database conflicted with this one "
                                         f"({e}, {getattr(e, 'sqlite_errorname', '')}); nothing of this request was "
                                         "written: try again")
        return StateUnavailableError(f"the state database stayed locked by another process's write for "
                                     f"{time.monotonic() - started:.0f} s ({e}); nothing of this request was written: "
                                     "try again")

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, waiting for another process's write up to ``busy_seconds`` (SQLite's busy handler). Under
        ``serve --processes`` SQLite sometimes answers SQLITE_BUSY or SQLITE_BUSY_SNAPSHOT at once, without its busy
        wait (measured: 4 in 2,600 uploads under 8 clients; each answered a 503 then): asked again, 10 to 50 ms apart,
        it succeeded every time."""
        started = time.monotonic()
        for attempt in range(RETRIES_AT_ONCE + 1):
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as e:
                if not (_locked(e) and self._at_once(started)) or attempt == RETRIES_AT_ONCE:
                    raise (self._busy(e, started) if _locked(e) else e) from e
                time.sleep(0.01 * (attempt + 1))

    def in_transaction(self) -> bool:
        """Whether a transaction is open (this connection's, whichever thread holds it)."""
        return self._depth > 0

    @contextmanager
    def transaction(self, lock: str | None = None) -> Iterator[sqlite3.Connection]:
        """(``lock``: PostgreSQL's narrower lock; a SQLite write takes the file's one lock whatever it is)"""
        with self._lock:
            outer, began = self._depth == 0, time.monotonic()
            if outer:
                self._begin()
            self._depth += 1
            try:
                yield self._conn
            except BaseException as e:
                self._depth -= 1
                if outer:
                    self._conn.execute("ROLLBACK")
                    if isinstance(e, sqlite3.OperationalError) and _locked(e):
                        raise self._busy(e, began) from e
                raise
            self._depth -= 1
            if outer:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.OperationalError as e:
                    self._conn.execute("ROLLBACK")
                    raise (self._busy(e, began) if _locked(e) else e) from e

    def execute(self, sql: str, params=()) -> sqlite3.Cursor:
        with self._lock:
            started = time.monotonic()
            try:
                return self._conn.execute(sql, params)
            except sqlite3.OperationalError as e:
                if _locked(e) and not self._conn.in_transaction:
                    raise self._busy(e, started) from e
                raise

    def query(self, sql: str, params=()) -> list[sqlite3.Row]:
        with self._lock:
            started = time.monotonic()
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as e:
                if _locked(e) and not self._conn.in_transaction:
                    raise self._busy(e, started) from e
                raise

    def data_version(self) -> int:
        """Changes whenever another connection commits to the file."""
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchone()[0]

    # -- what the migrations and the fleet ask of every state database ----------------------------
    @staticmethod
    def columns(c: sqlite3.Connection, table: str) -> set[str]:
        return {r["name"] for r in c.execute(f"PRAGMA table_info({table})").fetchall()}

    @staticmethod
    def schema_version(c: sqlite3.Connection) -> int:
        return c.execute("PRAGMA user_version").fetchone()[0]

    @staticmethod
    def set_schema_version(c: sqlite3.Connection, version: int) -> None:
        c.execute(f"PRAGMA user_version = {int(version)}")

    def leader(self, name: str) -> bool:
        """Whether this process holds the role ``name`` (the scheduler) among the processes serving this file
        (``serve --processes``): an exclusive lock on ``<file>.<name>.lock``, held until released or the process
        ends, asked again on every tick so another process takes the role once its holder is gone."""
        if self.path == ":memory:":
            return True
        with self._lock:
            if name in self._roles:
                return True
            handle = open(f"{self.path}.{name}.lock", "a")  # noqa: SIM115 - held while the role is
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                return False
            self._roles[name] = handle
            return True

    def release(self, name: str) -> None:
        with self._lock:
            handle = self._roles.pop(name, None)
        if handle is not None:
            handle.close()  # (the lock goes with it)

    def close(self) -> None:
        for name in list(self._roles):
            self.release(name)
        with self._lock:
            self._conn.close()
