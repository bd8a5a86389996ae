"""``chroma``: a Chroma server over its HTTP API (chromadb-client), a collection per KB.

The exact metadata of a chunk is kept as JSON under ``__eddi_meta``; its scalar fields are also
stored flat so Chroma can filter on them. Chroma's own ``where`` language is close to ours, but
cannot range over strings; such filters (and dotted field names) run on the candidates with
the reference evaluator. Writes are not transactional in Chroma: ``replace`` validates first,
writes the new chunks, then deletes the old ones that were not overwritten.

storeParameters: ``host`` (localhost), ``port`` (8000), ``ssl``, ``authToken``, ``tenant``,
``database``, ``collectionName``.

In EDDI's layout (``storeNamespace``, stores.langchain4j) the collection is langchain4j's: UUID ids, the
text as the document, flat metadata of strings and numbers (our chunk id as ``chunkId``), no ``__eddi_meta``;
a filter on ``document_id`` runs on the rows (EDDI's rows name it ``source``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import chromadb
from chromadb.errors import NotFoundError

from eddi_rag.common.parameters import alias
from eddi_rag.stores import filters, langchain4j
from eddi_rag.stores.base import (
    COLLECTIONS,
    LIST_FILTERING,
    METADATA_FILTERING,
    PERSISTENT,
    SEARCH,
    Chunk,
    LayoutMismatchError,
    SearchHit,
    StoreContext,
    StoreHealth,
)
from eddi_rag.stores.toolkit import OverwriteThenPrune, check_dimension, check_vectors, engine_name, normalise, overfetch, parameters_schema, string_lists

META = "__eddi_meta"
LAYOUT_MARK = "eddi:layout"  # a collection this product made in langchain4j's layout (EDDI's make none)
LISTS = "__eddi_list_"  # + a field: the strings of a list-valued field, for $contains
_NEVER = {META: {"$eq": "\x00never"}}
_PAGE = 1000


def collection_name(kb_id: str) -> str:
    name = engine_name(kb_id, "a-zA-Z0-9._-", max_length=511)
    return name if name[-1].isalnum() else name + "0"  # Chroma: starts and ends with [a-zA-Z0-9]


def _native(node: filters.Node, langchain4j_rows: bool = False) -> bool:
    if isinstance(node, (filters.And, filters.Or)):
        return all(_native(n, langchain4j_rows) for n in node.children)
    if node.op in ("$gt", "$gte", "$lt", "$lte") and isinstance(node.value, str):
        return False
    if langchain4j_rows and (node.field == "document_id" or isinstance(node.value, bool)
                             or (isinstance(node.value, tuple) and any(isinstance(v, bool) for v in node.value))):
        return False  # EDDI's rows may keep it under another name; booleans are strings there
    return "." not in node.field and node.field != META and not node.field.startswith(LISTS)


def to_chroma(node: filters.Node) -> dict[str, Any]:
    if isinstance(node, (filters.And, filters.Or)):
        parts = [to_chroma(n) for n in node.children]
        return parts[0] if len(parts) == 1 else {"$and" if isinstance(node, filters.And) else "$or": parts}
    if node.op in filters.CONTAINS:  # Chroma's $contains takes one value: one term per value
        if not node.value:
            return _NEVER if node.op == "$containsAny" else {META: {"$ne": "\x00never"}}
        op = "$contains" if node.op == "$containsAny" else "$not_contains"
        parts = [{LISTS + node.field: {op: value}} for value in node.value]
        return parts[0] if len(parts) == 1 else {"$or" if node.op == "$containsAny" else "$and": parts}
    if node.op in ("$in", "$nin"):
        if not node.value:
            return _NEVER if node.op == "$in" else {META: {"$ne": "\x00never"}}
        by_type: dict[type, list[Any]] = {}  # Chroma wants one type per list: one list per type
        for value in node.value:
            by_type.setdefault(type(_number(value)), []).append(_number(value))
        parts = [{node.field: {node.op: values}} for values in by_type.values()]
        return parts[0] if len(parts) == 1 else {"$or" if node.op == "$in" else "$and": parts}
    return {node.field: {node.op: _number(node.value)}}


def _number(value: Any) -> Any:
    """Numbers go to Chroma as floats, stored and queried: Chroma truncates a float compared
    with an int field (0.5 would match 0) and refuses lists that mix ints and floats."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _flat(metadata: dict[str, Any]) -> dict[str, Any]:
    flat = {k: _number(v) for k, v in metadata.items() if isinstance(v, (str, int, float, bool)) and k != META}
    lists = {LISTS + k: strings for k, strings in string_lists(metadata).items() if strings}  # (Chroma refuses an empty list)
    return {**flat, **lists, META: json.dumps(metadata)}


