"""``sqlite``: the persistent embedded store.

Chunks live in one table of the application's SQLite file (or of ``storeParameters.path``),
keyed by (configuration id, chunk id); vectors are float32 blobs. Search reads a KB's vectors
and metadata once into a RowTable (eddi_rag.stores.embedded.rows) shared by every store object of the
process; our writes update it in place (a write costs what it writes, and so does finding the
rows a ``replace`` removes), and so do another process's (seen through the KB's generation counter, bumped in
every write's transaction: the chunk ids each generation changed are logged, ``kb_chunk_log``, and a process
behind reads those rows again; one further behind than the log's ``LOGGED`` generations reads the KB again). With ``index: hnsw`` (or ``auto`` on a
large KB) the HNSW graph is saved beside the database file (``<file>.hnsw/``) as the KB's *base* when it is built, and
every process maps it (``Hnsw.load(mapped=True)``): the vectors are the file's pages, one copy in memory however many
processes serve. Rows written after a base are kept beside it (the table's delta) and the next start reads them
from the log; once they are ``REBASE_FROM`` rows a background thread merges them into a new base file (the old base
read into memory, those rows added, written under a new name and mapped in its place: a reader never waits on it,
a process still mapping the old file keeps its pages), one process at a time (a lock file), and another process
whose delta grows takes that newer base instead of saving its own.
Filters of ``get``/``count`` compile to SQL (JSON1). Keyword search is BM25 over a tantivy index of the KB's
texts (``keywords``), kept on disk beside the file (``<file>.keywords/``): one index every process maps, written by
each process's writes and brought up to date from the log by the others; the FTS5 index the store also keeps stays for
EDDI-era files and the ``sqlite-vec`` store, which share its recipe.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import logging
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
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
log = logging.getLogger(__name__)
LOGGED = 256  # generations of the log kept: a process further behind reads the KB again
REBASE_FROM = 2_000  # rows after a base from which a new one is saved (or one per 50 rows of the base, if more)
KEPT_BASES = 2  # base files kept on disk (a process starting reads the newest; one that just read the one before opens it)
_SAVER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eddi-rag-base")  # one base saved at a time


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


@contextmanager
def _locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold the lock file ``path`` (an advisory lock every process on the files respects); ``wait`` False: yields
    False at once when another holds it."""
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True  # (closing the file lets go)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_json(path: Path, value: Any) -> None:
    """Replace ``path`` whole (a file of its own first, renamed)."""
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(value))
    tmp.replace(path)


def _keyword_state(path: Path, generation: int, index: KeywordIndex) -> None:
    """What a keyword index on disk holds, beside it: the generation it is current with, its chunks' analyses."""
    _write_json(path, {"generation": generation, "analyses": sorted(index.analyses)})


