"""``pgvector``: PostgreSQL + pgvector over psycopg 3.

One table per knowledge base, ``eddi_kb_<sanitised id>`` (at most 63 characters, as EDDI),
with an HNSW cosine index. The vector dimension is fixed when the table is created (from
``storeParameters.dimension`` or the first vectors written) and checked on every write and
search with a clear error. Filters compile to SQL over a JSONB column.

storeParameters: ``url`` (a libpq URI) or ``host``/``port``/``database``/``user``/``password``;
``tableName``; ``dimension``; ``index`` (``hnsw``, the default, or ``none`` for exact scans);
``efSearch`` (HNSW candidate list, default 100).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql as pgsql

from eddi_rag.common.parameters import alias
from eddi_rag.stores import filters, langchain4j, ownership, pgvector_keywords
from eddi_rag.stores.base import (
    COLLECTIONS,
    KEYWORD_SEARCH,
    LIST_FILTERING,
    METADATA_FILTERING,
    PERSISTENT,
    SEARCH,
    Chunk,
    DimensionMismatchError,
    KeywordHit,
    SearchHit,
    StoreContext,
    StoreHealth,
)
from eddi_rag.stores.embedded.keywords import KeywordIndex
from eddi_rag.stores.languages import postgres_configuration
from eddi_rag.stores.toolkit import check_dimension, check_vectors, engine_name, parameters_schema, query_vector

MAX_IDENTIFIER = 63


def table_name(kb_id: str) -> str:
    """``eddi_kb_<id>`` in [a-z0-9_], at most PostgreSQL's 63 characters (engine_name)."""
    return engine_name(kb_id, "a-z0-9_", lower=True, max_length=MAX_IDENTIFIER)


def physical_table(value: str) -> str:
    """A table as PostgreSQL names it: an unquoted (plain) name folded to lower case and without the ``public.``
    schema, as PostgreSQL reads ``EDDI_KB_X`` and ``public.eddi_kb_x`` (both ``eddi_kb_x``); a name that is not
    plain (saved before such names were refused) stays as it was written, quoted."""
    name = value.strip()
    if ownership.PLAIN_PG_TABLE.fullmatch(name):
        name = name.lower()
        schema, _, table = name.rpartition(".")
        if schema not in ("", "public"):
            raise ValueError(f"storeParameters.tableName {value!r} names a schema other than public: this product's "
                             "tables live in the public schema")
        return table
    return value


def connection_string(params: dict[str, Any]) -> str:
    if params.get("url"):
        return str(params["url"])
    if not params.get("password") and not params.get("host", "").startswith("/"):
        raise ValueError("storeParameters.password is required for pgvector (or give storeParameters.url)")
    parts = {
        "host": params.get("host", "localhost"),
        "port": params.get("port", 5432),
        "dbname": params.get("database", "postgres"),
        "user": params.get("user", "postgres"),
        "password": params.get("password", ""),
    }
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in parts.items()})


# --- the where language in PostgreSQL --------------------------------------------------

def to_postgres(node: filters.Node | None, column: str = "metadata", langchain4j_rows: bool = False
                ) -> tuple[pgsql.Composable, list[Any]]:
    """``_compile``, remembered for the nodes seen last: every search's scope (the reader's, shared with the other
    searches of a turn) is mostly the same nodes again, and composing SQL is most of a query's Python in psycopg."""
    try:  # (keyed by its repr too: equal nodes may differ in type, as True and 1 do, and compile differently)
        expr, params = _remembered(repr(node), node, column, langchain4j_rows)
    except TypeError:  # a value that cannot be a key (a list compared whole)
        expr, params = _compile(node, column, langchain4j_rows)
    return expr, list(params)


@functools.lru_cache(maxsize=2048)
def _remembered(_: str, node: filters.Node | None, column: str, langchain4j_rows: bool) -> tuple[pgsql.Composable, list[Any]]:
    return _compile(node, column, langchain4j_rows)


