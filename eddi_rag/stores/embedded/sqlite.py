"""``sqlite``: the persistent embedded store.

Chunks live in one table of the application's SQLite file (or of ``storeParameters.path``),
keyed by (configuration id, chunk id); vectors are float32 blobs. Search reads a KB's vectors
and metadata once into a RowTable (eddi_rag.stores.embedded.rows) shared by every store object of the
process; our writes update it in place (a write costs what it writes, and so does finding the
rows a ``replace`` removes), and so do another process's (seen through the KB's generation counter, bumped in
every write's transaction: the chunk ids each generation changed are logged, ``kb_chunk_log``, and a process
behind reads those rows again; one further behind than the log's ``LOGGED`` generations reads the KB again). With ``index: hnsw`` (or ``auto`` on a
large KB) the HNSW graph is saved beside the database file (``<file>.hnsw/``) when it is built
and when the application closes, and reused on the next start if the KB has not changed since.
Filters of ``get``/``count`` compile to SQL (JSON1). Keyword search is BM25 over a tantivy index of the KB's
texts, held and kept current beside the rows (``keywords``); the FTS5 index the store also keeps stays for
EDDI-era files and the ``sqlite-vec`` store, which share its recipe.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eddi_rag.state.sqlite import Database
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
from eddi_rag.stores.embedded.ann import Hnsw
from eddi_rag.stores.embedded.keywords import KeywordIndex, keyword_row
from eddi_rag.stores.embedded.memory import INDEX_PARAMETERS
from eddi_rag.stores.embedded.rows import RowTable
from eddi_rag.stores.toolkit import check_dimension, check_vectors, parameters_schema, query_vector


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

    if node.op in filters.CONTAINS:  # the list's strings, the values as a JSON array: any length
        sql = (f"COALESCE(({t} = 'array' AND EXISTS (SELECT 1 FROM json_each({column}, ?) AS e "
               "WHERE e.type = 'text' AND e.value IN (SELECT value FROM json_each(?)))), 0)")
        return (sql if node.op == "$containsAny" else f"NOT {sql}"), [path, path, json.dumps(list(node.value))]
    if node.op in ("$eq", "$ne"):
        sql, params = typed(node.value, "=")
        return (sql if node.op == "$eq" else f"NOT {sql}"), params
    if node.op in ("$in", "$nin"):  # one term per value type, the values as a JSON array: any length
        parts = [typed(v, "=") for v in sorted({v for v in node.value if isinstance(v, bool)})]
        for types, values in (("('integer','real')", [v for v in node.value if filters.value_kind(v) == "number"]),
                              ("('text')", [v for v in node.value if isinstance(v, str)])):
            if values:
                parts.append((f"COALESCE(({t} IN {types} AND {x} IN (SELECT value FROM json_each(?))), 0)",
                              [path, path, json.dumps(values)]))
        sql = "(" + (" OR ".join(p for p, _ in parts) or "0") + ")"
        return (sql if node.op == "$in" else f"NOT {sql}"), [x for _, ps in parts for x in ps]
    op = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[node.op]
    return typed(node.value, op)


_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS kb_chunks (
        kb TEXT NOT NULL, id TEXT NOT NULL, text TEXT NOT NULL, metadata TEXT NOT NULL,
        dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (kb, id))""",
    "CREATE TABLE IF NOT EXISTS kb_chunk_generations (kb TEXT PRIMARY KEY, generation INTEGER NOT NULL)",
    # the chunk ids each write changed, by generation: how another process catches up instead of reading the KB again
    "CREATE TABLE IF NOT EXISTS kb_chunk_log (kb TEXT NOT NULL, generation INTEGER NOT NULL, id TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS kb_chunk_log_generation ON kb_chunk_log (kb, generation)",
]
LOGGED = 256  # generations of the log kept: a process further behind reads the KB again


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


