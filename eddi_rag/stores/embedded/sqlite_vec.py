"""``sqlite-vec``: KNN inside SQLite with the sqlite-vec extension (a ``vec0`` table per KB), keyword search with FTS5.

Python's bundled sqlite3 here cannot load extensions, so this backend talks to SQLite through
``apsw``. Chunk text and metadata live in an ordinary table beside the vectors; filters compile
to SQL (the same JSON1 compiler as the ``sqlite`` backend) and run *inside* the KNN query as a
``rowid IN (...)`` pre-filter, so filtered searches still return k results.

storeParameters: ``path`` (database file; default the application's SQLite file).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import apsw
import numpy as np
import sqlite_vec

from eddi_rag.stores import filters
from eddi_rag.stores.base import (
    COLLECTIONS,
    KEYWORD_SEARCH,
    LIST_FILTERING,
    METADATA_FILTERING,
    PERSISTENT,
    SEARCH,
    Chunk,
    KeywordHit,
    SearchHit,
    StoreContext,
    StoreHealth,
)
from eddi_rag.stores.embedded.sqlite import ensure_fts, keyword_query, to_sqlite
from eddi_rag.stores.toolkit import check_dimension, check_vectors, engine_name, parameters_schema, query_vector

MAX_K = 4096  # sqlite-vec's limit on k
_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS vec_chunks (rowid INTEGER PRIMARY KEY, kb TEXT NOT NULL, id TEXT NOT NULL,
       text TEXT NOT NULL, metadata TEXT NOT NULL, UNIQUE (kb, id))""",
    "CREATE TABLE IF NOT EXISTS vec_kbs (kb TEXT PRIMARY KEY, tbl TEXT NOT NULL, dim INTEGER NOT NULL)",
]


def _connect(path: str) -> apsw.Connection:
    conn = apsw.Connection(path)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.set_busy_timeout(30_000)
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode=WAL")
    for statement in _SCHEMA:
        conn.execute(statement)
    return conn