def _replacing(col: Any, rows: list[str], metadatas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``metadatas`` that replace the rows' stored ones: Chroma's upsert merges a row's metadata with what it held, so a
    field the new metadata lacks (a list emptied, a key gone) is written as None, which removes it."""
    held = col.get(ids=rows, include=["metadatas"])
    before = {row: meta or {} for row, meta in zip(held["ids"], held.get("metadatas") or [])}
    return [{**{k: None for k in before.get(row, {}) if k not in meta}, **meta} for row, meta in zip(rows, metadatas)]


def _integral(value: Any) -> Any:
    """A number Chroma gives back as a float (they are all written as floats): an integer when it is one."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def with_base_url(params: dict[str, Any]) -> dict[str, Any]:
    """EDDI's ``baseUrl`` (``http://host:port``) as host, port and ssl; explicit ones must agree."""
    if not params.get("baseUrl"):
        return params
    url = urlsplit(str(params["baseUrl"]))
    given = {"host": url.hostname or "localhost", "port": url.port or (443 if url.scheme == "https" else 8000),
             "ssl": url.scheme == "https"}
    for key, value in given.items():
        if key in params and params[key] != value:
            raise ValueError(f"storeParameters.baseUrl says {key} {value!r} but storeParameters.{key} is {params[key]!r}")
    return {**params, **given}


class ChromaStore(OverwriteThenPrune):
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, PERSISTENT})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({
            "baseUrl": {"type": "string", "pattern": "^https?://",
                        "description": "EDDI's: http(s)://host:port, in place of host, port and ssl."},
            "host": {"type": "string", "default": "localhost"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 8000},
            "ssl": {"type": "boolean", "default": False},
            "authToken": {"type": "string", "description": "Sent as Authorization: Bearer; use a reference."},
            "tenant": {"type": "string", "default": "default_tenant"},
            "tenantName": alias("tenant"),
            "database": {"type": "string", "default": "default_database"},
            "databaseName": alias("database"),
            "apiVersion": {"enum": ["V1", "v1", "V2", "v2"], "default": "V2",
                           "description": "EDDI's: the Chroma API its client speaks. Ours speaks v2 whatever is set, so a V1 "
                                          "configuration works on a server that serves v2 too (Chroma 0.6 and later)."},
            "collectionName": {"type": "string", "description": "Default eddi_kb_<sanitised id>."},
        })

    @staticmethod
    def place(kb_id: str, params: dict[str, Any], context: StoreContext) -> str:
        """The physical collection this store addresses (stores.ownership records who owns it)."""
        return str(params.get("collectionName") or collection_name(kb_id))

    def exists(self) -> bool:
        return self._col() is not None

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        self.l4j = params.get("layout") == langchain4j.LAYOUT  # EDDI's (langchain4j's) collection, adopted in place
        if self.l4j:  # langchain4j's metadata holds scalars only: no list to filter on
            self.capabilities = type(self).capabilities - {LIST_FILTERING}
        self.kb_tag = params.get("kbTag")
        params = with_base_url({k: v for k, v in params.items() if k not in ("layout", "kbTag")})
        self.name = str(params.get("collectionName") or collection_name(kb_id))
        clients = context.state.setdefault("chroma-clients", {})
        key = tuple(sorted((k, str(v)) for k, v in params.items() if k != "collectionName"))
        if key not in clients:
            headers = {"Authorization": f"Bearer {params['authToken']}"} if params.get("authToken") else None
            try:
                clients[key] = chromadb.HttpClient(
                    host=str(params.get("host", "localhost")), port=int(params.get("port", 8000)), ssl=bool(params.get("ssl", False)),
                    headers=headers, tenant=str(params.get("tenant", "default_tenant")),
                    database=str(params.get("database", "default_database")),
                )
            except ValueError as e:  # chromadb says "Could not connect ..." as a ValueError: the engine is down
                if "connect" not in str(e).lower():
                    raise
                raise ConnectionError(str(e)) from e
        self.client = clients[key]

    def _col(self, create_dim: int | None = None):
        """The collection, looked up each time: another store object may have dropped or re-created it."""
        try:
            return self.client.get_collection(self.name, embedding_function=None)
        except NotFoundError:
            if create_dim is None:
                return None
            return self.client.get_or_create_collection(
                self.name, embedding_function=None, metadata={"hnsw:space": "cosine", "eddi:dimension": create_dim,
                                                              **({LAYOUT_MARK: langchain4j.LAYOUT} if self.l4j else {})})

    @staticmethod
    def _dimension_of(col) -> int | None:
        return None if col is None else (col.metadata or {}).get("eddi:dimension")

    def _dimension(self) -> int | None:
        return self._dimension_of(self._col())

    def _split(self, where: filters.Where) -> tuple[dict | None, filters.Node | None]:
        node = filters.node(where)
        if self.kb_tag is not None:  # EDDI's "id" namespace: only this knowledge base's chunks
            scope = filters.Compare("kbId", "$eq", self.kb_tag)
            node = scope if node is None else filters.And((node, scope))
        if node is None:
            return None, None
        if self.l4j:
            filters.refuse_lists(node, "EDDI's langchain4j records hold scalar metadata only, no lists")
        if _native(node, self.l4j):
            return to_chroma(langchain4j.encode_node(node) if self.l4j else node), None
        return None, langchain4j.encode_node(node) if self.l4j else node  # run on the rows as stored (_view)

    def _meta(self, id_: str, flat: dict[str, Any] | None) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(chunk id, metadata, what a filter run here sees) of a row: ours keep the metadata whole as JSON;
        langchain4j's are flat, and filters see them as stored (booleans as strings), with the document id."""
        if self.l4j:
            stored = {k: _integral(v) for k, v in (flat or {}).items()}
            chunk_id, metadata = langchain4j.decode(id_, stored)
            return chunk_id, metadata, {**stored, "document_id": metadata.get("document_id")}
        metadata = json.loads((flat or {})[META])
        return id_, metadata, metadata

    def _row_ids(self, ids: Sequence[str]) -> list[str]:
        return [langchain4j.row_id(i) for i in ids] if self.l4j else list(ids)

    def _matching(self, where: filters.Where, include: list[str], ids: Sequence[str] | None = None) -> list[dict]:
        col = self._col()
        if col is None or (ids is not None and not ids):
            return []
        native, rest = self._split(where)
        out, offset = [], 0
        while True:
            got = col.get(ids=self._row_ids(ids) if ids is not None else None, where=native, include=include, limit=_PAGE,
                          offset=offset)
            for n, row_id in enumerate(got["ids"]):
                id_, metadata, view = self._meta(row_id, got["metadatas"][n])
                if rest is None or filters.matches(rest, view):
                    out.append({"id": id_, "text": (got.get("documents") or [None] * len(got["ids"]))[n] or "",
                                "metadata": metadata,
                                "vector": None if got.get("embeddings") is None else [float(x) for x in got["embeddings"][n]]})
            if len(got["ids"]) < _PAGE:
                return out
            offset += _PAGE

    # -- writes ---------------------------------------------------------------------------
    def _write(self, chunks: Sequence[Chunk]) -> None:
        matrix = check_vectors(chunks)
        check_dimension(self._dimension(), matrix.shape[1], self.kb_id)
        col = self._col(create_dim=matrix.shape[1])
        layout = col.metadata or {}
        if not self.l4j and ("eddi:dimension" not in layout or layout.get(LAYOUT_MARK) == langchain4j.LAYOUT):
            raise LayoutMismatchError(  # (our layout's rows, __eddi_list_* among them, never land in EDDI's collection)
                f"collection {self.name!r} holds EDDI's (langchain4j's) records, not this store's: set storeNamespace to "
                "read and write it in EDDI's layout, or name another collection; nothing was written")
        last = {c.id: i for i, c in enumerate(chunks)}
        order = sorted(last.values())
        for start in range(0, len(order), _PAGE):
            part = [chunks[i] for i in order[start : start + _PAGE]]
            rows = self._row_ids([c.id for c in part])
            metadatas = [{k: _number(v) for k, v in langchain4j.encode(c.id, c.metadata).items()} if self.l4j
                         else _flat(c.metadata) for c in part]
            col.upsert(ids=rows, embeddings=[matrix[last[c.id]] for c in part], documents=[c.text for c in part],
                       metadatas=_replacing(col, rows, metadatas))

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if chunks:
            self._write(chunks)

    def _ids_matching(self, where: filters.Where) -> list[str]:
        return [r["id"] for r in self._matching(where, include=["metadatas"])]

    def _delete_ids(self, ids: list[str]) -> None:
        col = self._col()
        rows = self._row_ids(ids)
        for start in range(0, len(rows), _PAGE):
            col.delete(ids=rows[start : start + _PAGE])

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        if (ids is None and filters.node(where) is None) or self._col() is None:
            return 0
        found = [r["id"] for r in self._matching(where, include=["metadatas"], ids=ids)]
        self._delete_ids(found)
        return len(found)

    def drop(self) -> None:
        """The rows first, then the collection: Chroma 1.5.9's server keeps a deleted collection's list-valued
        metadata and hands it to rows of a collection made afterwards, whatever its name (an ``acl`` list on another
        knowledge base's chunk); deleting the rows removes it."""
        col = self._col()
        if col is None:
            return
        while True:
            got = col.get(limit=_PAGE, include=[])
            if not got["ids"]:
                break
            col.delete(ids=got["ids"])
        try:
            self.client.delete_collection(self.name)
        except NotFoundError:
            pass

    # -- reads ----------------------------------------------------------------------------
    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        native, rest = self._split(where)
        col = self._col()
        dim = self._dimension_of(col)
        if col is None or k <= 0:
            return []
        q = normalise(vector)[0]
        check_dimension(dim, q.shape[0], self.kb_id)
        total = col.count()

        def candidates(n: int) -> list[SearchHit]:
            got = col.query(query_embeddings=[q], n_results=n, where=native, include=["documents", "metadatas", "distances"])
            hits = []
            for j, row_id in enumerate(got["ids"][0]):
                id_, metadata, view = self._meta(row_id, got["metadatas"][0][j])
                if rest is None or filters.matches(rest, view):
                    hits.append(SearchHit(id_, got["documents"][0][j] or "", metadata, 1.0 - float(got["distances"][0][j])))
            return hits

        return overfetch(candidates, k, total)

    def get(self, where: filters.Where = None, limit: int | None = None, offset: int = 0,
            ids: Sequence[str] | None = None) -> list[Chunk]:
        rows = sorted(self._matching(where, include=["documents", "metadatas", "embeddings"], ids=ids), key=lambda r: r["id"])
        rows = rows[offset : None if limit is None else offset + limit]
        return [Chunk(r["id"], r["text"], r["metadata"], r["vector"]) for r in rows]

    def count(self, where: filters.Where = None) -> int:
        col = self._col()
        if col is None:
            return 0
        if filters.node(where) is None and self.kb_tag is None:
            return col.count()
        return len(self._matching(where, include=["metadatas"]))

    def health(self) -> StoreHealth:
        try:
            self.client.heartbeat()
            return {"status": "ok", "details": {"documents": self.count(), "dimension": self._dimension(),
                                                "collections": self.client.count_collections(), "collection": self.name}}
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {"collection": self.name}}