def keyword_query(table: str, kb_id: str, text: str, k: int, where: filters.Where) -> tuple[str, list[Any]] | None:
    """(SQL, parameters) ranking the KB's rows of ``table`` by FTS5 bm25() for any of the query's
    words, filtered by ``where``; None when there is nothing to search. Columns: id, text,
    metadata, rank (lower is better)."""
    terms = re.findall(r"\w+", text)
    if not terms or k <= 0:
        return None
    sql, params = to_sqlite(filters.node(where), column="c.metadata")
    fts = fts_name(table, kb_id)
    query = (f"SELECT c.id, c.text, c.metadata, bm25({fts}) AS rank FROM {fts} JOIN {table} c ON c.rowid = {fts}.rowid "
             f"WHERE {fts} MATCH ? AND c.kb = ? AND {sql} ORDER BY rank, c.id LIMIT ?")
    return query, [" OR ".join(f'"{t}"' for t in terms), kb_id, *params, k]


class _Cache:
    """A KB's rows as of ``generation``, shared by every store object on the same file and KB."""

    def __init__(self, index: str, ef_search: int | None):
        self.table = RowTable(index, ef_search)
        self.generation: int | None = None  # None: not loaded
        self.saved: int | None = None  # the generation whose graph is on disk
        self.keywords: KeywordIndex | None = None  # the texts under BM25, built at the first keyword search
        self.keywords_generation: int | None = None  # the generation they hold