def _compile(node: filters.Node | None, column: str = "metadata", langchain4j_rows: bool = False
             ) -> tuple[pgsql.Composable, list[Any]]:
    """Compile the filter AST to a boolean SQL expression over a JSONB column.

    jsonb equality is already type-aware (1 = 1.0, "1" != 1, true != 1); ordering compares
    numbers as numeric and strings byte-wise (COLLATE "C"), as the reference evaluator does.
    ``langchain4j_rows``: the column is langchain4j's JSON (cast), and a row of EDDI's has its document id in
    ``documentId`` or ``source`` (stores.langchain4j); the filter comes encoded as such rows store their values (booleans
    as strings, guarded by their marks: ``langchain4j.encode_node``, applied once by the store)."""
    if node is None:
        return pgsql.SQL("TRUE"), []
    if isinstance(node, (filters.And, filters.Or)):
        parts = [to_postgres(n, column, langchain4j_rows) for n in node.children]
        joiner = pgsql.SQL(" AND " if isinstance(node, filters.And) else " OR ")
        return pgsql.SQL("({})").format(joiner.join(p for p, _ in parts)), [x for _, ps in parts for x in ps]
    col: pgsql.Composable = pgsql.Identifier(column)
    value = node.value
    if langchain4j_rows:
        col = pgsql.SQL("({}::jsonb)").format(col)
    field: pgsql.Composable = pgsql.SQL("({} -> %s)").format(col)
    field_params: list[Any] = [node.field]
    if langchain4j_rows and node.field == "document_id":
        field = pgsql.SQL("COALESCE({c} -> 'document_id', {c} -> 'documentId', {c} -> 'source')").format(c=col)
        field_params = []

    def eq(v: Any) -> tuple[pgsql.Composable, list[Any]]:
        return pgsql.SQL("COALESCE({} = %s::jsonb, FALSE)").format(field), [*field_params, json.dumps(v)]

    if node.op == "$eq" and not langchain4j_rows:  # as the expression index (``document_id``) has it, so it is used
        # (a missing field gives NULL, which WHERE drops as it drops FALSE; no NOT is ever above a $eq)
        return pgsql.SQL("({} -> {}) = %s::jsonb").format(col, pgsql.Literal(node.field)), [json.dumps(value)]
    if node.op in ("$eq", "$ne"):
        expr, params = eq(value)
        return (expr if node.op == "$eq" else pgsql.SQL("NOT {}").format(expr)), params
    if node.op in filters.CONTAINS:
        filters.refuse_lists(node if langchain4j_rows else None, "EDDI's langchain4j rows hold scalar metadata only, no lists")
        expr = pgsql.SQL("COALESCE((jsonb_typeof({f}) = 'array' AND {f} ?| %s::text[]), FALSE)").format(f=field)
        params = [*field_params, *field_params, list(value)]
        return (expr if node.op == "$containsAny" else pgsql.SQL("NOT {}").format(expr)), params
    if node.op in ("$in", "$nin"):
        parts = [eq(v) for v in value]
        expr = pgsql.SQL("({})").format(pgsql.SQL(" OR ").join(p for p, _ in parts)) if parts else pgsql.SQL("FALSE")
        params = [x for _, ps in parts for x in ps]
        return (expr if node.op == "$in" else pgsql.SQL("NOT {}").format(expr)), params
    op = pgsql.SQL({"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[node.op])
    text = pgsql.SQL("({} ->> %s)").format(col)
    if isinstance(value, str):
        template = "COALESCE((jsonb_typeof({field}) = 'string' AND {text} COLLATE \"C\" {op} %s COLLATE \"C\"), FALSE)"
    else:
        template = "COALESCE((jsonb_typeof({field}) = 'number' AND {text}::numeric {op} %s::numeric), FALSE)"
    return pgsql.SQL(template).format(field=field, text=text, op=op), [*field_params, node.field, value]


def _floats(value: Any) -> list[float]:
    """A pgvector value as floats (pgvector returns numpy arrays or Vector objects by version)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32).tolist()


class PgVectorStore:
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, PERSISTENT, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema(
            {
                "url": {"type": "string", "description": "libpq URI; replaces host/port/database/user/password."},
                "host": {"type": "string", "default": "localhost"},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 5432},
                "database": {"type": "string", "default": "postgres"},
                "user": {"type": "string", "default": "postgres"},
                "password": {"type": "string", "description": "Use a reference: ${eddivault:KEY}."},
                "tableName": {"type": "string", "maxLength": MAX_IDENTIFIER, "description": "Default eddi_kb_<sanitised id>."},
                "table": alias("tableName"),
                "dimension": {"type": "integer", "minimum": 1, "maximum": 16000},
                "index": {"enum": ["hnsw", "none"], "default": "hnsw"},
                "efSearch": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
            },
            anyOf=[{"required": ["url"]}, {"required": ["password"]}],
        )

    @staticmethod
    def place(kb_id: str, params: dict[str, Any], context: StoreContext) -> str:
        """The physical table this store addresses (stores.ownership records who owns it)."""
        return physical_table(str(params.get("tableName") or table_name(kb_id)))

    def exists(self) -> bool:
        return bool(self._one("SELECT to_regclass(quote_ident(%s)) IS NOT NULL", (self.table,)))

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        self.kb_tag = params.get("kbTag")  # EDDI's "id" namespace: only the chunks tagged kbId=<this>
        self.name_tag: str | None = None  # the kbId EDDI's name layout writes (a table found in its layout)
        self._layout(params.get("layout") == langchain4j.LAYOUT)  # an EDDI (langchain4j) table, adopted in place
        self.table = physical_table(str(params.get("tableName") or table_name(kb_id)))
        if len(self.table) > MAX_IDENTIFIER:
            raise ValueError(f"storeParameters.tableName {self.table!r} is longer than {MAX_IDENTIFIER} characters")
        self.configured_dimension = int(params["dimension"]) if params.get("dimension") else None
        self.ef_search = int(params.get("efSearch", 100))
        # PostgreSQL's full-text search (an adopted table's keyword search) in the knowledge base's language
        configuration = postgres_configuration(params.get(langchain4j.LANGUAGE) or "auto")
        self._config, self._english = pgsql.Literal(configuration), configuration == "english"
        self.index = str(params.get("index", "hnsw"))
        if self.index not in ("hnsw", "none"):
            raise ValueError(f"storeParameters.index must be 'hnsw' or 'none', got {self.index!r}")
        self._database = connection_string(params)
        self._conn = psycopg.connect(self._database, autocommit=True)
        self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(self._conn)
        version = self._one("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        self._iterative_scan = tuple(int(x) for x in version.split(".")[:2]) >= (0, 8)
        self._lock = threading.RLock()
        self._searching: psycopg.Connection | None = None  # vector searches' own connection (opened at the first)
        self._searching_lock = threading.Lock()
        self._ident = pgsql.Identifier(self.table)
        self._dimension = self._existing_dimension()
        if not self.l4j and params.get("tableName") and self._dimension is not None and self._langchain4j_columns():
            # EDDI's own table parameter, no storeNamespace: EDDI reads that as its name layout (stores.langchain4j)
            self._layout(True)
            self.name_tag = params.get(langchain4j.NAME_TAG)
        # A table this product did not make keeps its schema (an adopted EDDI table: nothing added to it, so EDDI's
        # inserts pay for nothing of ours): full-text search then reads its text as it goes (``_tsv``). A table of
        # ours made before full-text search existed gets its column at its first write. Nothing is changed here, so
        # opening a store (to ask whether it exists, or whose it is) changes nothing.
        self._tsv_column = self._dimension is not None and "tsv" in self._columns()
        if self._dimension and self.configured_dimension and self._dimension != self.configured_dimension:
            raise DimensionMismatchError(
                f"table {self.table} holds {self._dimension}-dimensional vectors but storeParameters.dimension is "
                f"{self.configured_dimension}: drop the table or fix the configuration"
            )

    def _layout(self, l4j: bool) -> None:
        """Rows in langchain4j's layout (``l4j``) or ours: what a row answers as its chunk id, and how rows are found
        by chunk ids (langchain4j: by its UUID key)."""
        self.l4j = l4j
        if l4j:  # langchain4j's metadata holds scalars only: no list to filter on
            self.capabilities = type(self).capabilities - {LIST_FILTERING}
        self._key: pgsql.Composable = pgsql.SQL("COALESCE((metadata::jsonb ->> 'chunkId'), embedding_id::text)") \
            if l4j else pgsql.Identifier("id")
        self._by_ids = pgsql.SQL("embedding_id = ANY(%s::uuid[])" if l4j else "id = ANY(%s)")

    def _columns(self) -> set[str]:
        return {r[0] for r in self._conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(quote_ident(%s)) AND attnum > 0 AND NOT attisdropped",
            (self.table,)).fetchall()}

    def _langchain4j_columns(self) -> bool:
        """Whether the table has langchain4j's key (``embedding_id``) and not ours (``id``)."""
        columns = self._columns()
        return "embedding_id" in columns and "id" not in columns

    @property
    def _tsv(self) -> pgsql.Composable:
        """The text as PostgreSQL's full-text search reads it, in the knowledge base's language: the generated column
        (English's) where the table has one and that is its language."""
        if self._tsv_column and self._english:  # (the column is English's)
            return pgsql.SQL("tsv")
        return pgsql.SQL("to_tsvector({}::regconfig, text)").format(self._config)

    def _cond(self, where: filters.Where) -> tuple[pgsql.Composable, list[Any]]:
        """``where`` in SQL, within the knowledge base's chunks (its kbId tag in EDDI's "id" namespace)."""
        node = filters.node(where)
        if self.kb_tag is not None:
            scope = filters.Compare("kbId", "$eq", self.kb_tag)
            node = scope if node is None else filters.And((node, scope))
        return to_postgres(langchain4j.encode_node(node) if self.l4j and node is not None else node, langchain4j_rows=self.l4j)

    def _row(self, id_: Any, text: str | None, metadata: Any) -> tuple[str, str, dict[str, Any]]:
        """(chunk id, text, metadata) of a row; an EDDI row's with our names (langchain4j.decode)."""
        if not self.l4j:
            return id_, text or "", metadata
        chunk_id, ours = langchain4j.decode(str(id_), metadata)
        return chunk_id, text or "", ours

    def _ids(self, ids: Sequence[str]) -> list[str]:
        return [langchain4j.row_id(i) for i in ids] if self.l4j else list(ids)

    def _one(self, query: Any, params: Any = None) -> Any:
        """The first column of the first row (queries that always answer one row)."""
        row = self._conn.execute(query, params).fetchone()
        if row is None:
            raise RuntimeError(f"no row for {query!r}")
        return row[0]

    # -- schema ---------------------------------------------------------------------------
    def _existing_dimension(self) -> int | None:
        row = self._conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(quote_ident(%s)) AND attname = 'embedding'",
            (self.table,),
        ).fetchone()
        return int(row[0]) if row else None

    def _made(self) -> bool:
        """Whether the table exists, asked again while it did not: a replica that opened the store before another made
        the table (at its first write) reads what the other wrote."""
        if self._dimension is None:
            with self._lock:
                self._dimension = self._existing_dimension()
                self._tsv_column = self._dimension is not None and "tsv" in self._columns()
        return self._dimension is not None

    def _ensure_table(self, cur: psycopg.Cursor, dimension: int) -> None:
        if self._dimension is None:
            expected = self.configured_dimension
            if expected is not None and expected != dimension:
                raise DimensionMismatchError(
                    f"storeParameters.dimension is {expected} but the embedding model gives {dimension}-dimensional vectors"
                )
            columns = ("embedding_id UUID PRIMARY KEY, embedding vector({}), text TEXT NULL, metadata JSON NULL"
                       if self.l4j else  # langchain4j's PgVectorEmbeddingStore, as EDDI creates it
                       "id TEXT PRIMARY KEY, text TEXT NOT NULL, metadata JSONB NOT NULL, embedding vector({}) NOT NULL")
            cur.execute(pgsql.SQL("CREATE TABLE IF NOT EXISTS {} (" + columns + ")").format(
                self._ident, pgsql.Literal(dimension)))
            self._ensure_full_text(cur)
            if self.index == "hnsw":
                self._create_index(cur)
            self._dimension = dimension
        elif not self._tsv_column and not self.l4j:  # a table of ours made before full-text search existed
            self._ensure_full_text(cur)
        check_dimension(self._dimension, dimension, self.kb_id)

    def _ensure_full_text(self, cur: psycopg.Cursor) -> None:
        """A generated tsvector column with a GIN index: PostgreSQL's own full-text search; and an index of the
        chunks by document."""
        cur.execute(pgsql.SQL(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED"
        ).format(self._ident))
        cur.execute(pgsql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (tsv)").format(
            pgsql.Identifier((self.table + "_tsv")[:MAX_IDENTIFIER]), self._ident))
        if not self.l4j:  # a document's chunks (a write replaces them, the neighbour context reads them) by an index
            cur.execute(pgsql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ((metadata -> 'document_id'))").format(
                pgsql.Identifier((self.table + "_doc")[:MAX_IDENTIFIER]), self._ident))
            cur.execute(pgsql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin ((metadata -> 'acl'))").format(
                pgsql.Identifier((self.table + "_acl")[:MAX_IDENTIFIER]), self._ident))  # who may read: ?| by the index
        self._tsv_column = True

    def restore_schema(self) -> None:
        """Take away what an earlier version of this product added to a table it did not make (an adopted EDDI
        table: the ``tsv`` column and its index), once no knowledge base uses the table any more."""
        if self._dimension is None or not self.l4j:
            return
        with self._lock, self._conn.cursor() as cur:
            cur.execute(pgsql.SQL("DROP INDEX IF EXISTS {}").format(pgsql.Identifier((self.table + "_tsv")[:MAX_IDENTIFIER])))
            cur.execute(pgsql.SQL("ALTER TABLE {} DROP COLUMN IF EXISTS tsv").format(self._ident))
        self._tsv_column = False

    def _create_index(self, cur: psycopg.Cursor) -> None:
        cur.execute(pgsql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_cosine_ops)").format(
            pgsql.Identifier((self.table + "_hnsw")[:MAX_IDENTIFIER]), self._ident))

    def create_index(self) -> None:
        """Build the HNSW index now: after a bulk load into a table created with index='none',
        this is much faster than maintaining the index row by row."""
        with self._lock, self._conn.cursor() as cur:
            self._create_index(cur)

    # -- writes ---------------------------------------------------------------------------
    def _insert(self, cur: psycopg.Cursor, chunks: Sequence[Chunk], matrix: np.ndarray) -> None:
        self._ensure_table(cur, matrix.shape[1])
        if self.l4j:
            cur.executemany(
                pgsql.SQL(
                    "INSERT INTO {} (embedding_id, text, metadata, embedding) VALUES (%s::uuid, %s, %s::json, %s) "
                    "ON CONFLICT (embedding_id) DO UPDATE SET text = EXCLUDED.text, metadata = EXCLUDED.metadata, "
                    "embedding = EXCLUDED.embedding"
                ).format(self._ident),
                [(langchain4j.row_id(c.id), c.text, json.dumps(langchain4j.encode(c.id, self._tagged(c.metadata))), matrix[i])
                 for i, c in enumerate(chunks)],
            )
            return
        cur.executemany(
            pgsql.SQL(
                "INSERT INTO {} (id, text, metadata, embedding) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET text = EXCLUDED.text, metadata = EXCLUDED.metadata, embedding = EXCLUDED.embedding"
            ).format(self._ident),
            [(c.id, c.text, json.dumps(c.metadata), matrix[i]) for i, c in enumerate(chunks)],
        )

    def _logged(self, cur: psycopg.Cursor, ids: Sequence[str]) -> None:
        """A write's changed chunks, for the keyword index of every process (stores.pgvector_keywords); not on a
        table of EDDI's, which EDDI writes without the log."""
        if not self.l4j:
            pgvector_keywords.log_writes(cur, self.table, ids)

    @property
    def _bm25(self) -> bool:
        """Whether keyword search is BM25 from the index beside PostgreSQL (stores.pgvector_keywords): on our tables."""
        return not self.l4j and self.kb_tag is None

    def _tagged(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """A chunk's metadata as EDDI's name layout tags it (kbId = the knowledge base's name), in a table found so."""
        return {**metadata, "kbId": self.name_tag} if self.name_tag else metadata

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        matrix = check_vectors(chunks)
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            self._insert(cur, chunks, matrix)
            self._logged(cur, [c.id for c in chunks])

    def replace(self, where: filters.Where, chunks: Sequence[Chunk]) -> None:
        cond, params = self._cond(where)
        matrix = check_vectors(chunks) if chunks else None
        made = self._made()  # (a table another process made: its chunks ``where`` names go too)
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            gone: list[str] = []
            if made:
                cur.execute(pgsql.SQL("DELETE FROM {} WHERE {} RETURNING {}").format(self._ident, cond, self._key), params)
                gone = [r[0] for r in cur.fetchall()]
            if matrix is not None:  # there are chunks
                self._insert(cur, chunks, matrix)
            if self._dimension is not None:
                self._logged(cur, [*gone, *(c.id for c in chunks)])

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        node = filters.node(where)
        if (ids is None and node is None) or not self._made():
            return 0
        cond, params = self._cond(node)
        query = pgsql.SQL("DELETE FROM {} WHERE {}").format(self._ident, cond)
        if ids is not None:
            query = pgsql.SQL("{} AND {}").format(query, self._by_ids)
            params = [*params, self._ids(ids)]
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            cur.execute(pgsql.SQL("{} RETURNING {}").format(query, self._key), params)
            gone = [r[0] for r in cur.fetchall()]
            if gone:
                self._logged(cur, gone)
            return len(gone)

    def drop(self) -> None:
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            cur.execute(pgsql.SQL("DROP TABLE IF EXISTS {}").format(self._ident))
            pgvector_keywords.log_drop(cur, self.table)
            self._dimension = None
        pgvector_keywords.forget(self._database, self.table)

    # -- reads ----------------------------------------------------------------------------
    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        return [SearchHit(id_, text, metadata, float(r[3])) for r in self._nearest(vector, k, where, True)
                for id_, text, metadata in [self._row(*r[:3])]]

    def nearest(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[tuple[str, float]]:
        """(id, cosine) of what ``search`` finds (RankedIds)."""
        return [(r[0], float(r[1])) for r in self._nearest(vector, k, where, False)]

    def _nearest(self, vector: Sequence[float], k: int, where: filters.Where, rows: bool) -> list[tuple[Any, ...]]:
        """The ``k`` nearest chunks ``where`` keeps: (id, text, metadata, cosine) with their ``rows``, else (id, cosine)."""
        node = filters.node(where)
        self._made()
        q = query_vector(vector, self._dimension, k, self.kb_id)
        if q is None:
            return []
        cond, params = self._cond(node)
        filtered = node is not None or self.kb_tag is not None
        # The inner ORDER BY is the distance alone, so the HNSW index can serve it; a few
        # extra rows let the outer query break ties by id.
        query = pgsql.SQL(
            "SELECT id, {r}1 - distance FROM (SELECT {id} AS id, {r}embedding <=> %s AS "
            "distance FROM {t} WHERE {c} ORDER BY embedding <=> %s LIMIT %s) AS nearest ORDER BY distance, id LIMIT %s"
        ).format(id=self._key, t=self._ident, c=cond, r=pgsql.SQL("text, metadata, " if rows else ""))
        fetch = k + 16
        with self._searching_lock, (conn := self._search_connection()).transaction(), conn.cursor() as cur:
            if filtered and self._iterative_scan:
                # pgvector >= 0.8: filtered HNSW scans keep going until k rows pass the filter.
                cur.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            # The candidate list holds ``efSearch`` or twice the rows asked, whichever is more (a hybrid pool of 50:
            # 132; at 100k chunks 91% of the exact 10 nearest among its 50, 81% with 100, 98.5% with 500). Before 0.8,
            # HNSW filters after that list: a list of 10 x k (at most pgvector's 1,000) when the filter dropped
            # candidates, then an exact scan if still fewer than k passed. The list is widened only then: every search
            # is filtered (the reader's scope), and 10 x k for a pool of 50 costs twice as much (16.5 against 7.8 ms).
            widths = [min(max(self.ef_search, 2 * fetch), 1000)]
            if filtered and not self._iterative_scan:
                widths += [w for w in [min(1000, max(widths[0], 10 * k))] if w > widths[0]]
            for ef in widths:
                cur.execute(pgsql.SQL("SET LOCAL hnsw.ef_search = {}").format(pgsql.Literal(ef)))
                cur.execute(query, [q, *params, q, fetch, k])
                found = cur.fetchall()
                if len(found) == k or self._iterative_scan:
                    break
            else:
                if filtered and len(found) < k:  # the candidate lists ran out before k rows passed the filter
                    cur.execute("SET LOCAL enable_indexscan = off")
                    cur.execute(query, [q, *params, q, fetch, k])
                    found = cur.fetchall()
        return found

    def _search_connection(self) -> psycopg.Connection:
        """The connection vector searches use (under ``_searching_lock``): their own, so a hybrid search's vector side
        runs in PostgreSQL while its keyword side runs here (retrieval.retriever); opened at the first search."""
        if self._searching is None or self._searching.closed:
            self._searching = psycopg.connect(self._database, autocommit=True)
            register_vector(self._searching)
        return self._searching

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]:
        """BM25 (the embedded store's tantivy index, kept beside PostgreSQL in this process: stores.pgvector_keywords)
        over the chunks ``where`` keeps, any of the words; on a table of EDDI's PostgreSQL's own full-text search
        (english configuration), ranked by ts_rank_cd."""
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        ranked = self._keyword(text, k, where, found)
        return [KeywordHit(id, *found[id], score) for id, score in ranked]

    def keyword_ranked(self, text: str, k: int, where: filters.Where = None) -> list[tuple[str, float]]:
        """(id, score) of what ``keyword_search`` finds (RankedIds)."""
        return self._keyword(text, k, where, None)

    def _keyword(self, text: str, k: int, where: filters.Where,
                 found: dict[str, tuple[str, dict[str, Any]]] | None) -> list[tuple[str, float]]:
        """(id, score) of the best ``k``; each one's (text, metadata) into ``found`` when given."""
        node = filters.node(where)
        cond, params = self._cond(node)
        terms = re.findall(r"\w+", text.lower())
        if not self._made() or k <= 0 or not terms:
            return []
        columns = pgsql.SQL(", text, metadata" if found is not None else "")
        if self._bm25:
            return self._bm25_search(text, k, node, cond, params, columns, found)
        query = pgsql.SQL(
            "SELECT {id} AS id, ts_rank_cd({v}, q) AS rank{r} FROM {t}, to_tsquery({cfg}::regconfig, %s) AS q "
            "WHERE {v} @@ q AND {c} ORDER BY rank DESC, id LIMIT %s"
        ).format(id=self._key, t=self._ident, c=cond, v=self._tsv, r=columns, cfg=self._config)
        with self._lock:
            rows = self._conn.execute(query, [" | ".join(terms), *params, k]).fetchall()
        if found is None:
            return [(r[0], float(r[1])) for r in rows]
        ranked = []
        for r in rows:
            id_, text_, metadata = self._row(r[0], r[2], r[3])
            found[id_] = (text_, metadata)
            ranked.append((id_, float(r[1])))
        return ranked

    def _bm25_search(self, text: str, k: int, node: filters.Node | None, cond: pgsql.Composable, params: list[Any],
                     columns: pgsql.Composable, found: dict[str, tuple[str, dict[str, Any]]] | None) -> list[tuple[str, float]]:
        """The index names candidates best first; PostgreSQL's rows say which pass ``where`` (more asked while fewer
        than ``k`` did), and give their text and metadata into ``found`` when given."""
        passed: set[str] = set()
        query = pgsql.SQL("SELECT id{r} FROM {t} WHERE id = ANY(%s) AND {c}").format(t=self._ident, c=cond, r=columns)

        def passing(ranked: list[tuple[str, float]]) -> list[tuple[str, float]]:
            wanted = [id for id, _ in ranked if id not in passed]
            if wanted:
                for r in self._conn.execute(query, [wanted, *params]).fetchall():
                    passed.add(r[0])
                    if found is not None:
                        found[r[0]] = (r[1], r[2])
            return [(id, score) for id, score in ranked if id in passed]

        with self._keywords() as index:
            return index.best(text, k, node, False, passing)  # (k at first: the filter seldom drops a candidate)

    def rows(self, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """(text, metadata) of each of ``ids`` that exists (RankedIds)."""
        if not ids or not self._made():
            return {}
        query = pgsql.SQL("SELECT {id} AS id, text, metadata FROM {t} WHERE {by}").format(
            id=self._key, t=self._ident, by=self._by_ids)
        with self._lock:
            rows = self._conn.execute(query, [self._ids(ids)]).fetchall()
        return {id_: (text, metadata) for r in rows for id_, text, metadata in [self._row(*r)]}

    @contextlib.contextmanager
    def _keywords(self) -> Iterator[KeywordIndex]:
        """The table's BM25 index in this process as of its latest write, used under the store's and the index's locks."""
        entry = pgvector_keywords.cached(self._database, self.table)
        with self._lock, entry.lock:
            yield pgvector_keywords.current(self._conn, self.table, self._ident, entry)

    def keyword_scores(self, text: str, ids: Sequence[str]) -> dict[str, float]:
        """The score ``keyword_search`` gives each of ``ids`` that holds any of the words (KeywordScores)."""
        terms = re.findall(r"\w+", text.lower())
        if not self._made() or not terms or not ids:
            return {}
        if self._bm25:
            with self._keywords() as index:
                return index.scores(text, ids)
        query = pgsql.SQL("SELECT {id} AS id, metadata, ts_rank_cd({v}, q) FROM {t}, to_tsquery({cfg}::regconfig, %s) AS q "
                          "WHERE {v} @@ q AND {by}").format(id=self._key, t=self._ident, v=self._tsv, by=self._by_ids, cfg=self._config)
        with self._lock:
            rows = self._conn.execute(query, [" | ".join(terms), self._ids(ids)]).fetchall()
        return {self._row(r[0], None, r[1])[0]: float(r[2]) for r in rows}

    def similarities(self, vector: Sequence[float], ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that exists to ``vector``, computed in PostgreSQL (Similarities)."""
        if not ids or not self._made():
            return {}
        q = query_vector(vector, self._dimension, len(ids), self.kb_id)
        if q is None:
            return {}
        query = pgsql.SQL("SELECT {id}, 1 - (embedding <=> %s) FROM {t} WHERE {by}").format(
            id=self._key, t=self._ident, by=self._by_ids)
        with self._lock:
            rows = self._conn.execute(query, [q, self._ids(ids)]).fetchall()
        return {r[0]: float(r[1]) for r in rows}

    def get(
        self, where: filters.Where = None, limit: int | None = None, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[Chunk]:
        if not self._made():
            return []
        cond, params = self._cond(where)
        if ids is not None:
            cond, params = pgsql.SQL("{} AND {}").format(cond, self._by_ids), [*params, self._ids(ids)]
        with self._lock:
            rows = self._conn.execute(
                pgsql.SQL("SELECT {id} AS id, text, metadata, embedding FROM {t} WHERE {c} ORDER BY {id} COLLATE \"C\" "
                          "LIMIT %s OFFSET %s").format(id=self._key, t=self._ident, c=cond),
                [*params, limit, offset], binary=True,  # (vectors as floats, not text: 8 times faster to read)
            ).fetchall()
        return [Chunk(id_, text, metadata, _floats(r[3])) for r in rows for id_, text, metadata in [self._row(*r[:3])]]

    def count(self, where: filters.Where = None) -> int:
        if not self._made():
            return 0
        cond, params = self._cond(where)
        with self._lock:
            return self._one(pgsql.SQL("SELECT COUNT(*) FROM {} WHERE {}").format(self._ident, cond), params)

    def health(self) -> StoreHealth:
        try:
            with self._lock:
                version = self._one("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                size = self._one("SELECT COALESCE(pg_total_relation_size(to_regclass(quote_ident(%s))), 0)", (self.table,))
            return {"status": "ok", "details": {"documents": self.count(), "dimension": self._dimension,
                                                "storage_bytes": int(size), "table": self.table, "pgvector": version}}
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {"table": self.table}}

    def close(self) -> None:
        self._conn.close()
        if self._searching is not None:
            self._searching.close()
