"""``sqlite``: the persistent embedded store.

Chunks live in one table of the application's SQLite file (or of ``storeParameters.path``),
keyed by (configuration id, chunk id); vectors are float32 blobs. Search loads a KB's vectors
once into a contiguous matrix and keeps it until the KB changes (our writes, or another
process's, seen through ``PRAGMA data_version``). Filters compile to SQL (JSON1).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from eddi_rag.db import Database
from eddi_rag.stores import filters
from eddi_rag.stores.base import (
    COLLECTIONS,
    KEYWORD_SEARCH,
    METADATA_FILTERING,
    PERSISTENT,
    SEARCH,
    Chunk,
    KeywordHit,
    SearchHit,
    StoreContext,
    check_dimension,
    check_vectors,
    filtered_top_k,
    normalise,
    parameters_schema,
)
from eddi_rag.stores.masks import MetadataColumns


def to_sqlite(node: filters.Node | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """Compile to a SQLite boolean expression over a JSON text column."""
    if node is None:
        return "1", []
    if isinstance(node, (filters.And, filters.Or)):
        parts = [to_sqlite(n, column) for n in node.children]
        joiner = " AND " if isinstance(node, filters.And) else " OR "
        return "(" + joiner.join(p for p, _ in parts) + ")", [x for _, ps in parts for x in ps]
    path = f'$."{node.field}"'
    t = f"json_type({column}, ?)"
    x = f"json_extract({column}, ?)"

    def typed(value: Any, op: str) -> tuple[str, list[Any]]:
        if isinstance(value, bool):
            return f"COALESCE({t} = ?, 0)", [path, "true" if value else "false"]
        types = "('integer','real')" if isinstance(value, (int, float)) else "('text')"
        return f"COALESCE(({t} IN {types} AND {x} {op} ?), 0)", [path, path, value]

    if node.op in ("$eq", "$ne"):
        sql, params = typed(node.value, "=")
        return (sql if node.op == "$eq" else f"NOT {sql}"), params
    if node.op in ("$in", "$nin"):
        parts = [typed(v, "=") for v in node.value] or [("0", [])]
        sql = "(" + " OR ".join(p for p, _ in parts) + ")"
        return (sql if node.op == "$in" else f"NOT {sql}"), [x for _, ps in parts for x in ps]
    op = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[node.op]
    return typed(node.value, op)


_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS kb_chunks (
        kb TEXT NOT NULL, id TEXT NOT NULL, text TEXT NOT NULL, metadata TEXT NOT NULL,
        dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (kb, id))""",
]


def fts_name(table: str, kb_id: str) -> str:
    return f"{table}_fts_{hashlib.sha256(kb_id.encode()).hexdigest()[:16]}"


def ensure_fts(execute: Callable[..., Any], table: str, kb_id: str) -> None:
    """Give the KB its full-text index unless it has one; ``execute`` is a connection's (sqlite3
    or apsw), called inside the caller's transaction."""
    if not execute("SELECT 1 FROM sqlite_master WHERE name = ?", (fts_name(table, kb_id),)).fetchone():
        for statement, args in fts_setup(table, kb_id):
            execute(statement, args)


def fts_setup(table: str, kb_id: str) -> list[tuple[str, tuple[Any, ...]]]:
    """Statements giving one KB its own full-text index over ``table.text`` (so BM25 statistics
    are the KB's, not the file's), kept in step by triggers (SQLite's external-content FTS5
    recipe; Porter stemming); run them when ``fts_name`` does not exist yet. Dropping a KB deletes
    its rows (the triggers empty its index) and keeps the empty index, so every store object on
    the file stays consistent. Also removes the file-wide index older versions kept."""
    fts = fts_name(table, kb_id)
    kb = "'" + kb_id.replace("'", "''") + "'"
    legacy = f"{table}_fts"
    return [
        *[(f"DROP TRIGGER IF EXISTS {legacy}_{event}", ()) for event in ("insert", "delete", "update")],
        (f"DROP TABLE IF EXISTS {legacy}", ()),
        (f"CREATE VIRTUAL TABLE {fts} USING fts5(text, content='{table}', content_rowid='rowid', tokenize='porter unicode61')", ()),
        (f"""CREATE TRIGGER {fts}_i AFTER INSERT ON {table} WHEN new.kb = {kb} BEGIN
            INSERT INTO {fts}(rowid, text) VALUES (new.rowid, new.text); END""", ()),
        (f"""CREATE TRIGGER {fts}_d AFTER DELETE ON {table} WHEN old.kb = {kb} BEGIN
            INSERT INTO {fts}({fts}, rowid, text) VALUES ('delete', old.rowid, old.text); END""", ()),
        (f"""CREATE TRIGGER {fts}_u AFTER UPDATE ON {table} WHEN new.kb = {kb} BEGIN
            INSERT INTO {fts}({fts}, rowid, text) VALUES ('delete', old.rowid, old.text);
            INSERT INTO {fts}(rowid, text) VALUES (new.rowid, new.text); END""", ()),
        (f"INSERT INTO {fts}(rowid, text) SELECT rowid, text FROM {table} WHERE kb = ?", (kb_id,)),  # rows written before
    ]