class SqliteStore:
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, PERSISTENT, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({"path": {"type": "string", "description": "Own SQLite file instead of the shared one."},
                                  **INDEX_PARAMETERS})

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        if params.get("path"):
            dbs, path = context.state.setdefault("sqlite-files", {}), context.path(params["path"])
            if path not in dbs:
                dbs[path] = Database(path)
            self.db = dbs[path]
        else:
            self.db = context.db
        with self.db.transaction() as c:
            for statement in _SCHEMA:
                c.execute(statement)
            ensure_fts(c.execute, "kb_chunks", kb_id)
        caches = context.state.setdefault("sqlite-tables", {})
        key = (self.db.path, kb_id)
        if key not in caches:
            caches[key] = _Cache(params.get("index", "auto"), params.get("efSearch"))
            context.on_close(functools.partial(self._save_graph, caches[key]))
        self._cache: _Cache = caches[key]
        self._cache.table.index, self._cache.table.ef_search = params.get("index", "auto"), params.get("efSearch")

    # -- the in-memory copy ---------------------------------------------------------------
    def _generation(self, c) -> int:
        row = c.execute("SELECT generation FROM kb_chunk_generations WHERE kb=?", (self.kb_id,)).fetchone()
        return 0 if row is None else row[0]

    def _bump(self, c) -> int:
        """The KB's next generation, taken in the caller's write transaction."""
        c.execute("INSERT INTO kb_chunk_generations VALUES (?, 1) ON CONFLICT (kb) DO UPDATE SET generation = generation + 1",
                  (self.kb_id,))
        return self._generation(c)

    def _table(self, c) -> RowTable:
        """The KB's rows, brought up to date when another process wrote: the chunks it changed read again (the
        log), or the whole KB when this process is too far behind (call with the cache's lock held)."""
        cache = self._cache
        generation = self._generation(c)
        if cache.generation != generation and not self._caught_up(c, generation):
            self._load(c, generation)
        return cache.table

    def _caught_up(self, c, generation: int) -> bool:
        """Apply the writes of generations after this process's up to ``generation`` from the log: the changed
        chunks as they are now (later writes applied too are applied again at the next look). False: the log does
        not hold them all (too far behind, or dropped), or they are so many that reading the KB costs less."""
        cache, table, have = self._cache, self._cache.table, self._cache.generation
        if have is None or generation < have:
            return False
        logged = c.execute("SELECT generation, id FROM kb_chunk_log WHERE kb=? AND generation > ? AND generation <= ?",
                           (self.kb_id, have, generation)).fetchall()
        if len({r[0] for r in logged}) != generation - have:
            return False
        ids = list(dict.fromkeys(r[1] for r in logged))
        if len(ids) > max(1000, len(table) // 4):
            return False
        rows = c.execute("SELECT id, text, metadata, vector FROM kb_chunks WHERE kb=? AND id IN (SELECT value FROM json_each(?))",
                         (self.kb_id, json.dumps(ids))).fetchall()
        metadata = [json.loads(r[2]) for r in rows]
        table.remove([table.row_of[i] for i in ids if i in table.row_of])
        if rows:
            table.add([r[0] for r in rows], np.stack([np.frombuffer(r[3], dtype=np.float32) for r in rows]), metadata)
        if cache.keywords is not None and cache.keywords_generation == have:
            cache.keywords.write(ids, [keyword_row(r[0], r[1], m) for r, m in zip(rows, metadata)])
            cache.keywords_generation = generation
        cache.generation = generation
        return True

    def _graph_files(self) -> tuple[Path, Path] | None:
        if self.db.path == ":memory:":
            return None
        folder = Path(self.db.path + ".hnsw")
        name = hashlib.sha256(self.kb_id.encode()).hexdigest()[:16]
        return folder / f"{name}.faiss", folder / f"{name}.json"

    def _load(self, c, generation: int) -> None:
        cache, table = self._cache, self._cache.table
        rows = c.execute("SELECT id, metadata, vector, dim FROM kb_chunks WHERE kb=? ORDER BY id", (self.kb_id,)).fetchall()
        order: list[str | None] = [r[0] for r in rows]
        files, graph = self._graph_files(), None
        if files and files[1].exists() and table.index != "exact":
            try:
                saved = json.loads(files[1].read_text())
                if saved["generation"] == generation and sorted(i for i in saved["ids"] if i is not None) == order:
                    order, graph = saved["ids"], files[0]
            except (OSError, ValueError, KeyError):
                pass
        by_id = {r[0]: r for r in rows}
        dim = rows[0][3] if rows else 0
        matrix = np.zeros((len(order), dim), dtype=np.float32)
        metadata: list[dict[str, Any]] = []
        for i, id in enumerate(order):
            r = by_id.get(id)
            if r is None:
                metadata.append({})
            else:
                matrix[i] = np.frombuffer(r[2], dtype=np.float32)
                metadata.append(json.loads(r[1]))
        table.restore(order, matrix, metadata)
        if graph is not None:
            try:
                table.adopt(Hnsw.load(graph, table.ef_search))  # (it holds the vectors from now on)
            except (RuntimeError, ValueError):
                table.hnsw = None
        cache.generation, cache.saved = generation, (generation if table.hnsw is not None else None)
        cache.keywords = None  # (another process wrote: built again when next asked)

    def _save_graph(self, cache: _Cache) -> None:
        """Write the KB's HNSW graph and its row order beside the database file, unless it is on disk."""
        files = self._graph_files()
        with cache.table.lock:
            table = cache.table
            if files is None or table.hnsw is None or cache.generation is None or cache.saved == cache.generation:
                return
            table.graph()  # up to date with every row
            files[0].parent.mkdir(exist_ok=True)
            table.hnsw.save(files[0])
            tmp = files[1].with_name(files[1].name + ".tmp")
            tmp.write_text(json.dumps({"generation": cache.generation, "ids": table.ids}))
            tmp.replace(files[1])
            cache.saved = cache.generation

    # -- writes ---------------------------------------------------------------------------
    def _write(self, chunks: Sequence[Chunk], pick: Callable[[RowTable], list[int]] | None = None) -> int:
        """One transaction: delete the rows ``pick`` chooses, upsert ``chunks``; then the same
        in the in-memory copy. Returns how many rows were deleted."""
        matrix = check_vectors(chunks) if chunks else None
        cache = self._cache
        with cache.table.lock:
            with self.db.transaction() as c:
                table = self._table(c)
                if matrix is not None:
                    check_dimension(table.dim, matrix.shape[1], self.kb_id)
                rows = [] if pick is None else pick(table)
                gone = [table.ids[r] for r in rows]
                for start in range(0, len(gone), 500):
                    part = gone[start : start + 500]
                    c.execute(f"DELETE FROM kb_chunks WHERE kb=? AND id IN ({','.join('?' * len(part))})", [self.kb_id, *part])
                if matrix is not None:  # there are chunks
                    c.executemany(  # an upsert that fires the UPDATE trigger (REPLACE would skip the DELETE one)
                        "INSERT INTO kb_chunks VALUES (?,?,?,?,?,?) ON CONFLICT (kb, id) DO UPDATE SET "
                        "text = excluded.text, metadata = excluded.metadata, dim = excluded.dim, vector = excluded.vector",
                        [(self.kb_id, ch.id, ch.text, json.dumps(ch.metadata), matrix.shape[1], matrix[i].tobytes())
                         for i, ch in enumerate(chunks)],
                    )
                generation = self._generation(c)
                if rows or chunks:
                    generation = self._bump(c)
                    c.executemany("INSERT INTO kb_chunk_log VALUES (?, ?, ?)",
                                  [(self.kb_id, generation, id) for id in {*(i for i in gone if i is not None), *(ch.id for ch in chunks)}])
                    c.execute("DELETE FROM kb_chunk_log WHERE kb=? AND generation <= ?", (self.kb_id, generation - LOGGED))
            table.remove(rows)
            if matrix is not None:
                table.add([ch.id for ch in chunks], matrix, [ch.metadata for ch in chunks])
            if cache.keywords is not None and cache.keywords_generation == cache.generation:  # kept current
                cache.keywords.write([id for id in gone if id is not None],
                                     [keyword_row(ch.id, ch.text, ch.metadata) for ch in chunks])
                cache.keywords_generation = generation
            cache.generation = generation
        return len(rows)

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if chunks:
            self._write(chunks)

    def replace(self, where: filters.Where, chunks: Sequence[Chunk]) -> None:
        node = filters.node(where)
        self._write(chunks, lambda table: table.rows(node).tolist())

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        node = filters.node(where)
        if ids is None and node is None:
            return 0

        def pick(table: RowTable) -> list[int]:
            if ids is None:
                return table.rows(node).tolist()
            mask = table.select(node)
            return [table.row_of[i] for i in set(ids) if i in table.row_of and (mask is None or mask[table.row_of[i]])]

        return self._write([], pick)

    def drop(self) -> None:
        with self._cache.table.lock:
            with self.db.transaction() as c:  # (the generation goes on counting: a process behind reads the KB again)
                c.execute("DELETE FROM kb_chunks WHERE kb=?", (self.kb_id,))
                c.execute("DELETE FROM kb_chunk_log WHERE kb=?", (self.kb_id,))
                generation = self._bump(c)
            self._cache.table.clear()
            self._cache.generation = generation
            self._cache.keywords = None
            for path in self._graph_files() or ():
                path.unlink(missing_ok=True)

    # -- reads ----------------------------------------------------------------------------
    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        picks = self.nearest(vector, k, where)
        found = self.rows([id for id, _ in picks])
        return [SearchHit(id, *found[id], sim) for id, sim in picks if id in found]

    def nearest(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[tuple[str, float]]:
        """(id, cosine) of what ``search`` finds (RankedIds)."""
        node = filters.node(where)
        cache = self._cache
        with cache.table.lock:
            table = self._table(self.db)
            q = query_vector(vector, table.dim, k, self.kb_id)
            if q is None:
                return []
            built = table.hnsw is None and table.uses_hnsw()
            picks = [(table.id_of(r), sim) for r, sim in table.search(q, k, node)]
        if built and table.hnsw is not None:
            self._save_graph(cache)
        return picks

    def similarities(self, vector: Sequence[float], ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that exists to ``vector`` (Similarities)."""
        with self._cache.table.lock:
            table = self._table(self.db)
            q = query_vector(vector, table.dim, len(ids), self.kb_id)
            return {} if q is None else table.similarities(q, ids)

    def rows(self, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """(text, metadata) of each of ``ids`` that exists (RankedIds)."""
        if not ids:
            return {}
        rows = self.db.query(
            f"SELECT id, text, metadata FROM kb_chunks WHERE kb=? AND id IN ({','.join('?' * len(ids))})",
            [self.kb_id, *ids],
        )
        return {r["id"]: (r["text"], json.loads(r["metadata"])) for r in rows}

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]:
        """BM25 over the chunk texts (``keywords``: tantivy, each in its language), filtered by ``where``: the index names
        candidates best first, the in-memory rows say which pass (more are asked while fewer than ``k`` did)."""
        picked = self.keyword_ranked(text, k, where)
        found = self.rows([id for id, _ in picked])
        return [KeywordHit(id, *found[id], score) for id, score in picked if id in found]

    def keyword_ranked(self, text: str, k: int, where: filters.Where = None) -> list[tuple[str, float]]:
        """(id, score) of what ``keyword_search`` finds (RankedIds)."""
        node = filters.node(where)
        cache = self._cache
        if k <= 0:
            return []
        with cache.table.lock:
            table = self._table(self.db)
            allowed = table.select(node)
            return self._keywords(cache).best(text, k, node, allowed is not None, lambda ranked: [
                (id, score) for id, score in ranked if id in table.row_of and (allowed is None or allowed[table.row_of[id]])])

    def keyword_scores(self, text: str, ids: Sequence[str]) -> dict[str, float]:
        """The BM25 score ``keyword_search`` gives each of ``ids`` (KeywordScores)."""
        with self._cache.table.lock:
            self._table(self.db)
            return self._keywords(self._cache).scores(text, ids)

    def _keywords(self, cache: Any) -> KeywordIndex:
        """The knowledge base's keyword index, built again when another process wrote (under the table's lock)."""
        if cache.keywords is None or cache.keywords_generation != cache.generation:
            rows = self.db.query("SELECT id, text, CASE json_type(metadata, '$.acl') WHEN 'array' THEN json_extract(metadata, "
                                 "'$.acl') END AS acl, CASE json_type(metadata, '$.language') WHEN 'text' THEN "
                                 "json_extract(metadata, '$.language') END AS language FROM kb_chunks WHERE kb=?", (self.kb_id,))
            cache.keywords = KeywordIndex((r["id"], r["text"], [e for e in json.loads(r["acl"]) if isinstance(e, str)]
                                           if r["acl"] else [], r["language"]) for r in rows)
            cache.keywords_generation = cache.generation
        return cache.keywords

    def _warm_rows(self, node: filters.Node) -> np.ndarray | None:
        """The rows matching ``node``, from the in-memory copy when it is loaded and current
        (filter columns instead of JSON1 over every row); None when it is not."""
        with self._cache.table.lock:
            if self._cache.generation is None or self._cache.generation != self._generation(self.db):
                return None
            return self._cache.table.rows(node)

    def get(
        self, where: filters.Where = None, limit: int | None = None, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[Chunk]:
        node = filters.node(where)
        rows = None if node is None else self._warm_rows(node)
        if rows is not None:
            table = self._cache.table
            found = {table.id_of(r) for r in rows.tolist()}
            wanted = sorted(found if ids is None else found.intersection(ids))[offset : None if limit is None else offset + limit]
            sql, limit, offset = "1", None, 0
            params: list[Any] = []
            ids = wanted
        else:
            sql, params = to_sqlite(node)
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

    def count(self, where: filters.Where = None) -> int:
        node = filters.node(where)
        rows = None if node is None else self._warm_rows(node)
        if rows is not None:
            return len(rows)
        sql, params = to_sqlite(node)
        return self.db.query(f"SELECT COUNT(*) FROM kb_chunks WHERE kb=? AND {sql}", [self.kb_id, *params])[0][0]

    def health(self) -> StoreHealth:
        try:
            row = self.db.query(
                "SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(vector) + LENGTH(text) + LENGTH(metadata)), 0) AS bytes,"
                " MAX(dim) AS dim FROM kb_chunks WHERE kb=?",
                (self.kb_id,),
            )[0]
            with self._cache.table.lock:
                graph = self._cache.table.uses_hnsw() if self._cache.generation is not None else None
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {}}
        return {"status": "ok", "details": {"documents": row["n"], "dimension": row["dim"], "storage_bytes": row["bytes"], "path": self.db.path,
                                                 "index": {True: "hnsw", False: "exact", None: "not loaded"}[graph]}}