class SqliteVecStore:
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, PERSISTENT, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({"path": {"type": "string", "description": "Database file (default: the application's)."}})

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        path = context.path(params["path"]) if params.get("path") else str(context.db.path)
        conns = context.state.setdefault("sqlite-vec", {})
        if path not in conns:  # one connection (and lock) per file, shared by every KB on it
            conns[path] = (_connect(path), threading.RLock())
        self.conn, self._lock = conns[path]
        self.table = engine_name(kb_id, "A-Za-z0-9_", prefix="vec_kb_")
        with self._lock, self.conn:
            ensure_fts(self.conn.execute, "vec_chunks", kb_id)

    def _dimension(self) -> int | None:
        row = self.conn.execute("SELECT dim FROM vec_kbs WHERE kb=?", (self.kb_id,)).fetchone()
        return None if row is None else row[0]

    # -- writes ---------------------------------------------------------------------------
    def _insert(self, chunks: Sequence[Chunk], matrix: np.ndarray) -> None:
        dim = self._dimension()
        check_dimension(dim, matrix.shape[1], self.kb_id)
        if dim is None:
            self.conn.execute(f'CREATE VIRTUAL TABLE IF NOT EXISTS "{self.table}" USING vec0('
                              f"embedding float[{matrix.shape[1]}] distance_metric=cosine)")
            self.conn.execute("INSERT INTO vec_kbs VALUES (?,?,?)", (self.kb_id, self.table, matrix.shape[1]))
        for i, c in enumerate(chunks):
            old = self.conn.execute("SELECT rowid FROM vec_chunks WHERE kb=? AND id=?", (self.kb_id, c.id)).fetchone()
            if old:
                self.conn.execute(f'DELETE FROM "{self.table}" WHERE rowid=?', (old[0],))
                self.conn.execute("DELETE FROM vec_chunks WHERE rowid=?", (old[0],))
            self.conn.execute("INSERT INTO vec_chunks (kb, id, text, metadata) VALUES (?,?,?,?)",
                              (self.kb_id, c.id, c.text, json.dumps(c.metadata)))
            rowid = self.conn.last_insert_rowid()
            self.conn.execute(f'INSERT INTO "{self.table}" (rowid, embedding) VALUES (?, ?)', (rowid, matrix[i].tobytes()))

    def _delete_where(self, sql: str, params: list[Any]) -> int:
        if self._dimension() is None:
            return 0
        rows = [r[0] for r in self.conn.execute(f"SELECT rowid FROM vec_chunks WHERE kb=? AND {sql}", [self.kb_id, *params])]
        for start in range(0, len(rows), 500):
            part = rows[start : start + 500]
            marks = ",".join("?" * len(part))
            self.conn.execute(f'DELETE FROM "{self.table}" WHERE rowid IN ({marks})', part)
            self.conn.execute(f"DELETE FROM vec_chunks WHERE rowid IN ({marks})", part)
        return len(rows)

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        matrix = check_vectors(chunks)
        with self._lock, self.conn:
            self._insert(chunks, matrix)

    def replace(self, where: filters.Where, chunks: Sequence[Chunk]) -> None:
        sql, params = to_sqlite(filters.node(where))
        matrix = check_vectors(chunks) if chunks else None
        with self._lock, self.conn:  # one transaction: all or nothing
            self._delete_where(sql, params)
            if matrix is not None:  # there are chunks
                self._insert(chunks, matrix)

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        node = filters.node(where)
        if ids is None and node is None:
            return 0
        sql, params = to_sqlite(node)
        if ids is not None:
            sql, params = f"{sql} AND id IN (SELECT value FROM json_each(?))", [*params, json.dumps(list(ids))]
        with self._lock, self.conn:
            return self._delete_where(sql, params)

    def drop(self) -> None:
        with self._lock, self.conn:
            self.conn.execute(f'DROP TABLE IF EXISTS "{self.table}"')
            self.conn.execute("DELETE FROM vec_chunks WHERE kb=?", (self.kb_id,))
            self.conn.execute("DELETE FROM vec_kbs WHERE kb=?", (self.kb_id,))

    # -- reads ----------------------------------------------------------------------------
    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        node = filters.node(where)
        with self._lock:
            dim = self._dimension()
            q = query_vector(vector, dim, k, self.kb_id)
            if q is None:
                return []
            fetch = min(MAX_K, k + 16)  # a few extra so ties at the cut are broken by id
            # The KNN runs alone (the KB has its own vec0 table); a filter becomes a rowid pre-filter.
            # Text and metadata are read afterwards for the rows found, not joined into the scan.
            knn = f'SELECT rowid, distance FROM "{self.table}" WHERE embedding MATCH ? AND k = ?'
            args: list[Any] = [q.tobytes(), fetch]
            if node is not None:
                sql, params = to_sqlite(node, column="metadata")
                knn += f" AND rowid IN (SELECT rowid FROM vec_chunks WHERE kb = ? AND {sql})"
                args += [self.kb_id, *params]
            found = self.conn.execute(knn, args).fetchall()
            if not found:
                return []
            distance = dict(found)
            rows = [(id, text, metadata, distance[rowid]) for rowid, id, text, metadata in self.conn.execute(
                f"SELECT rowid, id, text, metadata FROM vec_chunks WHERE rowid IN ({','.join('?' * len(found))})",
                list(distance))]
        hits = [SearchHit(r[0], r[1], json.loads(r[2]), 1.0 - float(r[3])) for r in rows]
        return sorted(hits, key=lambda h: (-h.similarity, h.id))[:k]

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]:
        """SQLite FTS5 bm25() over the chunk texts (the same index recipe as the ``sqlite`` store)."""
        planned = keyword_query("vec_chunks", self.kb_id, text, k, where)
        if planned is None:
            return []
        with self._lock:
            rows = self.conn.execute(*planned).fetchall()
        return [KeywordHit(r[0], r[1], json.loads(r[2]), -float(r[3])) for r in rows]

    def get(self, where: filters.Where = None, limit: int | None = None, offset: int = 0,
            ids: Sequence[str] | None = None) -> list[Chunk]:
        sql, params = to_sqlite(filters.node(where), column="c.metadata")
        if ids is not None:
            sql, params = f"{sql} AND c.id IN (SELECT value FROM json_each(?))", [*params, json.dumps(list(ids))]
        with self._lock:
            if self._dimension() is None:
                return []
            rows = self.conn.execute(
                f'SELECT c.id, c.text, c.metadata, v.embedding FROM vec_chunks c JOIN "{self.table}" v ON v.rowid = c.rowid '
                f"WHERE c.kb = ? AND {sql} ORDER BY c.id LIMIT ? OFFSET ?",
                [self.kb_id, *params, -1 if limit is None else limit, offset],
            ).fetchall()
        return [Chunk(r[0], r[1], json.loads(r[2]), np.frombuffer(r[3], dtype=np.float32).tolist()) for r in rows]

    def count(self, where: filters.Where = None) -> int:
        sql, params = to_sqlite(filters.node(where))
        with self._lock:
            return self.conn.execute(f"SELECT COUNT(*) FROM vec_chunks WHERE kb=? AND {sql}", [self.kb_id, *params]).fetchone()[0]

    def health(self) -> StoreHealth:
        try:
            with self._lock:
                version = self.conn.execute("SELECT vec_version()").fetchone()[0]
            return {"status": "ok", "details": {"documents": self.count(), "dimension": self._dimension(),
                                                "sqlite_vec": version, "table": self.table}}
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {}}
