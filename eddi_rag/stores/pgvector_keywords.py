"""A ``pgvector`` knowledge base's chunk texts under BM25 in each process that searches them (issue 46, point 1).

PostgreSQL's own full-text search ranks every row that matches any of a question's words (``ts_rank_cd`` has no
top-k pruning): 221 ms a query at 100,000 chunks, growing with the knowledge base. Instead each serving process keeps
the embedded store's tantivy index (``embedded.keywords``) of the table's texts in memory, built from PostgreSQL at
its first keyword search and kept current through a log PostgreSQL holds of what each write changed:

- every write transaction (upsert, replace, delete, drop) takes the table's next **generation** (a row in
  ``eddi_rag_keyword_generations``, locked until it commits, so generations commit in their order) and logs the chunk
  ids it wrote or removed under it (``eddi_rag_keyword_log``);
- before a keyword search a process reads the table's generation (one row by its key); when another process (or this
  one) wrote since, it reads the logged ids and those chunks' rows as they are now, and takes them out of its index and
  puts back the ones that still exist. A process further behind than the log keeps (``KEPT`` generations; the
  ``kept_from`` column), or facing a table dropped, builds its index again.

BM25 is then the embedded store's (a patched index, like the embedded store's after its own writes, counts the chunks
taken out in its statistics until tantivy merges their segments, as Lucene does), and a search costs the index's
milliseconds plus one query for the rows that pass the filter. Tables this product did not make (EDDI's, adopted in place) are written by EDDI without the
log: their keyword search stays PostgreSQL's."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql as pgsql

from eddi_rag.stores.embedded.keywords import KeywordIndex, Row

GENERATIONS, LOG = "eddi_rag_keyword_generations", "eddi_rag_keyword_log"
KEPT = 256  # write transactions the log keeps (a process further behind builds its index again)
REBUILD_SHARE = 0.25  # more changed chunks than this share of the table: built again rather than patched
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {GENERATIONS} (tbl TEXT PRIMARY KEY, generation BIGINT NOT NULL, kept_from BIGINT NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {LOG} (tbl TEXT NOT NULL, generation BIGINT NOT NULL, id TEXT NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS {LOG}_at ON {LOG} (tbl, generation)",
)
_SCHEMA_LOCK = 0x6564_6469_6B77  # the advisory lock processes creating the two tables at once take in turn


@dataclass
class _Cached:
    """A table's index in this process, shared by every store object on it."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    index: KeywordIndex | None = None
    generation: int = -1  # the generation the index holds


_CACHE: dict[tuple[str, str], _Cached] = {}
_CACHE_LOCK = threading.Lock()


def cached(database: str, table: str) -> _Cached:
    """The index of ``table`` in ``database`` (a connection string: same string, same entry) in this process."""
    with _CACHE_LOCK:
        return _CACHE.setdefault((database, table), _Cached())


def forget(database: str, table: str) -> None:
    """This process's index of a table dropped through it let go."""
    with _CACHE_LOCK:
        _CACHE.pop((database, table), None)


def _has_log(cur: psycopg.Cursor) -> bool:
    """Whether the database has the log (made at the first logged write)."""
    cur.execute(f"SELECT to_regclass('{LOG}') IS NOT NULL")
    return bool((row := cur.fetchone()) and row[0])


def log_writes(cur: psycopg.Cursor, table: str, ids: Sequence[str]) -> None:
    """Inside a write's transaction: the table's next generation, with ``ids`` (written or removed) under it."""
    if not _has_log(cur):
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for statement in _SCHEMA:
            cur.execute(statement)
    cur.execute(f"INSERT INTO {GENERATIONS} VALUES (%s, 1, 0) ON CONFLICT (tbl) DO UPDATE SET generation = "
                f"{GENERATIONS}.generation + 1 RETURNING generation, kept_from", (table,))
    generation, kept_from = cur.fetchone() or (1, 0)
    if ids:
        cur.execute(f"INSERT INTO {LOG} (tbl, generation, id) SELECT %s, %s, unnest(%s::text[])",
                    (table, generation, list(dict.fromkeys(ids))))
    if generation - kept_from > 2 * KEPT:  # (now and then: the log keeps the last KEPT generations)
        cur.execute(f"DELETE FROM {LOG} WHERE tbl = %s AND generation <= %s", (table, generation - KEPT))
        cur.execute(f"UPDATE {GENERATIONS} SET kept_from = %s WHERE tbl = %s", (generation - KEPT, table))


def log_drop(cur: psycopg.Cursor, table: str) -> None:
    """Inside a drop's transaction: every process builds its index again (a table made again under the same name
    must not be taken for the one a process holds)."""
    if _has_log(cur):
        cur.execute(f"DELETE FROM {LOG} WHERE tbl = %s", (table,))
        cur.execute(f"UPDATE {GENERATIONS} SET generation = generation + 1, kept_from = generation + 1 WHERE tbl = %s",
                    (table,))


def current(conn: psycopg.Connection, table: str, ident: pgsql.Composable, entry: _Cached) -> KeywordIndex:
    """The table's index as of its latest committed write (call with ``entry.lock`` held)."""
    generation, kept_from = _generation(conn, table)
    index = entry.index
    if index is not None and entry.generation == generation:
        return index
    if index is None or not kept_from <= entry.generation <= generation:
        return _build(conn, ident, entry, generation)
    ids = [r[0] for r in conn.execute(f"SELECT DISTINCT id FROM {LOG} WHERE tbl = %s AND generation > %s AND "
                                      "generation <= %s", (table, entry.generation, generation)).fetchall()]
    if len(ids) > max(1000, REBUILD_SHARE * index.searcher.num_docs):
        return _build(conn, ident, entry, generation)
    index.write(ids, _rows(conn, ident, "WHERE id = ANY(%s)", [ids]))
    entry.generation = generation
    return index


def _generation(conn: psycopg.Connection, table: str) -> tuple[int, int]:
    """(generation, kept_from) of the table: (0, 0) before its first logged write."""
    try:
        row = conn.execute(f"SELECT generation, kept_from FROM {GENERATIONS} WHERE tbl = %s", (table,)).fetchone()
    except psycopg.errors.UndefinedTable:  # nothing was ever logged in this database
        return 0, 0
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _build(conn: psycopg.Connection, ident: pgsql.Composable, entry: _Cached, generation: int) -> KeywordIndex:
    """The index made again from every row (read after the generation: a write between the two is read twice, never
    missed)."""
    entry.index = KeywordIndex(_rows(conn, ident, "", []))
    entry.generation = generation
    return entry.index


def _rows(conn: psycopg.Connection, ident: pgsql.Composable, where: str, params: list[Any]) -> list[Row]:
    """(id, text, acl strings, language) of the table's rows."""
    rows = conn.execute(pgsql.SQL("SELECT id, text, CASE jsonb_typeof(metadata -> 'acl') WHEN 'array' THEN "
                                  "metadata -> 'acl' END, CASE jsonb_typeof(metadata -> 'language') WHEN 'string' THEN "
                                  "metadata ->> 'language' END FROM {} " + where).format(ident), params).fetchall()
    return [(id, text, [e for e in acl if isinstance(e, str)] if acl else [], language) for id, text, acl, language in rows]