def keyword_query(table: str, kb_id: str, text: str, k: int, where: dict[str, Any] | None) -> tuple[str, list[Any]] | None:
    """(SQL, parameters) ranking the KB's rows of ``table`` by FTS5 bm25() for any of the query's
    words, filtered by ``where``; None when there is nothing to search. Columns: id, text,
    metadata, rank (lower is better)."""
    terms = re.findall(r"\w+", text)
    if not terms or k <= 0:
        return None
    sql, params = to_sqlite(filters.parse(where), column="c.metadata")
    fts = fts_name(table, kb_id)
    query = (f"SELECT c.id, c.text, c.metadata, bm25({fts}) AS rank FROM {fts} JOIN {table} c ON c.rowid = {fts}.rowid "
             f"WHERE {fts} MATCH ? AND c.kb = ? AND {sql} ORDER BY rank, c.id LIMIT ?")
    return query, [" OR ".join(f'"{t}"' for t in terms), kb_id, *params, k]


class SqliteStore:
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, PERSISTENT, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({"path": {"type": "string", "description": "Own SQLite file instead of the shared one."}})

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        if params.get("path"):
            dbs = context.state.setdefault("sqlite-files", {})
            if str(params["path"]) not in dbs:
                dbs[str(params["path"])] = Database(params["path"])
            self.db = dbs[str(params["path"])]
        else:
            self.db = context.db
        with self.db.transaction() as c:
            for statement in _SCHEMA:
                c.execute(statement)
            ensure_fts(c.execute, "kb_chunks", kb_id)
        self._lock = threading.Lock()
        self._cache: tuple[tuple[int, int], list[str], np.ndarray] | None = None  # (stamp, ids, matrix)
        self._filter_columns: tuple[list[str], MetadataColumns] | None = None
        # Write counts shared by every store object on this file and KB, so an object built
        # after a cache eviction and the one it replaced never serve each other stale vectors.
        self._generations = context.state.setdefault("sqlite-generations", {})
        self._key = (self.db.path, kb_id)

    # -- writes ---------------------------------------------------------------------------
    def _dimension(self, c) -> int | None:
        row = c.execute("SELECT dim FROM kb_chunks WHERE kb=? LIMIT 1", (self.kb_id,)).fetchone()
        return None if row is None else row[0]

    def _insert(self, c, chunks: Sequence[Chunk], matrix: np.ndarray) -> None:
        check_dimension(self._dimension(c), matrix.shape[1], self.kb_id)
        c.executemany(  # an upsert that fires the UPDATE trigger (REPLACE would skip the DELETE one)
            "INSERT INTO kb_chunks VALUES (?,?,?,?,?,?) ON CONFLICT (kb, id) DO UPDATE SET "
            "text = excluded.text, metadata = excluded.metadata, dim = excluded.dim, vector = excluded.vector",
            [
                (self.kb_id, ch.id, ch.text, json.dumps(ch.metadata), matrix.shape[1], matrix[i].tobytes())
                for i, ch in enumerate(chunks)
            ],
        )

    def _changed(self) -> None:
        self._generations[self._key] = self._generations.get(self._key, 0) + 1
        self._cache = None

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        matrix = check_vectors(chunks)
        with self.db.transaction() as c:
            self._insert(c, chunks, matrix)
        self._changed()

    def replace(self, where: dict[str, Any], chunks: Sequence[Chunk]) -> None:
        sql, params = to_sqlite(filters.parse(where))
        matrix = check_vectors(chunks) if chunks else None
        with self.db.transaction() as c:
            c.execute(f"DELETE FROM kb_chunks WHERE kb=? AND {sql}", [self.kb_id, *params])
            if chunks:
                self._insert(c, chunks, matrix)
        self._changed()

    def delete(self, ids: Sequence[str] | None = None, where: dict[str, Any] | None = None) -> int:
        node = filters.parse(where)
        if ids is None and node is None:
            return 0
        sql, params = to_sqlite(node)
        removed = 0
        with self.db.transaction() as c:
            if ids is None:
                removed = c.execute(f"DELETE FROM kb_chunks WHERE kb=? AND {sql}", [self.kb_id, *params]).rowcount
            else:
                ids = list(ids)
                for start in range(0, len(ids), 500):
                    part = ids[start : start + 500]
                    removed += c.execute(
                        f"DELETE FROM kb_chunks WHERE kb=? AND {sql} AND id IN ({','.join('?' * len(part))})",
                        [self.kb_id, *params, *part],
                    ).rowcount
        self._changed()
        return removed

    def drop(self) -> None:
        with self.db.transaction() as c:
            c.execute("DELETE FROM kb_chunks WHERE kb=?", (self.kb_id,))
        self._changed()

    # -- reads ----------------------------------------------------------------------------
    def _matrix(self) -> tuple[list[str], np.ndarray | None]:
        stamp = (self.db.data_version(), self._generations.get(self._key, 0))
        cache = self._cache
        if cache is not None and cache[0] == stamp:
            return cache[1], cache[2]
        rows = self.db.query("SELECT id, vector, dim FROM kb_chunks WHERE kb=? ORDER BY id", (self.kb_id,))
        if not rows:
            return [], None
        ids = [r["id"] for r in rows]
        matrix = np.frombuffer(b"".join(r["vector"] for r in rows), dtype=np.float32).reshape(len(rows), rows[0]["dim"])
        self._cache = (stamp, ids, matrix)
        return ids, matrix

    def search(self, vector: Sequence[float], k: int, where: dict[str, Any] | None = None, text: str | None = None) -> list[SearchHit]:
        node = filters.parse(where)
        with self._lock:
            ids, matrix = self._matrix()
        if matrix is None:
            return []
        q = normalise(vector)[0]
        check_dimension(matrix.shape[1], q.shape[0], self.kb_id)
        rows = None if node is None else np.flatnonzero(self._columns(ids).mask(node))
        picks = filtered_top_k(matrix, q, ids, k, rows)
        found = self._load([ids[i] for i, _ in picks])
        return [SearchHit(ids[i], *found[ids[i]], sim) for i, sim in picks if ids[i] in found]

    def _columns(self, ids: list[str]) -> MetadataColumns:
        """Every chunk's metadata as filter columns, in the cached matrix's row order; rebuilt
        when the KB changes (a filtered search then costs vector operations, not SQL per row)."""
        with self._lock:
            if self._filter_columns is None or self._filter_columns[0] is not ids:  # keyed on the cached id list itself
                rows = self.db.query("SELECT id, metadata FROM kb_chunks WHERE kb=? ORDER BY id", (self.kb_id,))
                by_id = {r["id"]: json.loads(r["metadata"]) for r in rows}
                self._filter_columns = (ids, MetadataColumns([by_id.get(i, {}) for i in ids]))
            return self._filter_columns[1]

    def _load(self, ids: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        if not ids:
            return {}
        rows = self.db.query(
            f"SELECT id, text, metadata FROM kb_chunks WHERE kb=? AND id IN ({','.join('?' * len(ids))})",
            [self.kb_id, *ids],
        )
        return {r["id"]: (r["text"], json.loads(r["metadata"])) for r in rows}

    def keyword_search(self, text: str, k: int, where: dict[str, Any] | None = None) -> list[KeywordHit]:
        """SQLite FTS5 with its bm25() ranking (Porter stemming), filtered by ``where``."""
        planned = keyword_query("kb_chunks", self.kb_id, text, k, where)
        if planned is None:
            return []
        rows = self.db.query(*planned)
        return [KeywordHit(r["id"], r["text"], json.loads(r["metadata"]), -float(r["rank"])) for r in rows]

    def get(
        self, where: dict[str, Any] | None = None, limit: int | None = None, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[Chunk]:
        sql, params = to_sqlite(filters.parse(where))
        if ids is not None:
            # json_each keeps any number of ids in one parameter.
            sql += " AND id IN (SELECT value FROM json_each(?))"
            params = [*params, json.dumps(list(ids))]
        rows = self.db.query(
            f"SELECT id, text, metadata, vector FROM kb_chunks WHERE kb=? AND {sql} ORDER BY id LIMIT ? OFFSET ?",
            [self.kb_id, *params, -1 if limit is None else limit, offset],
        )
        return [
            Chunk(r["id"], r["text"], json.loads(r["metadata"]), np.frombuffer(r["vector"], dtype=np.float32).tolist())
            for r in rows
        ]

    def count(self, where: dict[str, Any] | None = None) -> int:
        sql, params = to_sqlite(filters.parse(where))
        return self.db.query(f"SELECT COUNT(*) FROM kb_chunks WHERE kb=? AND {sql}", [self.kb_id, *params])[0][0]

    def health(self) -> dict[str, Any]:
        try:
            row = self.db.query(
                "SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(vector) + LENGTH(text) + LENGTH(metadata)), 0) AS bytes,"
                " MAX(dim) AS dim FROM kb_chunks WHERE kb=?",
                (self.kb_id,),
            )[0]
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {}}
        return {"status": "ok", "details": {"documents": row["n"], "dimension": row["dim"], "storage_bytes": row["bytes"], "path": self.db.path}}