class _Cache:
    """A KB's rows as of ``generation``, shared by every store object on the same file and KB."""

    def __init__(self, index: str, ef_search: int | None):
        self.table = RowTable(index, ef_search)
        self.generation: int | None = None  # None: not loaded
        self.saved: int | None = None  # the generation of the base file this process maps
        self.saving: Future | None = None  # a new base being saved in the background
        self.again = False  # a save was skipped (another process was saving): tried again at the next look
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
            context.on_close(functools.partial(self._close, caches[key]))
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
        """Apply the writes of generations after this process's up to ``generation`` from the log. False: the log does
        not hold them all (too far behind, or dropped), or they are so many that reading the KB costs less."""
        cache, have = self._cache, self._cache.generation
        if have is None or generation < have or (applied := self._apply_log(c, cache.table, have, generation)) is None:
            return False
        if self._keyword_files() is None and cache.keywords is not None and cache.keywords_generation == have:
            ids, rows, metadata = applied  # (an index on disk is brought up to date by its own log reading)
            cache.keywords.write(ids, [keyword_row(r[0], r[1], m) for r, m in zip(rows, metadata)])
            cache.keywords_generation = generation
        cache.generation = generation
        return True

    def _changes(self, c, have: int, generation: int, most: int) -> tuple[list[str], list[Any], list[dict]] | None:
        """The chunks the writes after generation ``have`` up to ``generation`` changed, by the log, as they are now:
        (their ids, the rows of those still there: id, text, metadata, vector, their metadata). None when the log
        does not hold them all or they are more than ``most``."""
        logged = c.execute("SELECT generation, id FROM kb_chunk_log WHERE kb=? AND generation > ? AND generation <= ?",
                           (self.kb_id, have, generation)).fetchall()
        if len({r[0] for r in logged}) != generation - have:
            return None
        ids = list(dict.fromkeys(r[1] for r in logged))
        if len(ids) > most:
            return None
        rows = c.execute("SELECT id, text, metadata, vector FROM kb_chunks WHERE kb=? AND id IN (SELECT value FROM json_each(?))",
                         (self.kb_id, json.dumps(ids))).fetchall()
        return ids, rows, [json.loads(r[2]) for r in rows]

    def _apply_log(self, c, table: RowTable, have: int, generation: int) -> tuple[list[str], list[Any], list[dict]] | None:
        """Bring ``table`` from generation ``have`` to ``generation`` by the log (a write applied twice is applied the
        same): ``_changes``, None when reading the KB costs less."""
        if (changes := self._changes(c, have, generation, max(1000, len(table) // 4))) is None:
            return None
        ids, rows, metadata = changes
        table.remove([table.row_of[i] for i in ids if i in table.row_of])
        if rows:
            table.add([r[0] for r in rows], np.stack([np.frombuffer(r[3], dtype=np.float32) for r in rows]), metadata)
        return ids, rows, metadata

    def _base_files(self) -> tuple[Path, str] | None:
        """(folder, name) of the KB's base files: ``<name>.json`` (generation, row order, graph file), the graphs
        ``<name>.<generation>.<token>.faiss``, ``<name>.lock``; None for a database in memory."""
        if self.db.path == ":memory:":
            return None
        return Path(self.db.path + ".hnsw"), hashlib.sha256(self.kb_id.encode()).hexdigest()[:16]

    def _saved_base(self) -> tuple[int, list[str | None], Path] | None:
        """(generation, row order, graph file) of the base on disk; None when there is none (or it cannot be read)."""
        if (files := self._base_files()) is None:
            return None
        folder, name = files
        saved = _read_json(folder / f"{name}.json")
        try:
            return int(saved["generation"]), list(saved["ids"]), folder / str(saved.get("file", f"{name}.faiss"))
        except (ValueError, KeyError, TypeError):
            return None

    def _fill(self, c, table: RowTable, generation: int) -> int | None:
        """Fill ``table`` with the KB as of ``generation``: the base on disk mapped and the chunks changed since read
        by the log, when it serves; else every row read from the database. Returns the base's generation (None: none
        was used)."""
        saved, graph = None if table.index == "exact" else self._saved_base(), None
        for _ in range(3):  # (the file is gone when another process saved two newer ones since the name was read)
            if saved is None or saved[0] > generation:
                break
            try:
                graph = Hnsw.load(saved[2], table.ef_search, mapped=True)
                break
            except (OSError, RuntimeError):
                saved = self._saved_base()
        if saved is not None and graph is not None:
            base_generation, order, _ = saved
            if graph.size == len(order):
                stored = dict(c.execute("SELECT id, metadata FROM kb_chunks WHERE kb=?", (self.kb_id,)).fetchall())
                table.restore(order, np.zeros((0, graph.index.d), dtype=np.float32),
                              [json.loads(stored[id]) if id in stored else {} for id in order], graph)
                if (self._apply_log(c, table, base_generation, generation) is not None and len(table) == len(stored)
                        and all(id in table.row_of for id in stored)):
                    return base_generation
        rows = c.execute("SELECT id, metadata, vector FROM kb_chunks WHERE kb=? ORDER BY id", (self.kb_id,)).fetchall()
        matrix = np.frombuffer(bytearray(b"".join(r[2] for r in rows)), dtype=np.float32).reshape(len(rows), -1) if rows else np.zeros((0, 0))
        table.restore([r[0] for r in rows], matrix, [json.loads(r[1]) for r in rows])
        return None

    def _load(self, c, generation: int) -> None:
        cache = self._cache
        cache.saved = self._fill(c, cache.table, generation)
        cache.generation = generation
        cache.keywords = None  # (another process wrote: built again when next asked)

    def _save_base(self, cache: _Cache, closing: bool = False) -> None:
        """``_save_base_now``; a failure (a full disk) is logged, and this process goes on with the graph it has."""
        try:
            self._save_base_now(cache, closing)
        except (OSError, RuntimeError, ValueError) as e:
            log.warning("knowledge base %s: its graph could not be saved beside %s (%s); searching the copy in memory",
                        self.kb_id, self.db.path, e)

    def _save_base_now(self, cache: _Cache, closing: bool = False) -> None:
        """Save the KB's graph over every row as a new base file, and map it here in place of this process's copy.
        A graph this process built is written as it is, under the table's lock; a mapped base and the rows after it
        are merged outside the lock (the base file read into memory, those rows added). One process saves at a time
        (``<name>.lock``; the others skip, and look again later); a process whose base is older than the one on disk
        (or who built its own graph meanwhile) takes that one instead, or, closing, leaves it (the next start reads it
        and the log)."""
        if (files := self._base_files()) is None:
            return
        folder, name = files
        folder.mkdir(exist_ok=True)
        cache.again = False
        with _locked(folder / f"{name}.lock", wait=closing) as held:
            if not held:
                cache.again = True  # another process is saving: its base is taken at the next look
                return
            saved, table = self._saved_base(), cache.table
            if saved is not None and saved[0] > (cache.saved if cache.saved is not None else -1):  # newer than this one's
                if closing or self._take_base(cache):
                    return
            with table.lock:
                if table.hnsw is None or cache.generation is None:
                    return
                epoch, generation, ids = table.epoch, cache.generation, list(table.ids)
                path = folder / f"{name}.{generation}.{uuid.uuid4().hex[:8]}.faiss"
                base, merged = table.hnsw.path, None
                if not table.hnsw.mapped:  # built here: written as it is
                    table.graph().save(path)
                elif table.delta_rows() or cache.saved != generation:
                    merged = table.delta()
                else:
                    return  # the base on disk holds every row
            if merged is not None:
                assert base is not None
                graph = Hnsw.load(base)
                graph.append(merged)
                graph.save(path)
                del graph
            _write_json(folder / f"{name}.json", {"generation": generation, "ids": ids, "file": path.name})
            for old in sorted(folder.glob(f"{name}.*faiss"), key=lambda f: f.stat().st_mtime)[:-KEPT_BASES]:
                old.unlink(missing_ok=True)
            mapped = Hnsw.load(path, table.ef_search, mapped=True)
            with table.lock:
                if table.rebase(mapped, epoch):
                    cache.saved = generation

    def _take_base(self, cache: _Cache) -> bool:
        """Read the KB afresh from the (newer) base on disk into a table of its own, then, under the table's lock,
        bring it up to the cache's generation and put it in the table's place (the database's reads run outside the
        table's lock: searches go on meanwhile). False when the base does not serve (the log does not reach it)."""
        generation = self._generation(self.db)
        fresh = RowTable(cache.table.index, cache.table.ef_search)
        if (base_generation := self._fill(self.db, fresh, generation)) is None:
            return False
        with cache.table.lock:
            self._table(self.db)
            if (cache.generation is None or cache.generation < generation
                    or self._apply_log(self.db, fresh, generation, cache.generation) is None):
                return False
            cache.table.take(fresh)
            cache.saved = base_generation
        return True

    def _save_later(self, cache: _Cache) -> None:
        """Start saving a new base in the background once the rows after this process's are many (or a save was
        skipped while another process saved)."""
        table = cache.table
        if ((cache.again or table.delta_rows() >= max(REBASE_FROM, table.base // 50))
                and (cache.saving is None or cache.saving.done())):
            cache.saving = _SAVER.submit(self._save_base, cache)

    def _close(self, cache: _Cache) -> None:
        """At the application's close: the base saved when this process holds rows it does not have."""
        if cache.saving is not None:
            cache.saving.result()
        self._save_base(cache, closing=True)

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
            self._keywords_written(cache, generation, [id for id in gone if id is not None],
                                   [keyword_row(ch.id, ch.text, ch.metadata) for ch in chunks])
            cache.generation = generation
        self._save_later(cache)
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
            if (files := self._base_files()) is not None:
                for path in files[0].glob(f"{files[1]}.*"):
                    if path.suffix != ".lock":
                        path.unlink(missing_ok=True)
            self._cache.saved = None
            if (words := self._keyword_files()) is not None and words[1].exists():  # (its texts' terms gone from disk too)
                with _locked(words[2]):
                    words[1].unlink(missing_ok=True)
                    shutil.rmtree(words[0], ignore_errors=True)

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
            self._save_base(cache)  # (mapped from the file it is saved to: shared with every process)
        else:
            self._save_later(cache)
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

    def _keyword_files(self) -> tuple[Path, Path, Path] | None:
        """(index folder, its state: the generation it holds and its chunks' analyses, lock) of the KB's keyword index
        on disk (``<file>.keywords/``); None for a database in memory (the index is then this process's own)."""
        if self.db.path == ":memory:":
            return None
        folder, name = Path(self.db.path + ".keywords"), hashlib.sha256(self.kb_id.encode()).hexdigest()[:16]
        return folder / name, folder / f"{name}.json", folder / f"{name}.lock"

    def _keywords_written(self, cache: _Cache, generation: int, gone: list[str], written: list[Any]) -> None:
        """A write of this process (``generation``) put into the keyword index when it held the generation before it
        (else the next keyword search brings it up to date by the log)."""
        if (files := self._keyword_files()) is None:
            if cache.keywords is not None and cache.keywords_generation == cache.generation:  # kept current
                cache.keywords.write(gone, written)
                cache.keywords_generation = generation
            return
        if cache.keywords is None or cache.keywords_generation != cache.generation:
            return
        with _locked(files[2]):
            if _read_json(files[1]).get("generation") == cache.generation:
                cache.keywords.write(gone, written)
                _keyword_state(files[1], generation, cache.keywords)
                cache.keywords_generation = generation

    def _keywords(self, cache: Any) -> KeywordIndex:
        """The knowledge base's keyword index at the cache's generation (under the table's lock). On disk (a file
        database): opened once, brought up to date by the log when another process wrote, built afresh when the log
        does not reach (one process at a time: the lock file). In memory: built again when another process wrote."""
        if cache.keywords is not None and cache.keywords_generation == cache.generation:
            return cache.keywords
        if (files := self._keyword_files()) is None:
            cache.keywords = KeywordIndex(self._keyword_rows())
        else:
            folder, state_file, lock = files
            try:
                folder.parent.mkdir(exist_ok=True)
                with _locked(lock):
                    cache.keywords = self._keywords_on_disk(cache, folder, state_file)
            except OSError as e:  # (a full disk, a folder not writable)
                log.warning("knowledge base %s: its keyword index could not be kept beside %s (%s); built in memory",
                            self.kb_id, self.db.path, e)
                cache.keywords = KeywordIndex(self._keyword_rows())
        cache.keywords_generation = cache.generation
        return cache.keywords

    def _keywords_on_disk(self, cache: _Cache, folder: Path, state_file: Path) -> KeywordIndex:
        """The index in ``folder`` at the cache's generation or later (with the lock file held)."""
        state, index, generation = _read_json(state_file), cache.keywords, cache.generation
        assert generation is not None  # (read by the caller)
        if isinstance(state.get("generation"), int) and folder.exists():
            try:
                if index is None:
                    index = KeywordIndex.opened(folder, state.get("analyses", []))
                else:
                    index.analyses = set(state.get("analyses", []))
                    index.refresh()
            except (OSError, ValueError):
                index = None
            have = state["generation"]
            if index is not None and have >= generation:
                return index
            if index is not None and (changes := self._changes(self.db, have, generation, 100_000)) is not None:
                ids, rows, metadata = changes
                index.write(ids, [keyword_row(r[0], r[1], m) for r, m in zip(rows, metadata)])
                _keyword_state(state_file, generation, index)
                return index
        index = KeywordIndex(self._keyword_rows(), folder)
        _keyword_state(state_file, generation, index)
        return index

    def _keyword_rows(self) -> Iterable[Any]:
        """(id, text, acl, language) of every chunk, as the keyword index takes them."""
        rows = self.db.query("SELECT id, text, CASE json_type(metadata, '$.acl') WHEN 'array' THEN json_extract(metadata, "
                             "'$.acl') END AS acl, CASE json_type(metadata, '$.language') WHEN 'text' THEN "
                             "json_extract(metadata, '$.language') END AS language FROM kb_chunks WHERE kb=?", (self.kb_id,))
        return ((r["id"], r["text"], [e for e in json.loads(r["acl"]) if isinstance(e, str)] if r["acl"] else [], r["language"])
                for r in rows)

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
